package promcourier_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestHealthAndContractGauges: a command held back because its source's
// contract was pinned anew after it was enqueued is what store.Health
// reports as blocked, code contract_changed. Before the gauges below, no
// metric moved for it, so an alert on the metrics never fired; a
// healthy outbox reads 0 on both.
func TestHealthAndContractGauges(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "host.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := promcourier.New()
	c.Watch(s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	gauges := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "courier_health_blocked", "courier_outbox_contract_mismatches"); err != nil {
			t.Fatal(err)
		}
	}
	const help = `
# HELP courier_health_blocked 1 when the outbox's health needs an operator, labelled with its code (store.Health); 0 when it does not.
# TYPE courier_health_blocked gauge
# HELP courier_outbox_contract_mismatches Unfinished deliveries enqueued under another capabilities digest than their endpoint's pin, held back for an operator.
# TYPE courier_outbox_contract_mismatches gauge
`
	gauges(help + "courier_health_blocked{code=\"\"} 0\ncourier_outbox_contract_mismatches 0\n")

	const source = "https://source.example/commands"
	cmd, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r-1", SourceMaxAttempts: 3,
		CapabilitiesSHA256: strings.Repeat("a", 64), Body: json.RawMessage(`{"price":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := cmd.Payload()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.EnqueueCommand(ctx, s.DB(), store.CommandParams{Endpoint: source, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	if err := s.Contracts.Pin(ctx, source, strings.Repeat("b", 64)); err != nil {
		t.Fatal(err)
	}
	gauges(help + "courier_health_blocked{code=\"contract_changed\"} 1\ncourier_outbox_contract_mismatches 1\n")
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

package promcourier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/codetest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestCodesNotCouriersAreOther: a code that is not one of courier's is
// counted with code "other", on both sides. Here a receiver's function
// rejects each notification with a code made from its id, the sender's
// to choose (one of them not even UTF-8), and the sender's Classify
// takes the receiver's problem code for its verdict's: every new id
// would be a new series in both processes' Prometheus, and the code that
// is not UTF-8 made the Collector's hook panic (the handler dropped the
// panic, and the request went uncounted).
func TestCodesNotCouriersAreOther(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	sent, received := promcourier.New(), promcourier.New()
	inbox, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()
	keys := couriertest.StandardWebhooksKeys("s")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier, Hook: received.ReceiverHook},
		func(_ context.Context, _ *sqlx.Tx, n note) error {
			if n.ID == "n-0" {
				return handler.Reject(courier.Code("bad\xff"), "")
			}
			return handler.Reject(courier.Code("bad_"+n.ID), "")
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Hook: sent.StoreHook})
	if err != nil {
		t.Fatal(err)
	}
	defer outbox.Close()
	const n = 4
	for i := range n {
		id := "n-" + strconv.Itoa(i)
		if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{NotificationID: id, Endpoint: srv.URL, Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(), Hook: sent.WorkerHook,
		Classify: func(resp *http.Response, err error) client.Verdict {
			var p struct{ Code courier.Code }
			if resp != nil && json.NewDecoder(resp.Body).Decode(&p) == nil {
				return client.Verdict{Code: p.Code} // the receiver's own code, as it sent it
			}
			return client.DefaultClassify(resp, err)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		collector *promcourier.Collector
		want      string
	}{
		{received, `
# HELP courier_receiver_requests_total Requests answered by receivers, by outcome and code.
# TYPE courier_receiver_requests_total counter
courier_receiver_requests_total{code="other",outcome="rejected"} 4
`},
		{sent, `
# HELP courier_attempts_total Delivery attempts finished by workers, by outcome and code.
# TYPE courier_attempts_total counter
courier_attempts_total{code="other",outcome="failed"} 3
courier_attempts_total{code="receiver_rejected",outcome="failed"} 1
`},
	} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c.collector)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(c.want), "courier_receiver_requests_total", "courier_attempts_total"); err != nil {
			t.Error(err)
		}
	}
}

// TestEveryCourierCodeIsItsOwn: each of courier's codes (every constant of
// type Code the courier package declares) is counted under its own name,
// not as "other".
func TestEveryCourierCodeIsItsOwn(t *testing.T) {
	t.Parallel()
	_, codes := codetest.Declared(t)
	c := promcourier.New()
	for _, code := range codes {
		c.ReceiverHook(handler.Event{Outcome: handler.OutcomeRejected, HTTPStatus: 400, Code: code})
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	var want strings.Builder
	want.WriteString("# HELP courier_receiver_requests_total Requests answered by receivers, by outcome and code.\n# TYPE courier_receiver_requests_total counter\n")
	for _, code := range codes {
		want.WriteString(`courier_receiver_requests_total{code="` + string(code) + `",outcome="rejected"} 1` + "\n")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "courier_receiver_requests_total"); err != nil {
		t.Fatal(err)
	}
}

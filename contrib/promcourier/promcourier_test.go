package promcourier_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

type note struct {
	ID string `json:"id" validate:"required,courier_token"`
}

func (n note) DedupeKey() string { return n.ID }

// TestCollector delivers two notifications through a receiver that fails
// every first attempt, and reads what the Collector registered in an
// application's registry says: the counters the hooks fed, and the gauges
// read from the store at scrape time.
func TestCollector(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	reg := prometheus.NewPedanticRegistry()
	c := promcourier.New()
	sender, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Hook: c.StoreHook})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	c.Watch(sender)
	reg.MustRegister(c)
	inbox, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer inbox.Close()

	keys := couriertest.StandardWebhooksKeys("s")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier, Hook: c.ReceiverHook},
		func(context.Context, *sqlx.Tx, note) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, couriertest.Sequence(couriertest.Fault{Status: 503}))
	defer srv.Close()
	for _, id := range []string{"n-1", "n-2"} {
		tx, _ := sender.Begin(ctx)
		if _, err := sender.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: srv.URL, Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
		tx.Commit()
	}
	w, err := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Transport: srv.Guard().Transport(), Hook: c.WorkerHook,
		Backoff: func(int, time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := sender.Endpoints.Disable(ctx, "https://gone.example/hooks"); err != nil {
		t.Fatal(err)
	}

	want := `
# HELP courier_attempts_total Delivery attempts finished by workers, by outcome and code.
# TYPE courier_attempts_total counter
courier_attempts_total{code="",outcome="succeeded"} 2
courier_attempts_total{code="receiver_unavailable",outcome="retry"} 2
# HELP courier_claimed_total Deliveries leased by workers.
# TYPE courier_claimed_total counter
courier_claimed_total 4
# HELP courier_endpoints Endpoints whose breaker is not closed, by state.
# TYPE courier_endpoints gauge
courier_endpoints{state="disabled"} 1
courier_endpoints{state="half_open"} 0
courier_endpoints{state="open"} 0
# HELP courier_enqueued_total Deliveries written to the outbox (counted at enqueue, before the caller's commit).
# TYPE courier_enqueued_total counter
courier_enqueued_total 2
# HELP courier_outbox_deliveries Deliveries in the outbox, by status.
# TYPE courier_outbox_deliveries gauge
courier_outbox_deliveries{status="failed"} 0
courier_outbox_deliveries{status="leased"} 0
courier_outbox_deliveries{status="pending"} 0
courier_outbox_deliveries{status="quarantined"} 0
courier_outbox_deliveries{status="retry_wait"} 0
courier_outbox_deliveries{status="succeeded"} 2
courier_outbox_deliveries{status="suppressed"} 0
# HELP courier_outbox_due Pending or retrying deliveries due now.
# TYPE courier_outbox_due gauge
courier_outbox_due 0
# HELP courier_outbox_expired_leases Leases past expiry, not yet reclaimed.
# TYPE courier_outbox_expired_leases gauge
courier_outbox_expired_leases 0
# HELP courier_receiver_requests_total Requests answered by receivers, by outcome and code.
# TYPE courier_receiver_requests_total counter
courier_receiver_requests_total{code="",outcome="accepted"} 2
# HELP courier_settled_total Attempts settled, by the delivery's resulting status.
# TYPE courier_settled_total counter
courier_settled_total{status="retry_wait"} 2
courier_settled_total{status="succeeded"} 2
`
	names := []string{"courier_attempts_total", "courier_claimed_total", "courier_endpoints", "courier_enqueued_total",
		"courier_outbox_deliveries", "courier_outbox_due", "courier_outbox_expired_leases",
		"courier_receiver_requests_total", "courier_settled_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "courier_attempt_duration_seconds"); n != 2 {
		t.Fatalf("%d duration series, want 2 (retry, succeeded)", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestCollectorWithoutStore has counters and histograms only.
func TestCollectorWithoutStore(t *testing.T) {
	t.Parallel()
	c := promcourier.New()
	c.StoreHook(store.Event{Kind: store.EventEnqueued, N: 3})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP courier_enqueued_total Deliveries written to the outbox (counted at enqueue, before the caller's commit).
# TYPE courier_enqueued_total counter
courier_enqueued_total 3
`), "courier_enqueued_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "courier_outbox_deliveries"); n != 0 {
		t.Fatalf("gauges without a store: %d", n)
	}
}

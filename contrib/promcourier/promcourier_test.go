package promcourier_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/endpoint"
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
	// A limited endpoint with a delivery in flight, and another whose
	// ordering key a failed delivery holds.
	if err := sender.Endpoints.SetLimits(ctx, "https://busy.example/hooks", store.Limits{MaxInFlight: 4, Rate: 10}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.EnqueueParams{
		{NotificationID: "b-1", Endpoint: "https://busy.example/hooks", Payload: []byte(`{}`)},
		{NotificationID: "k-1", Endpoint: "https://keyed.example/hooks", Payload: []byte(`{}`), OrderingKey: "order-7"},
		{NotificationID: "k-2", Endpoint: "https://keyed.example/hooks", Payload: []byte(`{}`), OrderingKey: "order-7"},
	} {
		if _, err := sender.Outbox.Enqueue(ctx, sender.DB(), p); err != nil {
			t.Fatal(err)
		}
	}
	busy, failed := make(chan struct{}), make(chan struct{})
	keyed, err := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Timeout: time.Second, Lease: time.Minute,
		Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.URL.Host == "busy.example" {
				close(busy)
				<-r.Context().Done() // held in flight until the test ends
				return nil, r.Context().Err()
			}
			return &http.Response{StatusCode: 422, Body: http.NoBody, Header: http.Header{}}, nil
		}),
		Hook: func(e client.Event) {
			if e.NotificationID == "k-1" {
				close(failed)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	workCtx, stopWork := context.WithCancel(ctx)
	worked := make(chan struct{})
	go func() { keyed.Work(workCtx); close(worked) }()
	defer func() { stopWork(); <-worked }()
	<-busy
	<-failed

	want := `
# HELP courier_attempts_total Delivery attempts finished by workers, by outcome and code.
# TYPE courier_attempts_total counter
courier_attempts_total{code="",outcome="succeeded"} 2
courier_attempts_total{code="receiver_unavailable",outcome="retry"} 2
# HELP courier_claimed_total Deliveries leased by workers.
# TYPE courier_claimed_total counter
courier_claimed_total 6
# HELP courier_endpoints Endpoints whose breaker is not closed, by state.
# TYPE courier_endpoints gauge
courier_endpoints{state="disabled"} 1
courier_endpoints{state="half_open"} 0
courier_endpoints{state="open"} 0
# HELP courier_enqueued_total Deliveries written to the outbox (counted at enqueue, before the caller's commit).
# TYPE courier_enqueued_total counter
courier_enqueued_total 5
# HELP courier_endpoint_in_flight Deliveries leased now to an endpoint, by every worker.
# TYPE courier_endpoint_in_flight gauge
courier_endpoint_in_flight{endpoint_ref="` + endpoint.Ref("https://busy.example/hooks") + `"} 1
courier_endpoint_in_flight{endpoint_ref="` + endpoint.Ref("https://keyed.example/hooks") + `"} 0
# HELP courier_endpoint_max_in_flight An endpoint's limit on deliveries in flight, for endpoints that have one.
# TYPE courier_endpoint_max_in_flight gauge
courier_endpoint_max_in_flight{endpoint_ref="` + endpoint.Ref("https://busy.example/hooks") + `"} 4
# HELP courier_endpoint_rate An endpoint's rate limit in requests per second, for endpoints that have one.
# TYPE courier_endpoint_rate gauge
courier_endpoint_rate{endpoint_ref="` + endpoint.Ref("https://busy.example/hooks") + `"} 10
# HELP courier_health_blocked 1 when the outbox's health needs an operator, labelled with its code (store.Health); 0 when it does not.
# TYPE courier_health_blocked gauge
courier_health_blocked{code="deliveries_failed"} 1
# HELP courier_ordering_keys_blocked Ordering keys a failed delivery holds, waiting for an operator to redrive or cancel it.
# TYPE courier_ordering_keys_blocked gauge
courier_ordering_keys_blocked 1
# HELP courier_outbox_contract_mismatches Unfinished deliveries enqueued under another capabilities digest than their endpoint's pin, held back for an operator.
# TYPE courier_outbox_contract_mismatches gauge
courier_outbox_contract_mismatches 0
# HELP courier_outbox_deliveries Deliveries in the outbox, by status.
# TYPE courier_outbox_deliveries gauge
courier_outbox_deliveries{status="failed"} 1
courier_outbox_deliveries{status="leased"} 1
courier_outbox_deliveries{status="pending"} 1
courier_outbox_deliveries{status="quarantined"} 0
courier_outbox_deliveries{status="retry_wait"} 0
courier_outbox_deliveries{status="succeeded"} 2
courier_outbox_deliveries{status="suppressed"} 0
# HELP courier_outbox_due Pending or retrying deliveries due now, those of a disabled endpoint or one cooling down aside (store.Health's Due).
# TYPE courier_outbox_due gauge
courier_outbox_due 0
# HELP courier_outbox_expired_leases Leases past expiry, not yet reclaimed.
# TYPE courier_outbox_expired_leases gauge
courier_outbox_expired_leases 0
# HELP courier_outbox_overdue Deliveries waiting past their deadline, no claim having ended them.
# TYPE courier_outbox_overdue gauge
courier_outbox_overdue 0
# HELP courier_receiver_requests_total Requests answered by receivers, by outcome and code.
# TYPE courier_receiver_requests_total counter
courier_receiver_requests_total{code="",outcome="accepted"} 2
# HELP courier_settled_total Deliveries settled, by an attempt or ended at a claim, by resulting status.
# TYPE courier_settled_total counter
courier_settled_total{status="failed"} 1
courier_settled_total{status="retry_wait"} 2
courier_settled_total{status="succeeded"} 2
`
	names := []string{"courier_attempts_total", "courier_claimed_total", "courier_endpoints", "courier_enqueued_total",
		"courier_endpoint_in_flight", "courier_endpoint_max_in_flight", "courier_endpoint_rate", "courier_health_blocked",
		"courier_ordering_keys_blocked", "courier_outbox_contract_mismatches", "courier_outbox_deliveries", "courier_outbox_due", "courier_outbox_expired_leases", "courier_outbox_overdue",
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
	c.StoreHook(store.Event{Kind: store.EventEndpoint, Endpoint: "https://user:secret@x.example/h", From: store.EndpointClosed, To: store.EndpointOpen, Code: courier.CodeReceiverUnavailable})
	c.StoreHook(store.Event{Kind: store.EventEndpoint, Endpoint: "https://user:secret@x.example/h", From: store.EndpointOpen, To: store.EndpointHalfOpen})
	c.StoreHook(store.Event{Kind: store.EventEndpoint, Endpoint: "https://user:secret@x.example/h", From: store.EndpointHalfOpen, To: store.EndpointOpen})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP courier_enqueued_total Deliveries written to the outbox (counted at enqueue, before the caller's commit).
# TYPE courier_enqueued_total counter
courier_enqueued_total 3
# HELP courier_endpoint_transitions_total Endpoint breaker transitions, by the state entered.
# TYPE courier_endpoint_transitions_total counter
courier_endpoint_transitions_total{to="half_open"} 1
courier_endpoint_transitions_total{to="open"} 2
`), "courier_enqueued_total", "courier_endpoint_transitions_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "courier_outbox_deliveries"); n != 0 {
		t.Fatalf("gauges without a store: %d", n)
	}
}

// roundTripper is an http.RoundTripper from a function: the worker's
// transport for endpoints that do not exist.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNoSeriesForAnEndpointPlainlyHealthy: an endpoint whose last delivery
// failed once and ended (its breaker closed, a failure counted, nothing in
// flight, no limits, no blocked keys) has no per-endpoint series: one kept
// for every endpoint that ever failed would grow with the endpoints the
// outbox has sent to, as the package doc says they do not.
func TestNoSeriesForAnEndpointPlainlyHealthy(t *testing.T) {
	ctx := t.Context()
	c := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{Hook: c.StoreHook})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Watch(s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	const once = "https://once.example/hooks"
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: once, Payload: []byte(`{}`), MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("s").Signer,
		Transport: roundTripper(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Work(ctx); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v", n, err)
	}
	if eh, err := s.Endpoints.Get(ctx, once); err != nil || eh.State != store.EndpointClosed || eh.ConsecutiveFailures != 1 {
		t.Fatalf("the endpoint is %+v (%v), want closed with one failure counted", eh, err)
	}
	if n := testutil.CollectAndCount(c, "courier_endpoint_in_flight"); n != 0 {
		t.Fatalf("courier_endpoint_in_flight has %d series for an endpoint plainly healthy, want none", n)
	}
}

// TestNoSeriesForEndpointsGoneLongAgo: over months of subscribers coming
// and going, endpoints that answered 410 Gone (or failed for
// DisableAfter) pile up disabled: nothing brings them back but an
// operator's Enable, which nobody calls for an endpoint its owner
// deleted. Each kept a courier_endpoint_in_flight series of its own,
// always 0, so the series grew with every endpoint that ever went away.
// A disabled endpoint with nothing in flight, no limits and no blocked
// keys is counted in courier_endpoints{state="disabled"} alone.
func TestNoSeriesForEndpointsGoneLongAgo(t *testing.T) {
	ctx := t.Context()
	c := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{Hook: c.StoreHook})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Watch(s)
	const gone = 200
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range gone {
		p := store.EnqueueParams{NotificationID: "n-" + strconv.Itoa(i), Endpoint: "https://gone-" + strconv.Itoa(i) + ".example/hooks", Payload: []byte(`{}`)}
		if _, err := s.Outbox.Enqueue(ctx, tx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("s").Signer, BatchSize: 1000, Concurrency: 64,
		Transport: roundTripper(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusGone, Body: http.NoBody, Header: http.Header{}}, nil
		}),
		Logger: slog.New(slog.DiscardHandler), // two Warn lines per endpoint gone: this test's premise, not news
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP courier_endpoints Endpoints whose breaker is not closed, by state.
# TYPE courier_endpoints gauge
courier_endpoints{state="disabled"} `+strconv.Itoa(gone)+`
courier_endpoints{state="half_open"} 0
courier_endpoints{state="open"} 0
`), "courier_endpoints"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "courier_endpoint_in_flight"); n != 0 {
		t.Fatalf("courier_endpoint_in_flight has %d series for %d endpoints gone and disabled, want none", n, gone)
	}
}

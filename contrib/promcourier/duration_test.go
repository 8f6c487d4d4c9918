package promcourier_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// testClock is a clock the test moves: the store's and the worker's.
type testClock struct {
	start  time.Time
	offset atomic.Int64
}

func (c *testClock) Now() time.Time          { return c.start.Add(time.Duration(c.offset.Load())) }
func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// TestNoDurationForAnAttemptNeverStarted: a delivery whose deadline comes
// while it waits in its batch is ended failed, expired, without a
// request. It counts in courier_attempts_total, as the store's attempts
// log records it, but not in courier_attempt_duration_seconds: no attempt
// started, so none took any time. Before, each such delivery was observed
// as an attempt of 0 seconds, pulling the failed attempts' latency toward
// zero.
func TestNoDurationForAnAttemptNeverStarted(t *testing.T) {
	ctx := t.Context()
	clock := &testClock{start: time.Now()}
	c := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{Hook: c.StoreHook, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	const hook = "https://r.example/hooks"
	for _, p := range []store.EnqueueParams{
		{NotificationID: "first", Endpoint: hook, Payload: []byte(`{}`)},
		{NotificationID: "late", Endpoint: hook, Payload: []byte(`{}`), Deadline: clock.Now().Add(500 * time.Millisecond)},
	} {
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), p); err != nil {
			t.Fatal(err)
		}
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("s").Signer, Hook: c.WorkerHook,
		BatchSize: 2, Concurrency: 1, EndpointConcurrency: 2, Now: clock.Now,
		Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			clock.Advance(time.Second) // late's deadline passes while first is sent
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Work(ctx); n != 2 || err != nil {
		t.Fatalf("Work = %d, %v", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP courier_attempts_total Delivery attempts finished by workers, by outcome and code.
# TYPE courier_attempts_total counter
courier_attempts_total{code="receiver_unavailable",outcome="retry"} 1
courier_attempts_total{code="expired",outcome="failed"} 1
`), "courier_attempts_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "courier_attempt_duration_seconds"); n != 1 {
		t.Fatalf("%d duration series, want 1 (retry): the expired delivery sent no request", n)
	}
}

// TestAnUnrecordedAttemptIsCounted: an attempt whose outcome the store
// fails to record (here a trigger refuses every write of the delivery's
// row from the moment its request is sent) counts in
// courier_attempts_total with outcome unrecorded and the attempt's own
// code: the delivery will be sent again, and only the metric tells an
// alert so. Before, the worker's Hook was not called for it, and no
// metric counted it.
func TestAnUnrecordedAttemptIsCounted(t *testing.T) {
	ctx := t.Context()
	// The lease is short, so that the settle's writes are tried again for
	// a second only, and the clock, the store's and the worker's, stands
	// still: on the wall clock a loaded machine could spend the lease
	// before the attempt started (it is given back unsent) or before its
	// settle (the lease is lost), and no attempt would go unrecorded.
	clock := &testClock{start: time.Now()}
	c := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{Hook: c.StoreHook, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("s").Signer, Hook: c.WorkerHook,
		Timeout: 100 * time.Millisecond, Lease: 200 * time.Millisecond, Now: clock.Now,
		Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			if _, err := s.DB().ExecContext(r.Context(), `CREATE TRIGGER refuse_settle BEFORE UPDATE ON courier_outbox
				BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
				t.Errorf("creating the trigger: %v", err)
				return nil, err
			}
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP courier_attempts_total Delivery attempts finished by workers, by outcome and code.
# TYPE courier_attempts_total counter
courier_attempts_total{code="receiver_unavailable",outcome="unrecorded"} 1
`), "courier_attempts_total"); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Outbox.Get(ctx, 1); err != nil || d.Status != "leased" {
		t.Fatalf("the delivery is %+v, %v; want it left leased", d, err)
	}
}

package couriertest_test

import (
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestDrainSeesPastDeliveriesItsClaimsEnd: a claim may end deliveries
// rather than lease them (those of a paused subscription are suppressed),
// and a Work whose whole batch was ended so claims nothing. Drain went on
// only while Work claimed, so it returned with most of such a backlog
// still due.
func TestDrainSeesPastDeliveriesItsClaimsEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), nil)
	t.Cleanup(srv.Close)
	sub, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{Tenant: "acme", Endpoint: srv.URL, EventTypes: []string{"*"}, KeyID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-" + strconv.Itoa(i), Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	p := sub.SubscriptionParams
	p.Paused = true
	if _, err := s.Subscriptions.Update(ctx, nil, sub.ID, p); err != nil {
		t.Fatal(err)
	}
	keys := couriertest.StandardWebhooksKeys("orders")
	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Transport: srv.Guard().Transport(), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Due != 0 || h.Counts[courier.StatusSuppressed] != n {
		t.Fatalf("after Drain: %d due, %d suppressed; want none due and all %d suppressed", h.Due, h.Counts[courier.StatusSuppressed], n)
	}
}

// TestStoreClockDrivesEveryWait: what the package documentation promises
// a test that would otherwise sleep. With the outbox Store on a settable
// clock, and the worker on the host's, moving the clock past a wait lets
// the next Drain see what it held back: a retry on the default backoff
// after a 503, an endpoint whose breaker the faults opened once its
// Cooldown is over, and, past the retry horizon, the delivery's end
// (failed, expired).
func TestStoreClockDrivesEveryWait(t *testing.T) {
	t.Parallel()
	retryAtOnce := func(int, time.Duration) time.Duration { return 0 }
	for _, tc := range []struct {
		name    string
		n       int                                    // notifications
		script  couriertest.Script                     // the receiver's faults
		backoff func(int, time.Duration) time.Duration // nil: the default
		advance time.Duration                          // past the default Cooldown (30 s) or RetryHorizon (72 h)
		want    courier.Status
	}{
		{"backoff", 1, couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}), nil, time.Minute, courier.StatusSucceeded},
		{"breaker cooldown", 6, couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}), retryAtOnce, 31 * time.Second, courier.StatusSucceeded},
		{"retry horizon", 1, func(string, int) couriertest.Fault { return couriertest.Fault{Status: http.StatusServiceUnavailable} }, nil, 73 * time.Hour, courier.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := fakeclock.New()
			s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }), tc.script)
			t.Cleanup(srv.Close)
			tx, err := s.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.n {
				if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-" + strconv.Itoa(i), Endpoint: srv.URL, Payload: []byte(`{}`), Profile: ack.ProfileNone}); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("orders").Signer, Transport: srv.Guard().Transport(), Backoff: tc.backoff})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := couriertest.Drain(ctx, w); err != nil {
				t.Fatal(err)
			}
			if h, err := s.Outbox.Health(ctx); err != nil || h.Counts[courier.StatusRetryWait] != tc.n {
				t.Fatalf("after the first Drain: %v, %v; want all %d waiting", h.Counts, err, tc.n)
			}
			clock.Advance(tc.advance)
			if _, err := couriertest.Drain(ctx, w); err != nil {
				t.Fatal(err)
			}
			if h, err := s.Outbox.Health(ctx); err != nil || h.Counts[tc.want] != tc.n {
				t.Fatalf("once the clock moved %v: %v, %v; want all %d %s", tc.advance, h.Counts, err, tc.n, tc.want)
			}
		})
	}
}

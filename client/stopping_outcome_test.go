package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// TestAGuardRefusalAsTheWorkerStopsIsDestinationForbidden: the guard
// refuses a delivery's private destination, and the worker's context
// ends (a hard shutdown) before the refusal is recorded (here while
// Classify judges it). Nothing was dialed, so nothing was cut short: the
// delivery fails for good with code destination_forbidden, and its Event
// says so, not a retry with code worker_stopped, due again at once, to be
// refused again.
func TestAGuardRefusalAsTheWorkerStopsIsDestinationForbidden(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, func(c *client.Config) {
		c.Transport = nil // the default guard: public addresses only
		c.Classify = func(resp *http.Response, err error) client.Verdict {
			if errors.Is(err, courier.CodeDestinationForbidden) {
				cancel() // the shutdown lands as the refusal is judged
			}
			return client.DefaultClassify(resp, err)
		}
	})
	tx, err := b.store.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://10.0.0.1/hooks", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.worker.Work(ctx); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want one delivery", n, err)
	}
	if ctx.Err() == nil {
		t.Fatal("the guard's refusal never reached Classify")
	}
	ev := <-b.events
	if d := b.get(t, e.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeDestinationForbidden {
		t.Errorf("delivery %s/%s, want failed/destination_forbidden", d.Status, d.LastErrorCode)
	}
	if atts, err := b.store.Outbox.Attempts(t.Context(), e.ID); err != nil || len(atts) != 1 || atts[0].ErrorCode != courier.CodeDestinationForbidden {
		t.Errorf("attempts %+v, %v; want one with code destination_forbidden", atts, err)
	}
	if ev.Outcome != store.AttemptFailed || ev.Code != courier.CodeDestinationForbidden {
		t.Errorf("event %s/%s, want failed/destination_forbidden", ev.Outcome, ev.Code)
	}
}

// signThen is a Signer that calls then once it has signed.
type signThen struct {
	signature.Signer
	then func()
}

func (s signThen) Sign(r *http.Request, m signature.Message) error {
	err := s.Signer.Sign(r, m)
	s.then()
	return err
}

// TestADeadlineFoundAsTheWorkerStopsIsExpired: the delivery's deadline
// passes while its request is signed, and the worker's context ends (a
// hard shutdown) just as the attempt reads its clock to look at the
// deadline. Nothing is sent: the delivery fails with code expired, as it
// does without the shutdown, and its Event says so, not a retry with code
// worker_stopped, an attempt that may have reached the receiver.
func TestADeadlineFoundAsTheWorkerStopsIsExpired(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	clock := newWorkerClock()
	var signed, stopped atomic.Bool
	b, sent := setupCountedWorker(t, func(c *client.Config) {
		c.Lease = time.Hour
		c.Signer = signThen{c.Signer, func() {
			clock.Advance(20 * time.Minute) // past the deadline; the lease still covers a Timeout
			signed.Store(true)
		}}
		c.Now = func() time.Time {
			if signed.Load() && stopped.CompareAndSwap(false, true) {
				cancel() // the shutdown lands as the attempt reads its clock once signed
			}
			return clock.Now()
		}
	})
	id := b.enqueueWith(t, "n-1", func(p *store.EnqueueParams) { p.Deadline = b.clock.Now().Add(10 * time.Minute) })
	if n, err := b.worker.Work(ctx); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want one delivery", n, err)
	}
	if !stopped.Load() {
		t.Fatal("the attempt never read its clock once signed")
	}
	e := <-b.events
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests sent past the deadline", n)
	}
	if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Errorf("delivery %s/%s, want failed/expired", d.Status, d.LastErrorCode)
	}
	if e.Outcome != store.AttemptFailed || e.Code != courier.CodeExpired {
		t.Errorf("event %s/%s, want failed/expired", e.Outcome, e.Code)
	}
}

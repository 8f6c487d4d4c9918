package storetest_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// redriveFiller is how many failed deliveries the tests here put between
// the ones they watch: more than one of Redrive's batches holds.
const redriveFiller = 1000

// failFiller enqueues n deliveries to ep without a key and marks them
// failed after one attempt, as a worker's settle would.
func failFiller(t *testing.T, s *store.Store, ep string, n int) {
	t.Helper()
	ps := make([]store.EnqueueParams, n)
	for i := range ps {
		id := fmt.Sprintf("filler-%d", i)
		ps[i] = store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id)}
	}
	if err := inTx(t, s, func(tx store.DBTX) error {
		_, err := s.Outbox.EnqueueMany(t.Context(), tx, ps)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(t.Context(), `UPDATE courier_outbox SET status = 'failed', attempts = 1,
		last_error_code = 'receiver_unavailable' WHERE notification_id LIKE 'filler-%'`); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveHoldsNoKeyOfABatchItCommitted: a Redrive takes the ordering
// keys of each batch it moves for that batch only. Here the failed heads
// of K1 (the first delivery Redrive moves) and K2 (the last) lie a filler
// of failed deliveries apart, and a third transaction holds K2's row:
// while Redrive waits for it, an application's enqueue to K1 commits. A
// Redrive in one transaction held K1 until it had taken K2, and the
// enqueue, with every enqueue to the keys of a large redrive, waited for
// the whole of it.
func TestRedriveHoldsNoKeyOfABatchItCommitted(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	s, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	keyed := func(id, key string) store.EnqueueParams {
		return store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id), OrderingKey: key, MaxAttempts: 1}
	}
	k1 := enqueue(t, s, keyed("k1", "K1"))
	settleAll(t, s, protocol.Failed, claimAll(t, s, 1)...) // k1 holds K1
	failFiller(t, s, ep, redriveFiller)
	enqueue(t, s, keyed("k2", "K2"))
	settleAll(t, s, protocol.Failed, claimAll(t, s, 1)...) // k2 holds K2, failed last

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_ordering_keys WHERE ordering_key = 'K2' FOR UPDATE`)
	var moved int
	redriven := inBackground(func() (err error) {
		moved, err = operator.Outbox.Redrive(t.Context(), store.RedriveParams{Endpoint: ep})
		return err
	})
	waitLockWaiters(t, s.DB(), 1) // Redrive waits for K2
	enqueued := inBackground(func() error {
		_, err := s.Outbox.Enqueue(t.Context(), s.DB(), keyed("next", "K1"))
		return err
	})
	// The enqueue ends, or waits for K1 beside Redrive.
	enqueued = endedOrHolds(t, s.DB(), enqueued, `SELECT count(*) >= 2 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	var errEnqueue error
	select {
	case errEnqueue = <-enqueued:
	default:
		blocker.Rollback()
		t.Fatalf("an enqueue to K1, the key of Redrive's first delivery, waits while Redrive waits for K2: Redrive holds K1 (Redrive: %v; enqueue: %v)", <-redriven, <-enqueued)
	}
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-redriven; err != nil || errEnqueue != nil || moved != redriveFiller+2 {
		t.Fatalf("Redrive = %d, %v; enqueue to K1: %v; want %d moved and the enqueue done", moved, err, errEnqueue, redriveFiller+2)
	}
	headed := false
	for _, c := range claimAll(t, s, 100) { // the oldest: k1 and 99 of the filler
		headed = headed || c.DeliveryID == k1
		if c.NotificationID == "next" {
			t.Fatal("claimed the delivery enqueued to K1 beside K1's redriven head")
		}
	}
	if !headed {
		t.Fatal("K1's redriven head was not claimed among the oldest")
	}
}

// TestRedriveLeavesWhatFailsAgainWhileItRuns: a delivery a Redrive moved
// in one batch, claimed and failed again before its last batch, stays
// failed: Redrive goes no further than the deliveries that were failed
// when it began, so it ends however fast a worker fails what it moves,
// and counts each delivery once.
func TestRedriveLeavesWhatFailsAgainWhileItRuns(t *testing.T) {
	var probe atomic.Pointer[func()]
	stores := couriertest.PostgresStores(t, 2, store.Config{Now: func() time.Time {
		if f := probe.Load(); f != nil {
			(*f)()
		}
		return time.Now()
	}})
	s, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	first := enqueue(t, s, store.EnqueueParams{NotificationID: "first", Endpoint: ep, Payload: []byte(`{"id":"first"}`), MaxAttempts: 1})
	settleAll(t, s, protocol.Failed, claimAll(t, s, 1)...) // the first Redrive moves
	failFiller(t, s, ep, redriveFiller)

	began := 0
	f := func() {
		if began++; began != 2 {
			return
		}
		probe.Store(nil) // the worker's own reads of the clock
		// The second batch's transaction has begun and locked nothing:
		// a worker claims what the first moved, and the first fails again.
		got, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 1000, Lease: time.Hour})
		if err != nil {
			t.Error(err)
			return
		}
		for _, c := range got {
			if c.DeliveryID == first {
				settleAll(t, s, protocol.Failed, c)
				return
			}
		}
		t.Errorf("a claim after Redrive's first batch leased %d, not the first delivery", len(got))
	}
	probe.Store(&f)
	n, err := operator.Outbox.Redrive(t.Context(), store.RedriveParams{Endpoint: ep})
	probe.Store(nil)
	if err != nil || n != redriveFiller+1 {
		t.Fatalf("Redrive = %d, %v; want %d, each delivery once", n, err, redriveFiller+1)
	}
	if began < 2 {
		t.Fatalf("Redrive began %d transaction(s); want a batch after the first", began)
	}
	if d, err := s.Outbox.Get(t.Context(), first); err != nil || d.Status != courier.StatusFailed {
		t.Fatalf("the delivery that failed again while Redrive ran: %v, %s; want failed, for the next Redrive", err, d.Status)
	}
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/store"
)

// redriveFiller is how many failed deliveries the tests of Redrive's
// batches fill the outbox with: more than a batch holds.
const redriveFiller = 1100

// failMany enqueues n deliveries to opsEndpoint, notification ids
// prefix-0 on, and marks them failed after one attempt, as a worker's
// settle would, stamped at the bundle's clock.
func failMany(t *testing.T, b *bundle, prefix string, n int) {
	t.Helper()
	ps := make([]store.EnqueueParams, n)
	for i := range ps {
		ps[i] = delivery(fmt.Sprintf("%s-%d", prefix, i))
	}
	if _, err := inCommitted(t, b, func(tx *sqlx.Tx) ([]store.Enqueued, error) { return b.store.Outbox.EnqueueMany(b.ctx, tx, ps) }); err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	res, err := b.db.ExecContext(b.ctx, b.db.Rebind(`UPDATE courier_outbox SET status = 'failed', attempts = 1,
		last_error_code = 'receiver_unavailable', updated_at = ? WHERE notification_id LIKE ? AND status = 'pending'`),
		b.clock.Now().UnixMicro(), prefix+"-%")
	if n2, _ := res.RowsAffected(); err != nil || n2 != int64(n) {
		t.Fatalf("failing the filler: %v, %d rows; want %d", err, n2, n)
	}
}

// pendingCount is how many deliveries a reader sees pending.
func pendingCount(t *testing.T, b *bundle) int {
	t.Helper()
	var n int
	if err := b.db.GetContext(b.ctx, &n, `SELECT COUNT(*) FROM courier_outbox WHERE status = 'pending'`); err != nil {
		t.Fatal(err)
	}
	return n
}

// onNow returns a Config.Now reading clock that first calls the function
// set in probe, if any: the store reads its clock at the start of each
// transaction of a Redrive's.
func onNow(clock *fakeclock.Clock, probe *atomic.Pointer[func()]) func() time.Time {
	return func() time.Time {
		if f := probe.Load(); f != nil {
			(*f)()
		}
		return clock.Now()
	}
}

// testRedriveCommitsInBatches: a Redrive of more failed deliveries than a
// batch moves them in several transactions, each committed before the
// next begins, rather than in one that holds SQLite's one writer (every
// claim, settle and enqueue), or PostgreSQL's rows of the ordering keys
// it takes, for the whole redrive: a reader sees the first batches'
// deliveries pending while the later ones are not yet moved. It counts
// each delivery it moved once, and a key whose failed deliveries fall in
// different batches keeps its order: the first goes, the later one waits
// for it.
func testRedriveCommitsInBatches(t *testing.T, open OpenFunc) {
	clock := fakeclock.New()
	var probe atomic.Pointer[func()]
	b := setup(t, open, store.Config{OrderingOnFailure: store.OrderingSkipFailed, Now: onNow(clock, &probe)})
	b.clock = clock
	keyed := func(id string) store.EnqueueParams {
		p := delivery(id)
		p.OrderingKey, p.MaxAttempts = "K", 1
		return p
	}
	first, later := b.enqueue(t, keyed("first")), b.enqueue(t, keyed("later"))
	failClaimed := func(want int64) {
		t.Helper()
		c := b.claim(t, "w", 10, time.Minute)
		if len(c) != 1 || c[0].DeliveryID != want {
			t.Fatalf("claimed %v, want delivery %d alone", ids(c), want)
		}
		if err := b.fail(c[0].Lease, courier.CodeReceiverUnavailable, 503); err != nil {
			t.Fatal(err)
		}
	}
	failClaimed(first.ID) // skipped: later goes
	clock.Advance(time.Second)
	failMany(t, b, "filler", redriveFiller)
	clock.Advance(time.Second)
	failClaimed(later.ID) // K is left with no row
	clock.Advance(time.Second)

	var seen []int
	f := func() { seen = append(seen, pendingCount(t, b)) }
	probe.Store(&f)
	n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: opsEndpoint})
	probe.Store(nil)
	const all = redriveFiller + 2
	if err != nil || n != all {
		t.Fatalf("Redrive = %d, %v; want %d", n, err, all)
	}
	if got := pendingCount(t, b); got != all {
		t.Fatalf("%d deliveries pending after Redrive, want %d", got, all)
	}
	partly := false
	for _, c := range seen {
		partly = partly || c > 0 && c < all
	}
	if !partly {
		t.Fatalf("as each of Redrive's transactions began, a reader saw %v of %d deliveries moved: want the first batches committed before the last began", seen, all)
	}
	if d := b.get(t, first.ID); d.Status != courier.StatusPending || d.Held != "" {
		t.Errorf("K's first failed delivery: %s held %q; want pending, heading K", d.Status, d.Held)
	}
	if d := b.get(t, later.ID); d.Status != courier.StatusPending || d.Held != store.HeldByKey {
		t.Errorf("K's later failed delivery, redriven in a later batch: %s held %q; want pending, waiting for K", d.Status, d.Held)
	}
}

// testRedriveStopsWhenItsContextEnds: a context cancelled while a Redrive
// runs ends it between two batches: it returns how many the committed
// batches moved, exactly, with the context's error, and the batch under
// way is rolled back. The next Redrive moves the rest.
func testRedriveStopsWhenItsContextEnds(t *testing.T, open OpenFunc) {
	clock := fakeclock.New()
	var probe atomic.Pointer[func()]
	b := setup(t, open, store.Config{Now: onNow(clock, &probe)})
	b.clock = clock
	failMany(t, b, "filler", redriveFiller)

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	began := 0
	f := func() {
		if began++; began == 2 { // the second batch's transaction
			cancel()
		}
	}
	probe.Store(&f)
	n, err := b.store.Outbox.Redrive(ctx, store.RedriveParams{})
	probe.Store(nil)
	if !errors.Is(err, context.Canceled) || n <= 0 || n >= redriveFiller {
		t.Fatalf("Redrive cancelled in its second transaction = %d, %v; want the first batch's count and context.Canceled", n, err)
	}
	if got := pendingCount(t, b); got != n {
		t.Fatalf("Redrive reported %d moved; %d are pending", n, got)
	}
	if m, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{}); err != nil || n+m != redriveFiller {
		t.Fatalf("the next Redrive = %d, %v; want the other %d", m, err, redriveFiller-n)
	}
	if got := pendingCount(t, b); got != redriveFiller {
		t.Fatalf("%d pending after both, want %d", got, redriveFiller)
	}
}

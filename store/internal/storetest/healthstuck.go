package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// testHealthBlocksOnDeliveriesPastTheirDeadline: a due delivery whose
// deadline has come is ended by the first claim that reaches it, so one
// still waiting past it says no worker claims: the workers stopped (their
// leases given back, none left to expire) or are far behind. It can never
// be sent, and Health is blocked with deliveries_overdue until a claim
// ends it (failed: deliveries_failed); an older failure does not hide it.
func testHealthBlocksOnDeliveriesPastTheirDeadline(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	t0 := b.clock.Now()
	// An old failure: deliveries_failed, until the overdue ones come.
	b.enqueue(t, at(fastEndpoint, "failed"))
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 1 {
		t.Fatalf("claimed %v, want the one to fail", ids(c))
	} else if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	with := func(p store.EnqueueParams, deadline time.Time) store.EnqueueParams {
		p.Deadline = deadline
		return p
	}
	b.enqueue(t, with(delivery("waiting"), t0.Add(time.Hour)))
	// A worker leases one and stops: its lease is given back unsent.
	b.enqueue(t, with(at(slowEndpoint, "released"), t0.Add(time.Hour)))
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if n, err := b.proto().Release(b.ctx, c.Lease); err != nil || n != 1 {
			t.Fatalf("Release = %d, %v", n, err)
		}
	}
	b.clock.Advance(59 * time.Minute)
	if h := health(t, b); h.Code != courier.CodeFailedPresent || h.Due != 2 || h.Overdue != 0 {
		t.Fatalf("before the deadline Health = %s/%s (due %d, overdue %d), want deliveries_failed, 2 due, none overdue", h.Status, h.Code, h.Due, h.Overdue)
	}
	b.clock.Advance(time.Minute)
	if h := health(t, b); h.Status != store.HealthBlocked || h.Code != courier.CodeDeliveriesOverdue || h.Overdue != 2 || h.Due != 2 {
		t.Fatalf("at the deadline, no worker claiming, Health = %s/%s (overdue %d, due %d), want blocked deliveries_overdue, 2 overdue and due",
			h.Status, h.Code, h.Overdue, h.Due)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v, want none: both are past their deadline", ids(c))
	}
	if h := health(t, b); h.Code != courier.CodeFailedPresent || h.Overdue != 0 || h.Failed != 3 {
		t.Fatalf("after a claim Health = %s/%s (overdue %d, failed %d), want deliveries_failed, none overdue, 3 failed", h.Status, h.Code, h.Overdue, h.Failed)
	}
}

// testHealthCountsOverdueParkedAndNotKeyed: a delivery parked behind its
// open endpoint a minute past its deadline is overdue (before, it waits
// for the claims' next look for such deliveries); one waiting for its
// ordering key behind a head backing off is not (it ends once it heads
// the key, and the head is on its way).
func testHealthCountsOverdueParkedAndNotKeyed(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Hour}})
	t0 := b.clock.Now()
	head := b.enqueue(t, keyed("head", "k"))
	behind := keyed("behind", "k")
	behind.Deadline = t0.Add(time.Hour)
	b.enqueue(t, behind)
	c := b.claim(t, "w", 10, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != head.ID {
		t.Fatalf("claimed %v, want the head alone", ids(c))
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverRejected, HTTPStatus: 400, Delay: 3 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Hour)
	if h := health(t, b); h.Status != store.HealthOK || h.Overdue != 0 {
		t.Fatalf("with a delivery past its deadline behind a head backing off Health = %s/%s (overdue %d), want ok", h.Status, h.Code, h.Overdue)
	}

	// The slow endpoint opens; its other delivery is parked behind it.
	b.enqueue(t, at(slowEndpoint, "probe"))
	parked := at(slowEndpoint, "parked")
	parked.Deadline = b.clock.Now().Add(30 * time.Minute)
	parkedID := b.enqueue(t, parked).ID
	c = b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].NotificationID != "probe" {
		t.Fatalf("claimed %v, want the probe", ids(c))
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v behind an open endpoint", ids(c))
	}
	if d := b.get(t, parkedID); d.Held != store.HeldByEndpoint {
		t.Fatalf("parked is held %q, want by its endpoint", d.Held)
	}
	if h := health(t, b); h.Status != store.HealthOK {
		t.Fatalf("with an endpoint cooling down Health = %s/%s, want ok", h.Status, h.Code)
	}
	// At its deadline and a little past it, it waits for the claims' next
	// look for parked deliveries whose deadline came (every 30 seconds):
	// not yet overdue, with workers claiming.
	b.clock.Advance(30 * time.Minute)
	for _, step := range []time.Duration{0, 30 * time.Second, 30*time.Second - time.Microsecond} {
		b.clock.Advance(step)
		if h := health(t, b); h.Status != store.HealthOK || h.Overdue != 0 {
			t.Fatalf("with a parked delivery just past its deadline Health = %s/%s (overdue %d), want ok: a claim has yet to look", h.Status, h.Code, h.Overdue)
		}
	}
	b.clock.Advance(time.Microsecond) // a minute past it
	if h := health(t, b); h.Status != store.HealthBlocked || h.Code != courier.CodeDeliveriesOverdue || h.Overdue != 1 {
		t.Fatalf("with a parked delivery a minute past its deadline Health = %s/%s (overdue %d), want blocked deliveries_overdue, 1", h.Status, h.Code, h.Overdue)
	}
}

// testHealthBlocksOnAKeyHeldByItsFailedHead: under OrderingHoldKey (the default)
// a failed head holds its key's later deliveries, out of Due, until an
// operator acts: Health is blocked (deliveries_failed), and ok again once
// the head is cancelled and the next goes.
func testHealthBlocksOnAKeyHeldByItsFailedHead(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, id := range []string{"k1", "k2"} {
		b.enqueue(t, keyed(id, "k"))
	}
	c := b.claim(t, "w", 10, time.Minute)
	if len(c) != 1 {
		t.Fatalf("claimed %v, want the head alone", ids(c))
	}
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	if h := health(t, b); h.Status != store.HealthBlocked || h.Code != courier.CodeFailedPresent || h.Due != 0 || h.Counts[courier.StatusPending] != 1 {
		t.Fatalf("with a key held by its failed head Health = %s/%s (due %d, pending %d), want blocked deliveries_failed, none due, 1 pending",
			h.Status, h.Code, h.Due, h.Counts[courier.StatusPending])
	}
	if err := b.store.Outbox.Cancel(b.ctx, c[0].DeliveryID); err != nil {
		t.Fatal(err)
	}
	if h := health(t, b); h.Status != store.HealthOK || h.Due != 1 {
		t.Fatalf("after cancelling the head Health = %s/%s (due %d), want ok with the next due", h.Status, h.Code, h.Due)
	}
}

// testHealthCountsTheBacklogOfEveryPriority: Due, OldestDueAge and
// Overdue count the due rows of every priority, the oldest of them
// whatever its priority, and none of the rows waiting for a later time,
// however many.
func testHealthCountsTheBacklogOfEveryPriority(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	t0 := b.clock.Now()
	enqueue := func(id string, priority int, notBefore, deadline time.Time) {
		p := delivery(id)
		p.Priority, p.NotBefore, p.Deadline = priority, notBefore, deadline
		b.enqueue(t, p)
	}
	enqueue("low-old", 7, t0, t0.Add(2*time.Minute))
	enqueue("high", -3, t0.Add(time.Minute), t0.Add(time.Hour))
	enqueue("mid", 0, t0.Add(time.Minute), t0.Add(2*time.Minute))
	for i := range 5 {
		enqueue(fmt.Sprintf("later-%d", i), i-2, t0.Add(time.Hour), t0.Add(2*time.Hour))
	}
	b.clock.Advance(90 * time.Second)
	if h := health(t, b); h.Due != 3 || h.OldestDueAge != 90*time.Second || h.Overdue != 0 || h.Counts[courier.StatusPending] != 8 {
		t.Fatalf("Health = due %d, oldest %v, overdue %d, pending %d; want 3, 1m30s, 0, 8", h.Due, h.OldestDueAge, h.Overdue, h.Counts[courier.StatusPending])
	}
	b.clock.Advance(time.Minute)
	if h := health(t, b); h.Due != 3 || h.OldestDueAge != 150*time.Second || h.Overdue != 2 || h.Code != courier.CodeDeliveriesOverdue {
		t.Fatalf("Health = due %d, oldest %v, overdue %d, %s; want 3, 2m30s, 2, deliveries_overdue", h.Due, h.OldestDueAge, h.Overdue, h.Code)
	}
}

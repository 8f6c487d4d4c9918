package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// testClaimNeverSendsPastTheDeadline: after the workers were down past a
// delivery's deadline, the claim that reaches it ends it failed with code
// expired instead of leasing it, without an attempt counted or logged. No
// attempt starts at or after the deadline; one microsecond before it, it
// does.
func testClaimNeverSendsPastTheDeadline(t *testing.T, open OpenFunc) {
	heard := hearing()
	b := setup(t, open, store.Config{Hook: heard.hook})
	t0 := b.clock.Now()
	down := 2*time.Hour + 59*time.Minute
	with := func(id string, deadline time.Time) store.EnqueueParams {
		p := delivery(id)
		p.Deadline = deadline
		return p
	}
	late := b.enqueue(t, with("late", t0.Add(time.Hour)))                 // 1 h 59 min past when the workers return
	atDeadline := b.enqueue(t, with("at-deadline", t0.Add(down)))         // exactly at it
	before := b.enqueue(t, with("before", t0.Add(down+time.Microsecond))) // just before it
	fresh := b.enqueue(t, delivery("fresh"))
	b.clock.Advance(down)

	var got []int64
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		got = append(got, c.DeliveryID)
	}
	if slices.Sort(got); !slices.Equal(got, []int64{before.ID, fresh.ID}) {
		t.Fatalf("claimed %v, want %v (only the deliveries before their deadline)", got, []int64{before.ID, fresh.ID})
	}
	for _, id := range []int64{late.ID, atDeadline.ID} {
		d := b.get(t, id)
		if d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired || d.Attempts != 0 || d.LeaseOwner != "" || !d.UpdatedAt.Equal(b.clock.Now()) {
			t.Fatalf("delivery %s is %s/%s with %d attempts, lease %q; want failed/expired, no attempt", d.NotificationID, d.Status, d.LastErrorCode, d.Attempts, d.LeaseOwner)
		}
		if attempts, err := b.store.Outbox.Attempts(b.ctx, id); err != nil || len(attempts) != 0 {
			t.Fatalf("attempts log of %s = %+v, %v; want none: no attempt was made", d.NotificationID, attempts, err)
		}
	}
	events := heard.take()
	ended := slices.ContainsFunc(events, func(e store.Event) bool {
		return e.Kind == store.EventSettled && e.N == 2 && e.Status == courier.StatusFailed && e.Code == courier.CodeExpired
	})
	if !ended {
		t.Fatalf("events %+v, want one settled event for the 2 expired deliveries", events)
	}
	if h := health(t, b); h.Counts[courier.StatusFailed] != 2 || h.Counts[courier.StatusLeased] != 2 {
		t.Fatalf("health counts %v, want 2 failed and 2 leased", h.Counts)
	}
}

// testExpiredRowsDoNotStarveTheBatch: expired rows ahead of due ones in
// claim order are ended by the same claim, which still fills its batch
// with deliveries it may send; a backlog of expired rows larger than a
// claim ends is ended over the next claims.
func testExpiredRowsDoNotStarveTheBatch(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	t0 := b.clock.Now()
	tx := b.begin(t)
	const backlog = 1005 // more than one claim ends
	for i := range backlog {
		p := delivery(fmt.Sprintf("old-%d", i))
		p.Deadline = t0.Add(time.Minute)
		if _, err := b.store.Outbox.Enqueue(b.ctx, tx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	sendable := []int64{b.enqueue(t, delivery("new-1")).ID, b.enqueue(t, delivery("new-2")).ID}
	b.clock.Advance(2 * time.Minute)

	var got []int64
	claims := 0
	for ; claims < 5 && len(got) < len(sendable); claims++ {
		for _, c := range b.claim(t, "w", 2, time.Minute) {
			got = append(got, c.DeliveryID)
		}
		if claims == 0 {
			if h := health(t, b); h.Counts[courier.StatusPending] <= len(sendable) {
				t.Fatalf("the first claim ended all %d expired rows: a claim's work is not bounded", backlog)
			}
		}
	}
	if slices.Sort(got); !slices.Equal(got, sendable) {
		t.Fatalf("claimed %v over %d claims, want %v", got, claims, sendable)
	}
	if h := health(t, b); h.Counts[courier.StatusFailed] != backlog || h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("health counts %v, want all %d expired rows failed", h.Counts, backlog)
	}
	// With the expired rows gone, one claim fills its batch.
	more := []int64{b.enqueue(t, delivery("new-3")).ID, b.enqueue(t, delivery("new-4")).ID}
	got = got[:0]
	for _, c := range b.claim(t, "w", 2, time.Minute) {
		got = append(got, c.DeliveryID)
	}
	if slices.Sort(got); !slices.Equal(got, more) {
		t.Fatalf("claimed %v, want both new deliveries %v", got, more)
	}
}

// testProbeSkipsExpiredDeliveries: the probe of an endpoint whose breaker
// cool-down ended ends the deliveries that expired while it was paused and
// probes with one that may still be sent.
func testProbeSkipsExpiredDeliveries(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	t0 := b.clock.Now()
	first := b.enqueue(t, delivery("first"))
	var expiring []int64
	for _, id := range []string{"exp-1", "exp-2"} {
		p := delivery(id)
		p.Deadline = t0.Add(2 * time.Minute)
		expiring = append(expiring, b.enqueue(t, p).ID)
	}
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != first.ID {
		t.Fatalf("claim = %+v, want the first delivery", c)
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	later := b.enqueue(t, delivery("later"))
	if eh, _ := b.store.Endpoints.Get(b.ctx, delivery("x").Endpoint); eh.State != store.EndpointOpen {
		t.Fatalf("endpoint is %s, want open", eh.State)
	}
	b.clock.Advance(3 * time.Minute) // cool-down over, two deliveries expired meanwhile
	probe := b.claim(t, "w", 5, time.Minute)
	if len(probe) != 1 || probe[0].DeliveryID != later.ID {
		t.Fatalf("probe = %+v, want the one delivery still before its deadline", probe)
	}
	for _, id := range expiring {
		if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired || d.Attempts != 0 {
			t.Fatalf("expired delivery is %s/%s with %d attempts, want failed/expired with none", d.Status, d.LastErrorCode, d.Attempts)
		}
	}
}

// testRetryDueAtTheDeadlineFails: a retry that would be due exactly at the
// deadline can never start, so the settle ends the delivery expired (its
// attempt logged with its own code); one due a microsecond before it
// waits and is sent.
func testRetryDueAtTheDeadlineFails(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	deadline := b.clock.Now().Add(time.Minute)
	p, q, r := delivery("at"), delivery("before"), delivery("answered")
	p.Deadline, q.Deadline, r.Deadline = deadline, deadline, deadline
	r.Endpoint = "https://answered.example/hook" // a healthy endpoint's: settled alone on PostgreSQL
	at, before, answered := b.enqueue(t, p), b.enqueue(t, q), b.enqueue(t, r)
	claimed := b.claim(t, "w", 3, 10*time.Second)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d, want 3", len(claimed))
	}
	for _, c := range claimed {
		delay := deadline.Sub(b.clock.Now())
		rp := retryParams{Code: courier.CodeNetwork, Delay: delay}
		switch c.DeliveryID {
		case before.ID:
			rp.Delay -= time.Microsecond
		case answered.ID:
			rp.Code, rp.HTTPStatus = courier.CodeReceiverRejected, 409
		}
		if err := b.retry(c.Lease, rp); err != nil {
			t.Fatal(err)
		}
	}
	if d := b.get(t, answered.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("an answered retry due at the deadline left %s/%s, want failed/expired", d.Status, d.LastErrorCode)
	}
	if a, err := b.store.Outbox.Attempts(b.ctx, answered.ID); err != nil || len(a) != 1 || a[0].Outcome != store.AttemptFailed || a[0].ErrorCode != courier.CodeReceiverRejected {
		t.Fatalf("the attempts of the answered delivery that expired: %+v, %v; want one, failed with its own code %s", a, err, courier.CodeReceiverRejected)
	}
	if d := b.get(t, at.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("retry due at the deadline left %s/%s, want failed/expired", d.Status, d.LastErrorCode)
	}
	// The attempt keeps its own code: the log says why the last attempt
	// failed, the delivery why it ended.
	if a, err := b.store.Outbox.Attempts(b.ctx, at.ID); err != nil || len(a) != 1 || a[0].Outcome != store.AttemptFailed || a[0].ErrorCode != courier.CodeNetwork {
		t.Fatalf("the attempts of the delivery that expired: %+v, %v; want one, failed with its own code %s", a, err, courier.CodeNetwork)
	}
	if d := b.get(t, before.ID); d.Status != courier.StatusRetryWait {
		t.Fatalf("retry due before the deadline left %s, want retry_wait", d.Status)
	}
	b.clock.Advance(time.Minute - time.Microsecond)
	if c := b.claim(t, "w", 2, 10*time.Second); len(c) != 1 || c[0].DeliveryID != before.ID || c[0].Attempt != 2 {
		t.Fatalf("claim a microsecond before the deadline = %+v, want the second attempt", c)
	}
}

// testDeadline runs the deadline's store tests.
func testDeadline(t *testing.T, open OpenFunc) {
	for name, fn := range map[string]func(*testing.T, OpenFunc){
		"ClaimNeverSendsPastTheDeadline":  testClaimNeverSendsPastTheDeadline,
		"ExpiredRowsDoNotStarveTheBatch":  testExpiredRowsDoNotStarveTheBatch,
		"ProbeSkipsExpiredDeliveries":     testProbeSkipsExpiredDeliveries,
		"RetryDueAtTheDeadlineFails":      testRetryDueAtTheDeadlineFails,
		"LeaseLostPastTheDeadlineExpires": testLeaseLostPastTheDeadlineExpires,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, open)
		})
	}
}

// testLeaseLostPastTheDeadlineExpires: a lease that runs out at or after
// the deadline is reclaimed as failed with code expired.
func testLeaseLostPastTheDeadlineExpires(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := delivery("lease")
	p.Deadline = b.clock.Now().Add(time.Minute)
	e := b.enqueue(t, p)
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 1 {
		t.Fatal("not claimed")
	}
	b.clock.Advance(time.Minute)
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %+v at the deadline", c)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("lease lost at the deadline: %s/%s, want failed/expired", d.Status, d.LastErrorCode)
	}
}

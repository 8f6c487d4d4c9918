package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// spending is a Config whose endpoints' breakers never open, so exhaust
// spends every budget: cfg with a Breaker.Threshold above any budget.
func spending(cfg store.Config) store.Config {
	cfg.Breaker.Threshold = 10000
	return cfg
}

// exhaust claims and retries every due delivery, a minute apart, until
// none is left to claim: each has spent its budget and failed (the
// Store's breaker must not open: see spending).
func (b *bundle) exhaust(t *testing.T) {
	t.Helper()
	for range 50 {
		c := b.claim(t, "w", 10, time.Minute)
		if len(c) == 0 {
			return
		}
		for _, cl := range c {
			if err := b.retry(cl.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second}); err != nil {
				t.Fatal(err)
			}
		}
		b.clock.Advance(time.Minute)
	}
	t.Fatal("deliveries still claimed after 50 rounds")
}

// redriveAll redrives every failed delivery and checks it moved want.
func (b *bundle) redriveAll(t *testing.T, want int) {
	t.Helper()
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{}); err != nil || n != want {
		t.Fatalf("Redrive = %d, %v; want %d moved", n, err, want)
	}
}

// testEnqueueAgainAfterARedrive: a delivery that spent its budget and was
// redriven has a larger one, which Redrive granted; the application's
// enqueue made again as it was first made (its transaction retried, say)
// still finds it, Existed, for a budget it named and for the Store's
// default, redriven once or twice. Another budget than the one asked,
// that granted among them, is still a collision.
func testEnqueueAgainAfterARedrive(t *testing.T, open OpenFunc) {
	b := setup(t, open, spending(store.Config{MaxAttempts: 6}))
	named := delivery("named")
	named.MaxAttempts = 3
	dflt := delivery("default")
	first := map[string]store.Enqueued{"named": b.enqueue(t, named), "default": b.enqueue(t, dflt)}
	b.exhaust(t)
	for round := 1; round <= 2; round++ {
		for name, e := range first {
			if d := b.get(t, e.ID); d.Status != courier.StatusFailed || d.Attempts != d.MaxAttempts {
				t.Fatalf("round %d: %s is %s after %d of %d attempts, want failed with its budget spent", round, name, d.Status, d.Attempts, d.MaxAttempts)
			}
		}
		b.redriveAll(t, 2)
		if d := b.get(t, first["named"].ID); d.MaxAttempts <= 3 {
			t.Fatalf("round %d: the redriven delivery's budget is %d, want more than the 3 asked", round, d.MaxAttempts)
		}
		for name, p := range map[string]store.EnqueueParams{"named": named, "default": dflt} {
			tx := b.begin(t)
			e, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
			tx.Rollback()
			if err != nil || !e.Existed || e.ID != first[name].ID {
				t.Fatalf("round %d: %s enqueued again after a redrive = %+v, %v; want the existing delivery %d", round, name, e, err, first[name].ID)
			}
		}
		granted := named
		granted.MaxAttempts = b.get(t, first["named"].ID).MaxAttempts
		other := named
		other.MaxAttempts = 4
		for what, p := range map[string]store.EnqueueParams{"the granted budget": granted, "another budget": other} {
			tx := b.begin(t)
			_, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
			tx.Rollback()
			if !errors.Is(err, courier.CodeIdempotencyCollision) {
				t.Fatalf("round %d: enqueued again with %s = %v, want CodeIdempotencyCollision", round, what, err)
			}
		}
		b.exhaust(t)
	}
}

// testEnqueueCommandAgainAfterARedrive: testEnqueueAgainAfterARedrive for
// commands, whose budget defaults to the command's source_max_attempts.
func testEnqueueCommandAgainAfterARedrive(t *testing.T, open OpenFunc) {
	b := setup(t, open, spending(store.Config{}))
	named := store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 3, `{"title":"x"}`), MaxAttempts: 3}
	source := store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r2", digestA, 3, `{"title":"y"}`)}
	first := map[string]store.Enqueued{"named": b.mustEnqueueCommand(t, named), "source": b.mustEnqueueCommand(t, source)}
	b.exhaust(t)
	b.redriveAll(t, 2)
	for name, e := range first {
		if d := b.get(t, e.ID); d.MaxAttempts <= 3 {
			t.Fatalf("the redriven %s command's budget is %d, want more than 3", name, d.MaxAttempts)
		}
	}
	for name, p := range map[string]store.CommandParams{"named": named, "source": source} {
		if e, err := b.enqueueCommand(t, p); err != nil || !e.Existed || e.ID != first[name].ID {
			t.Fatalf("%s command enqueued again after a redrive = %+v, %v; want the existing delivery %d", name, e, err, first[name].ID)
		}
	}
	other := named
	other.MaxAttempts = 2
	if _, err := b.enqueueCommand(t, other); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("command enqueued again with another budget = %v, want CodeIdempotencyCollision", err)
	}
}

// testRepublishAfterARedrive: an event published again once its delivery
// was redriven finds that delivery, Existed, on the fan-out's path too,
// whose comparison leaves the budget out.
func testRepublishAfterARedrive(t *testing.T, open OpenFunc) {
	r := setupRepublish(t, open, spending(store.Config{MaxAttempts: 2}), false)
	r.exhaust(t)
	r.redriveAll(t, 1)
	if got := r.publish(t); len(got) != 1 || !got[0].Existed || got[0].ID != r.first.ID {
		t.Fatalf("published again after a redrive = %+v, want the existing delivery %d", got, r.first.ID)
	}
}

// testEnqueueAgainAcrossADefaultBudgetChange: an enqueue that leaves
// MaxAttempts to the Store's default, made again by a process whose
// Config.MaxAttempts changed since (a deploy), is the same enqueue: it
// finds its delivery. It was idempotency_collision, the defaults in
// effect compared. A budget it names is still compared with the one named
// first, and a default stands for the budget it is now.
func testEnqueueAgainAcrossADefaultBudgetChange(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{MaxAttempts: 8})
	dflt := delivery("default")
	named := delivery("named")
	named.MaxAttempts = 8
	first := map[string]store.Enqueued{"default": b.enqueue(t, dflt), "named": b.enqueue(t, named)}
	deployed, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, MaxAttempts: 10})
	if err != nil {
		t.Fatal(err)
	}
	again := func(p store.EnqueueParams) (store.Enqueued, error) {
		tx := b.begin(t)
		defer tx.Rollback()
		return deployed.Outbox.Enqueue(b.ctx, tx, p)
	}
	if e, err := again(dflt); err != nil || !e.Existed || e.ID != first["default"].ID {
		t.Errorf("the default budget's enqueue again under MaxAttempts 10 = %+v, %v; want delivery %d found", e, err, first["default"].ID)
	}
	if e, err := again(named); err != nil || !e.Existed || e.ID != first["named"].ID {
		t.Errorf("the named budget's enqueue again under MaxAttempts 10 = %+v, %v; want delivery %d found", e, err, first["named"].ID)
	}
	for name, edit := range map[string]func(*store.EnqueueParams){
		"named 8, then the default of 10": func(p *store.EnqueueParams) { *p = named; p.MaxAttempts = 0 },
		"the default of 8, then 9 named":  func(p *store.EnqueueParams) { *p = dflt; p.MaxAttempts = 9 },
	} {
		var p store.EnqueueParams
		edit(&p)
		if _, err := again(p); !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Errorf("%s: %v, want idempotency_collision", name, err)
		}
	}
	tenNamed := dflt
	tenNamed.MaxAttempts = 10 // what the default stands for now
	if e, err := again(tenNamed); err != nil || !e.Existed || e.ID != first["default"].ID {
		t.Errorf("the default of 8, then 10 named under MaxAttempts 10 = %+v, %v; want delivery %d found", e, err, first["default"].ID)
	}
}

// stopped settles l as an attempt its worker cut short as it stopped: a
// retry with code worker_stopped, due at once, that spares the budget.
func (b *bundle) stopped(l protocol.Lease) (protocol.Settled, error) {
	s, err := b.proto().Settle(b.ctx, protocol.Outcome{Lease: l, Result: protocol.Retry, Code: courier.CodeWorkerStopped, SpareBudget: true})
	if err != nil {
		return protocol.Settled{}, err
	}
	return s[0], s[0].Err
}

// testAnAttemptCutShortByAStopSparesTheBudget: an attempt a worker cut
// short as it stopped (a deploy) is counted and logged, but spends none
// of the delivery's budget, which grows by one: its last attempt so cut
// leaves it due at once with one more to make, where it failed
// worker_stopped for good. It is no failure of the endpoint's either.
// The enqueue made again still finds the delivery, as after a redrive.
func testAnAttemptCutShortByAStopSparesTheBudget(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Hour, DisableAfter: 24 * time.Hour}})
	p := delivery("last")
	p.MaxAttempts = 1
	e := b.enqueue(t, p)
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 {
		t.Fatalf("claimed %d, want the delivery", len(c))
	}
	s, err := b.stopped(c[0].Lease)
	if err != nil || s.Status != courier.StatusRetryWait || s.Code != courier.CodeWorkerStopped {
		t.Fatalf("its last attempt cut short by a stop settled %s/%s (%v), want retry_wait/worker_stopped", s.Status, s.Code, err)
	}
	d := b.get(t, e.ID)
	if d.Status != courier.StatusRetryWait || d.Attempts != 1 || d.MaxAttempts != 2 || !d.NextAttemptAt.Equal(b.clock.Now()) {
		t.Fatalf("after its last attempt was cut short by a stop the delivery is %s after %d of %d attempts, due in %v; want retry_wait after 1 of 2, due at once",
			d.Status, d.Attempts, d.MaxAttempts, d.NextAttemptAt.Sub(b.clock.Now()))
	}
	attempts, err := b.store.Outbox.Attempts(b.ctx, e.ID)
	if err != nil || len(attempts) != 1 || attempts[0].Attempt != 1 || attempts[0].Outcome != store.AttemptRetry || attempts[0].ErrorCode != courier.CodeWorkerStopped {
		t.Fatalf("attempts logged: %+v, %v; want attempt 1, a worker_stopped retry", attempts, err)
	}
	if h := endpointState(t, b, p.Endpoint); h.State != store.EndpointClosed || h.ConsecutiveFailures != 0 {
		t.Fatalf("the endpoint is %s after %d failures, want closed after none: a stop is no failure of the endpoint's", h.State, h.ConsecutiveFailures)
	}
	if again := b.enqueue(t, p); !again.Existed || again.ID != e.ID {
		t.Fatalf("enqueued again as it was first = %+v, want the existing delivery %d", again, e.ID)
	}

	// An attempt cut short before the last spares the budget too: the
	// one attempt after it that is not cut short is the last.
	// The attempts so spared are counted out of the place in the budget
	// each later attempt sends (Courier-Attempt): a command's source,
	// which refuses an attempt beyond its source_max_attempts, judges
	// the next attempt as the first.
	c = b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].Attempt != 2 || c[0].Spared != 1 || c[0].BudgetAttempt() != 1 {
		t.Fatalf("claimed %v, want attempt 2 of the delivery, 1 spared: the first of its budget", c)
	}
	if _, err := b.stopped(c[0].Lease); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].Attempt != 3 || c[0].Spared != 2 || c[0].BudgetAttempt() != 1 {
		t.Fatalf("claimed %v, want attempt 3 of the delivery, 2 spared: the first of its budget", c)
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeReceiverUnavailable || d.Attempts != 3 || d.MaxAttempts != 3 {
		t.Fatalf("after two attempts cut short and one answered 503 the delivery is %s/%s after %d of %d attempts, want failed/receiver_unavailable after 3 of 3",
			d.Status, d.LastErrorCode, d.Attempts, d.MaxAttempts)
	}
}

// testAStopSparesNoTimeNorALeaseThatRanOut: what an attempt cut short by
// a stop spares is the budget alone. Its deadline still ends the delivery
// (expired); a lease that ran out (its worker died) is counted in full,
// and the stop settled late on it is refused (lease_lost); the budget
// grows no further than the most attempts any delivery makes (1000); and
// only a retry spares the budget.
func testAStopSparesNoTimeNorALeaseThatRanOut(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})

	p := delivery("deadline")
	p.MaxAttempts = 1
	p.Deadline = b.clock.Now().Add(time.Second)
	deadline := b.enqueue(t, p)
	c := b.claim(t, "w", 1, time.Minute)
	b.clock.Advance(time.Second)
	if s, err := b.stopped(c[0].Lease); err != nil || s.Status != courier.StatusFailed || s.Code != courier.CodeExpired {
		t.Fatalf("cut short by a stop at its deadline: settled %s/%s (%v), want failed/expired", s.Status, s.Code, err)
	}
	if d := b.get(t, deadline.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("cut short by a stop at its deadline: %s/%s, want failed/expired", d.Status, d.LastErrorCode)
	}

	p = delivery("lease")
	p.MaxAttempts = 1
	lease := b.enqueue(t, p)
	c = b.claim(t, "w", 1, time.Second)
	b.clock.Advance(time.Second)
	if _, err := b.stopped(c[0].Lease); !errors.Is(err, courier.CodeLeaseLost) {
		t.Fatalf("a stop settled on a lease that ran out = %v, want lease_lost", err)
	}
	b.claim(t, "w", 1, time.Second) // reclaims it
	if d := b.get(t, lease.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeLeaseExpired || d.MaxAttempts != 1 {
		t.Fatalf("its last lease ran out: %s/%s with a budget of %d, want failed/lease_expired with 1", d.Status, d.LastErrorCode, d.MaxAttempts)
	}

	bound := b.enqueue(t, delivery("bound"))
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(`UPDATE courier_outbox SET status = 'retry_wait', last_error_code = 'receiver_unavailable',
		attempts = 999, max_attempts = 1000 WHERE id = ?`), bound.ID); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].Attempt != 1000 {
		t.Fatalf("claimed %v, want attempt 1000", c)
	}
	if s, err := b.stopped(c[0].Lease); err != nil || s.Status != courier.StatusFailed || s.Code != courier.CodeWorkerStopped {
		t.Fatalf("attempt 1000 cut short by a stop: settled %s/%s (%v), want failed/worker_stopped", s.Status, s.Code, err)
	}
	if d := b.get(t, bound.ID); d.Attempts != 1000 || d.MaxAttempts != 1000 {
		t.Fatalf("attempt 1000 cut short by a stop: %d of %d attempts, want 1000 of 1000", d.Attempts, d.MaxAttempts)
	}
	var spared int
	if err := b.db.GetContext(b.ctx, &spared, b.db.Rebind("SELECT spared_attempts FROM courier_outbox WHERE id = ?"), bound.ID); err != nil || spared != 0 {
		t.Fatalf("attempt 1000 cut short by a stop counts %d spared (%v), want 0: the budget did not grow", spared, err)
	}

	b.enqueue(t, delivery("failed"))
	c = b.claim(t, "w", 1, time.Minute)
	oc := protocol.Outcome{Lease: c[0].Lease, Result: protocol.Failed, Code: courier.CodeWorkerStopped, SpareBudget: true}
	if err := b.settle(oc); !errors.Is(err, courier.CodeInvalidArgument) {
		t.Fatalf("a failure that spares the budget settled with %v, want invalid_argument", err)
	}
}

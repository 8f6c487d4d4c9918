package storetest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestSettleHoldsUpOnlyTheOutcomeWhoseRowIsHeld: a transaction outside
// courier (an operator's SELECT ... FOR UPDATE in psql) holds one leased
// delivery's row. A settle of its outcome batched with another delivery's
// does not wait for that transaction to end: the other delivery is
// settled, and the held one's outcome fails alone, with
// courier.CodeDatabaseUnavailable, which a worker tries again. Tried again
// while the row is still held, it fails again (the whole call: it is
// alone). Once the row is free the same outcome, fenced by the same
// lease, is settled.
func TestSettleHoldsUpOnlyTheOutcomeWhoseRowIsHeld(t *testing.T) {
	t.Parallel()
	s := couriertest.PostgresStores(t, 1, store.Config{})[0]
	const ep = "https://receiver.example/hook"
	free := enqueue(t, s, store.EnqueueParams{NotificationID: "free", Endpoint: ep, Payload: []byte(`{"id":"free"}`)})
	held := enqueue(t, s, store.EnqueueParams{NotificationID: "held", Endpoint: ep, Payload: []byte(`{"id":"held"}`)})
	outcomes := make(map[int64]protocol.Outcome)
	var batch []protocol.Outcome
	for _, c := range claimAll(t, s, 2) {
		outcomes[c.DeliveryID] = protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded}
		batch = append(batch, outcomes[c.DeliveryID])
	}
	operator := holdRows(t, s.DB(), `SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`, held)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a settle that waited for the operator would end here
	defer cancel()
	settled, err := protocol.For(s).Settle(ctx, batch...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("settle beside a transaction holding one row: %v; it waited for the transaction to end", err)
	}
	if err != nil {
		t.Fatalf("settle beside a transaction holding one row: %v; want the free one settled, the held one failed alone", err)
	}
	for i, st := range settled {
		switch id := batch[i].Lease.DeliveryID; id {
		case free:
			if st.Err != nil || st.Status != courier.StatusSucceeded {
				t.Errorf("the free delivery's outcome: %+v, want succeeded", st)
			}
		case held:
			if code := courier.CodeOf(st.Err); code != courier.CodeDatabaseUnavailable {
				t.Errorf("the held delivery's outcome: %+v (code %q), want it failed alone with %q", st, code, courier.CodeDatabaseUnavailable)
			}
		}
	}
	if d, err := s.Outbox.Get(ctx, free); err != nil || d.Status != courier.StatusSucceeded {
		t.Errorf("the free delivery: %v, %s; want succeeded", err, d.Status)
	}
	if d, err := s.Outbox.Get(ctx, held); err != nil || d.Status != courier.StatusLeased {
		t.Errorf("the held delivery: %v, %s; want still leased", err, d.Status)
	}

	if _, err := protocol.For(s).Settle(ctx, outcomes[held]); courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
		t.Errorf("the held outcome alone, its row still held: %v; want %q", err, courier.CodeDatabaseUnavailable)
	}

	if err := operator.Rollback(); err != nil {
		t.Fatal(err)
	}
	again, err := protocol.For(s).Settle(ctx, outcomes[held])
	if err != nil || again[0].Err != nil || again[0].Status != courier.StatusSucceeded {
		t.Fatalf("the held outcome again, its row free: %v, %+v; want succeeded", err, again)
	}
	if d, err := s.Outbox.Get(ctx, held); err != nil || d.Status != courier.StatusSucceeded {
		t.Errorf("the held delivery once settled: %v, %s; want succeeded", err, d.Status)
	}
}

// TestASplitSettleReportsABreakerMoveOnce: a batch of two outcomes,
// one that disables endpoint a (endpoint_gone), one a failure for
// endpoint b whose breaker lock another transaction holds. The batch's
// transaction records a's move, then waits for b's lock past the bound
// and is rolled back; the outcomes are settled again one per
// transaction. Endpoint a moved closed -> disabled once (one row, one
// commit), so the Hook hears of it once: a move is reported when its
// transaction commits, not when it is made.
func TestASplitSettleReportsABreakerMoveOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var moves []store.Event
	s := couriertest.PostgresStores(t, 1, store.Config{Hook: func(e store.Event) {
		if e.Kind == store.EventEndpoint {
			mu.Lock()
			moves = append(moves, e)
			mu.Unlock()
		}
	}})[0]
	const a, b = "https://a.example/hook", "https://b.example/hook"
	enqueue(t, s, store.EnqueueParams{NotificationID: "n-a", Endpoint: a, Payload: []byte(`{"id":"a"}`)})
	enqueue(t, s, store.EnqueueParams{NotificationID: "n-b", Endpoint: b, Payload: []byte(`{"id":"b"}`)})
	var batch []protocol.Outcome
	for _, c := range claimAll(t, s, 2) {
		oc := protocol.Outcome{Lease: c.Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}
		if c.Endpoint == a {
			oc = protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeEndpointGone, HTTPStatus: 410}
		}
		batch = append(batch, oc)
	}
	// Another transaction holds endpoint b's breaker lock (endpoint_lock).
	holdRows(t, s.DB(), `SELECT pg_advisory_xact_lock(721234500, hashtext($1))`, b)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	settled, err := protocol.For(s).Settle(ctx, batch...)
	if err != nil {
		t.Fatalf("settle: %v", err)
	}
	t.Logf("settled: %+v", settled)
	h, err := s.Endpoints.Get(ctx, a)
	if err != nil || h.State != store.EndpointDisabled {
		t.Fatalf("endpoint a: %v %+v, want disabled", err, h)
	}
	mu.Lock()
	defer mu.Unlock()
	var toDisabled int
	for _, e := range moves {
		t.Logf("hook: %s %s -> %s (%s)", e.Endpoint, e.From, e.To, e.Code)
		if e.EndpointRef == endpoint.Ref(a) && e.To == store.EndpointDisabled {
			toDisabled++
		}
	}
	if toDisabled != 1 {
		t.Errorf("the Hook heard endpoint a disabled %d times; it was disabled once", toDisabled)
	}
}

// TestASplitSettleFencesLeasesWhenTheSettleBegan: two outcomes settled
// together while each lease still holds; one delivery's row is held by
// another transaction. The batch's transaction waits for it up to the
// bound and is rolled back, and the outcomes are settled again one per
// transaction, each fenced against the time it runs, not the time the
// settle was asked. Meanwhile (the bound is a second of real time) the
// free delivery's lease ran out: its outcome, whose row nobody held and
// nobody reclaimed, is refused lease_lost, and the delivery it reports
// sent will be sent again. Before the split, the same settle waited and
// applied it (its fence read the time the settle began).
func TestASplitSettleFencesLeasesWhenTheSettleBegan(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	s := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now})[0]
	const ep = "https://receiver.example/hook"
	free := enqueue(t, s, store.EnqueueParams{NotificationID: "free", Endpoint: ep, Payload: []byte(`{"id":"free"}`)})
	held := enqueue(t, s, store.EnqueueParams{NotificationID: "held", Endpoint: ep, Payload: []byte(`{"id":"held"}`)})
	cs, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: 10 * time.Second})
	if err != nil || len(cs) != 2 {
		t.Fatalf("claim: %v, %d", err, len(cs))
	}
	var batch []protocol.Outcome
	for _, c := range cs {
		batch = append(batch, protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded})
	}
	clock.Advance(9 * time.Second) // the attempts took 9s of the 10s leases
	holdRows(t, s.DB(), `SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`, held)

	type result struct {
		st  []protocol.Settled
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := protocol.For(s).Settle(t.Context(), batch...)
		done <- result{st, err}
	}()
	waitLockWaiters(t, s.DB(), 1) // the batch waits for the held row
	clock.Advance(time.Second)    // the bound's second passes on the store's clock too
	r := <-done
	if r.err != nil {
		t.Fatalf("settle: %v", r.err)
	}
	for i, st := range r.st {
		if batch[i].Lease.DeliveryID == free && (st.Err != nil || st.Status != courier.StatusSucceeded) {
			t.Errorf("the free delivery's outcome, asked within its lease: %+v; want succeeded", st)
		}
	}
	if d, err := s.Outbox.Get(t.Context(), free); err != nil || d.Status != courier.StatusSucceeded {
		t.Errorf("the free delivery: %v, %s; want succeeded", err, d.Status)
	}
}

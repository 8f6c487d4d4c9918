package storetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
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

package storetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestAPlainSettleIsReportedWhenTheRestFails: on PostgreSQL a healthy
// endpoint's outcome is settled by outbox_settle_plain, which commits at
// once; the rest of the batch (here a 503, which moves a breaker) goes to
// the settle's transaction. When that transaction fails (its row held by
// another transaction past the lock bound), the outcome the plain
// statement committed must still be reported as settled (and to the
// Hook), and only the failed one carries the error: an error for the
// batch as a whole says nothing was applied, so the worker would try the
// committed outcome again and hear lease_lost for a delivery it settled.
func TestAPlainSettleIsReportedWhenTheRestFails(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var heard []store.Event
	s := couriertest.PostgresStores(t, 1, store.Config{Hook: func(e store.Event) {
		if e.Kind == store.EventSettled {
			mu.Lock()
			heard = append(heard, e)
			mu.Unlock()
		}
	}})[0]
	const healthy, failing = "https://healthy.example/hook", "https://failing.example/hook"
	ok := enqueue(t, s, store.EnqueueParams{NotificationID: "ok", Endpoint: healthy, Payload: []byte(`{"id":"ok"}`)})
	down := enqueue(t, s, store.EnqueueParams{NotificationID: "down", Endpoint: failing, Payload: []byte(`{"id":"down"}`)})
	leases := make(map[int64]protocol.Lease)
	for _, c := range claimAll(t, s, 2) {
		leases[c.DeliveryID] = c.Lease
	}
	batch := []protocol.Outcome{
		{Lease: leases[ok], Result: protocol.Succeeded, HTTPStatus: 200},
		{Lease: leases[down], Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Minute},
	}
	holdRows(t, s.DB(), `SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`, down)
	mu.Lock()
	heard = nil
	mu.Unlock()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	settled, err := protocol.For(s).Settle(ctx, batch...)
	d, gerr := s.Outbox.Get(ctx, ok)
	if gerr != nil {
		t.Fatal(gerr)
	}
	if err != nil {
		t.Fatalf("settle: %v for the whole batch, yet delivery %d is %s: an outcome was applied", err, ok, d.Status)
	}
	if settled[0].Err != nil || settled[0].Status != courier.StatusSucceeded || d.Status != courier.StatusSucceeded {
		t.Errorf("the healthy outcome: %+v, row %s; want succeeded", settled[0], d.Status)
	}
	if code := courier.CodeOf(settled[1].Err); code != courier.CodeDatabaseUnavailable {
		t.Errorf("the held outcome: %+v; want it failed alone with %s", settled[1], courier.CodeDatabaseUnavailable)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 || heard[0].Status != courier.StatusSucceeded {
		t.Errorf("the Hook heard %+v; want the one settle that committed", heard)
	}
}

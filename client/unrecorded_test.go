package client_test

import (
	"net/http"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestHookHearsAnUnrecordedAttempt: an attempt whose outcome the store
// fails to record (a trigger refuses every write of the delivery's row
// from the moment the receiver has it) reaches the Hook, marked
// Unrecorded, with no status and the attempt's own code, and the
// delivery is left leased, to be sent again once its lease expires.
// Before, the worker logged "settle failed" and called no Hook: metrics
// fed by it never counted an attempt that will be sent again.
func TestHookHearsAnUnrecordedAttempt(t *testing.T) {
	t.Parallel()
	var b *workerBundle
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := b.store.DB().ExecContext(r.Context(), `CREATE TRIGGER refuse_settle BEFORE UPDATE ON courier_outbox
			BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
			t.Errorf("creating the trigger: %v", err)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}, nil)
	id := b.enqueueWith(t, "n-1", nil)
	if _, err := b.worker.Work(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-b.events:
		if !e.Unrecorded || e.LeaseLost || e.Status != "" || e.Code != courier.CodeReceiverUnavailable || e.HTTPStatus != http.StatusServiceUnavailable ||
			e.Outcome != store.AttemptRetry || e.DeliveryID != id {
			t.Fatalf("event %+v, want the unrecorded retry of delivery %d", e, id)
		}
	default:
		t.Fatal("the Hook heard nothing of the unrecorded attempt")
	}
	if d := b.get(t, id); d.Status != courier.StatusLeased {
		t.Fatalf("the delivery is %s, want leased", d.Status)
	}
	if attempts, err := b.store.Outbox.Attempts(t.Context(), id); err != nil || len(attempts) != 0 {
		t.Fatalf("attempts log %+v, %v; want none recorded", attempts, err)
	}
}

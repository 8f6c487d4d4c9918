package storetest_test

import (
	"testing"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/store"
)

// TestADeliveryDueBeforeTheClaimsStaleKeyLookEndedIsClaimed: on
// PostgreSQL, a delivery another transaction makes due while a claim looks
// for stale ordering keys (ordering_key_stale) is claimed by that claim, as
// it was when the claim read the priorities to claim from after that look
// (outbox_due_priorities). outbox_claim_look, read before it, read them
// once: a look for stale keys that found none left them as they were, and
// the claim leased nothing, the delivery left to the next claim. Here the
// look waits for a lock on the keys' table, held by the transaction that
// enqueues the delivery, due at the claim's now (one clock for both), and
// commits. The claim reads its look again after any of the statements
// that may run before it leases (the sweep, the look for stale keys, the
// probes, the parked deliveries' expiry).
func TestADeliveryDueBeforeTheClaimsStaleKeyLookEndedIsClaimed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := fakeclock.New()
	s := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now})[0]
	db := s.DB()
	lock, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	// EXCLUSIVE: reads of the table go on, a FOR UPDATE of its rows waits.
	if _, err := lock.ExecContext(ctx, "LOCK TABLE courier_ordering_keys IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	claimed := claimInBackground(t, s, "w") // a Store's first claim looks for stale keys
	waitStatement(t, db, staleLookStatement, true)
	e, err := s.Outbox.Enqueue(ctx, lock, store.EnqueueParams{NotificationID: "n1", Endpoint: "https://receiver.example/h", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Commit(); err != nil {
		t.Fatal(err)
	}
	got := <-claimed
	if len(got) != 1 || got[0].DeliveryID != e.ID {
		t.Fatalf("the claim leased %d deliveries; want the one enqueued, due, before its look for stale keys ended", len(got))
	}
}

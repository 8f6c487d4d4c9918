package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAClaimRolledBackLeavesParkedExpiryToTheNext: a claim ends parked
// deliveries whose deadline has come, and then lets the Store's claims
// skip that look for 30 seconds. It set the 30 seconds inside its
// transaction, before committing: a claim that failed after the look
// rolled back the deliveries it ended, but the next claims skipped the
// look all the same. The next claim now looks again, and ends them.
func TestAClaimRolledBackLeavesParkedExpiryToTheNext(t *testing.T) {
	ctx := t.Context()
	clock := fakeclock.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const full, other = "https://full.example/h", "https://other.example/h"
	if err := s.Endpoints.SetLimits(ctx, full, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	enqueue := func(id, endpoint string, deadline time.Time) int64 {
		t.Helper()
		e, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: id, Endpoint: endpoint, Payload: []byte(`{}`), Deadline: deadline})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	out := protocol.For(s)
	claim := func() ([]protocol.Claimed, error) {
		return out.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Hour})
	}
	enqueue("in-flight", full, time.Time{})
	parked := enqueue("parked", full, clock.Now().Add(time.Minute))
	if got, err := claim(); err != nil || len(got) != 1 {
		t.Fatalf("claimed %d, %v; want the first, the second parked behind it", len(got), err)
	}
	enqueue("due", other, time.Time{})
	clock.Advance(2 * time.Minute) // past the parked delivery's deadline, within the lease

	// The next claim ends the parked delivery, then fails as it leases.
	const refuse = "CREATE TRIGGER refuse_leases BEFORE UPDATE OF status ON courier_outbox WHEN NEW.status = 'leased' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
	if _, err := s.DB().ExecContext(ctx, refuse); err != nil {
		t.Fatal(err)
	}
	if got, err := claim(); err == nil {
		t.Fatalf("claimed %d with leases refused; want the claim to fail", len(got))
	}
	if d, err := s.Outbox.Get(ctx, parked); err != nil || d.Status == courier.StatusFailed {
		t.Fatalf("after the failed claim the parked delivery is %s (%v); want it as it was, the claim rolled back", d.Status, err)
	}
	if _, err := s.DB().ExecContext(ctx, "DROP TRIGGER refuse_leases"); err != nil {
		t.Fatal(err)
	}
	if got, err := claim(); err != nil || len(got) != 1 {
		t.Fatalf("claimed %d, %v; want the other endpoint's", len(got), err)
	}
	d, err := s.Outbox.Get(ctx, parked)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("the parked delivery past its deadline is %s (%s) after the next claim; want failed, expired", d.Status, d.LastErrorCode)
	}
}

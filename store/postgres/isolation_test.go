package postgres_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// TestLimitsHoldUnderARepeatableReadDefault: a database (or role) whose
// default_transaction_isolation is repeatable read. The claims counted an
// endpoint's leases in the snapshot their transaction took at its first
// statement, so two workers' claims each took the endpoint's one slot
// (MaxInFlight 1). The Store's transactions are READ COMMITTED whatever
// the default.
func TestLimitsHoldUnderARepeatableReadDefault(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	admin := openURL(t, u)
	if err := store.Migrate(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_isolation = ''repeatable read''', current_database()); END $$`); err != nil {
		t.Fatal(err)
	}
	dbA, dbB := openURL(t, u), openURL(t, u)
	var iso string
	if err := dbA.GetContext(ctx, &iso, "SHOW transaction_isolation"); err != nil || iso != "repeatable read" {
		t.Fatalf("the database's default isolation is %q, %v; want repeatable read", iso, err)
	}
	a, err := store.Open(ctx, dbA, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	var ahead atomic.Int64 // B's clock, ahead of A's
	b, err := store.Open(ctx, dbB, store.Config{Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	const ep = "https://receiver.example/hook"
	if err := a.Endpoints.SetLimits(ctx, ep, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	// d1 is due now; d2, first in claim order, is due in 5 s: A's claim
	// finds d1, and B's, 11 s ahead, would find d2.
	for _, p := range []store.EnqueueParams{
		{NotificationID: "d1", Endpoint: ep, Payload: []byte(`{"id":"d1"}`)},
		{NotificationID: "d2", Endpoint: ep, Payload: []byte(`{"id":"d2"}`), Priority: -1, NotBefore: time.Now().Add(5 * time.Second)},
	} {
		if _, err := a.Outbox.Enqueue(ctx, dbA, p); err != nil {
			t.Fatal(err)
		}
	}
	ahead.Store(int64(11 * time.Second))

	// B's claim waits after its first statement (the schema guard's),
	// which took its snapshot under repeatable read, while A claims.
	lock, err := admin.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, "LOCK TABLE courier_schema IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		got []protocol.Claimed
		err error
	}
	bDone := make(chan result, 1)
	go func() {
		got, err := protocol.For(b).Claim(ctx, protocol.ClaimParams{Owner: "worker-b", Limit: 1, Lease: time.Minute})
		bDone <- result{got, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; { // a bound on failure
		var n int
		if err := admin.GetContext(ctx, &n, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B's claim is not waiting for the lock (%d waiting)", n)
		}
		time.Sleep(10 * time.Millisecond) // polling, not synchronization by sleep
	}
	gotA, err := protocol.For(a).Claim(ctx, protocol.ClaimParams{Owner: "worker-a", Limit: 2, Lease: time.Minute})
	if err != nil || len(gotA) != 1 {
		t.Fatalf("A's claim: %d, %v", len(gotA), err)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	rb := <-bDone
	if rb.err != nil {
		t.Fatalf("B's claim: %v", rb.err)
	}
	var leased int
	if err := admin.GetContext(ctx, &leased, "SELECT count(*) FROM courier_outbox WHERE endpoint = $1 AND status = 'leased'", ep); err != nil {
		t.Fatal(err)
	}
	if leased != 1 {
		t.Fatalf("the endpoint of MaxInFlight 1 has %d leases (A took %s, B %d)", leased, gotA[0].NotificationID, len(rb.got))
	}
}

// openURL opens a pool on the database at u for one test.
func openURL(t *testing.T, u string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(postgres.DriverName, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

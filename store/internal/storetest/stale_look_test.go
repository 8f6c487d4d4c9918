package storetest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// The tests here line up a claim's look for stale ordering keys
// (ordering_key_stale) with another transaction that moves one of its keys
// on: the look's statement takes its snapshot before that transaction
// commits and reaches the key's row after. PostgreSQL (READ COMMITTED)
// then locks the newest version of the row and checks it again against the
// outbox row the statement had already joined, the old head's, so the look
// may report a head, and a status, the key no longer has. A key must still
// move on only when its current head is finished.
//
// Filler keys, never stale, make the look's statement long enough to be
// seen running in pg_stat_activity; the other transaction commits while it
// runs. A look that ended before that commit proves nothing, so the race is
// played again with more filler until the two are seen to line up.

// staleLookStatement is a piece of ordering_key_stale's text that no other
// statement of courier's contains.
const staleLookStatement = "FOR UPDATE OF k SKIP LOCKED"

// TestConcurrentStaleKeyLooksLeaseOneDeliveryOfTheKey: two workers (two
// Stores on one database) look for stale ordering keys at once. Key k was
// left stale: its head k1 succeeded while an application's enqueue held
// the key's row. Worker A's claim moves k on (k2 heads it) and leases k2;
// worker B's look, begun before A committed, reaches k's row after, and
// is told that k2 is k's finished head. B leases nothing of k: k3 waits
// for k2.
func TestConcurrentStaleKeyLooksLeaseOneDeliveryOfTheKey(t *testing.T) {
	t.Parallel()
	lineUp(t, func(t *testing.T, filler int) bool {
		clock := fakeclock.New()
		stores := couriertest.PostgresStores(t, 2, store.Config{Now: clock.Now, Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})
		a, b := stores[0], stores[1]
		db := a.DB()
		const ep, other = "https://receiver.example/orders", "https://receiver.example/other"
		ids := enqueueKeyed(t, a, ep, "k1", "k2", "k3")
		enqueue(t, a, store.EnqueueParams{NotificationID: "x1", Endpoint: other, Payload: []byte(`{"id":"x1"}`)})
		for _, c := range claimAll(t, a, 2) {
			if c.Endpoint == other { // opens other's breaker: A's next claim probes it
				settleAll(t, a, protocol.Retry, c)
				continue
			}
			leaveStale(t, a, protocol.Succeeded, c)
		}
		fillKeys(t, db, ids["k2"], filler)
		clock.Advance(2 * time.Second) // other's cool-down is over

		// A moves k on, then waits to take other's probe, its transaction
		// open, until the test lets the breaker's row go.
		breaker := holdRows(t, db, `SELECT 1 FROM courier_endpoints WHERE endpoint = $1 FOR UPDATE`, other)
		claimedA := claimInBackground(t, a, "a")
		waitStatement(t, db, "WITH room AS MATERIALIZED", true) // endpoint_probe_take's opening
		claimedB := claimInBackground(t, b, "b")
		waitStatement(t, db, staleLookStatement, false)
		if err := breaker.Rollback(); err != nil {
			t.Fatal(err)
		}
		gotA := <-claimedA
		lined := running(t, db, staleLookStatement, false)
		gotB := <-claimedB

		if got := leasedOf(ids, gotA, gotB); !slices.Equal(got, []string{"k2"}) {
			t.Fatalf("the two claims leased %v of key k: want k2 alone, k3 waiting for it", got)
		}
		return lined
	})
}

// TestRedriveBesideAStaleKeyLookKeepsTheKeyInOrder: under OrderingSkipFailed, key
// k was left stale by its head k1, which failed while an application's
// enqueue held the key's row. An operator redrives k1 while a worker's
// look for stale keys runs: Redrive makes k1 k's head again, and the look,
// begun before Redrive committed, is told that k1 is k's failed head. The
// worker leases k1 alone: k2 waits for it.
func TestRedriveBesideAStaleKeyLookKeepsTheKeyInOrder(t *testing.T) {
	t.Parallel()
	lineUp(t, func(t *testing.T, filler int) bool {
		clock := fakeclock.New() // one time for both: k1 is redriven due at the claim's now
		stores := couriertest.PostgresStores(t, 2, store.Config{Now: clock.Now, OrderingOnFailure: store.OrderingSkipFailed})
		operator, worker := stores[0], stores[1]
		db := operator.DB()
		const ep = "https://receiver.example/orders"
		ids := enqueueKeyed(t, operator, ep, "k1", "k2")
		leaveStale(t, operator, protocol.Failed, claimAll(t, operator, 1)...)
		fillKeys(t, db, ids["k2"], filler)

		claimed := claimInBackground(t, worker, "w")
		waitStatement(t, db, staleLookStatement, false)
		if n, err := operator.Outbox.Redrive(t.Context(), store.RedriveParams{ID: ids["k1"]}); err != nil || n != 1 {
			t.Fatalf("Redrive = %d, %v; want k1 redriven", n, err)
		}
		lined := running(t, db, staleLookStatement, false)
		leased := leasedOf(ids, <-claimed)

		switch {
		case lined && !slices.Equal(leased, []string{"k1"}):
			t.Fatalf("the claim leased %v of key k: want the redriven k1 alone, k2 waiting for it", leased)
		case len(leased) > 1:
			t.Fatalf("the claim leased %v of key k: want one at most", leased)
		}
		// Unlined, the look reached k's row before Redrive took it: it
		// moved k on to k2 (OrderingSkipFailed) and Redrive queued k1 behind it,
		// as it would have after the claim. The race is played again.
		return lined
	})
}

// lineUp plays race, which reports whether the look for stale keys was
// still running when the other transaction had committed, with more
// filler keys each time until it was.
func lineUp(t *testing.T, race func(t *testing.T, filler int) bool) {
	t.Helper()
	for filler := 25_000; filler <= 400_000; filler *= 2 {
		lined := false
		t.Run(fmt.Sprintf("filler=%d", filler), func(t *testing.T) { lined = race(t, filler) })
		if lined || t.Failed() {
			return
		}
	}
	t.Fatal("the look for stale keys always ended before the other transaction committed")
}

// enqueueKeyed enqueues the notifications ids to ep under ordering key k,
// in that order, each in a transaction of its own, and returns their ids
// by notification.
func enqueueKeyed(t *testing.T, s *store.Store, ep string, ids ...string) map[string]int64 {
	t.Helper()
	out := make(map[string]int64, len(ids))
	for _, id := range ids {
		out[id] = enqueue(t, s, store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id), OrderingKey: "k"})
	}
	return out
}

// leaveStale settles c, the head of key k, with r while an application's
// enqueue of another delivery of k holds the key's row: the settle leaves
// the key stale, its head finished. The application then commits.
func leaveStale(t *testing.T, s *store.Store, r protocol.Result, c ...protocol.Claimed) {
	t.Helper()
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "later", Endpoint: c[0].Endpoint, Payload: []byte(`{"id":"later"}`), OrderingKey: "k"}); err != nil {
		t.Fatal(err)
	}
	settleAll(t, s, r, c...)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// leasedOf returns the notifications of ids that the claims leased, in
// notification order.
func leasedOf(ids map[string]int64, claims ...[]protocol.Claimed) []string {
	var out []string
	for _, cs := range claims {
		for _, c := range cs {
			for id, delivery := range ids {
				if delivery == c.DeliveryID {
					out = append(out, id)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// fillKeys adds n ordering keys headed by head, a delivery that stays
// unfinished (so they are never stale), that sort before the test's own.
func fillKeys(t *testing.T, db *sqlx.DB, head int64, n int) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), `INSERT INTO courier_ordering_keys (endpoint, ordering_key, head_id, blocked_at, updated_at)
		SELECT 'https://filler.example/hooks', 'f' || g, $1, NULL, 0 FROM generate_series(1, $2::int) AS g`, head, n); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `ANALYZE courier_ordering_keys`); err != nil {
		t.Fatal(err)
	}
}

// claimInBackground claims for owner in a goroutine and sends what it
// leased.
func claimInBackground(t *testing.T, s *store.Store, owner string) <-chan []protocol.Claimed {
	done := make(chan []protocol.Claimed, 1)
	go func() {
		c, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: owner, Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Errorf("claim of %s: %v", owner, err)
		}
		done <- c
	}()
	return done
}

// waitStatement waits until another backend of db's database runs a
// statement holding text (and waits for a lock, when waiting): condition
// based, not a sleep for synchronization.
func waitStatement(t *testing.T, db *sqlx.DB, text string, waiting bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !running(t, db, text, waiting) {
		select {
		case <-ctx.Done():
			t.Fatalf("no backend runs %q", text)
		case <-time.After(time.Millisecond):
		}
	}
}

// running reports whether another backend of db's database runs a
// statement holding text (and waits for a lock, when waiting).
func running(t *testing.T, db *sqlx.DB, text string, waiting bool) bool {
	t.Helper()
	var n int
	if err := db.GetContext(t.Context(), &n, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active'
			AND strpos(query, $1) > 0 AND (NOT $2 OR wait_event_type = 'Lock')`, text, waiting); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

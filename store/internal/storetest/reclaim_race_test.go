package storetest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store/postgres"
)

// reclaimer runs a claim's reclaim (attempts_log_expired_leases, then
// outbox_reclaim_expired_leases) in a transaction it leaves open. Its
// methods report a failure with t.Error (they run on goroutines too) and
// return false.
type reclaimer struct {
	t   *testing.T
	tx  *sqlx.Tx
	now int64
	ids []int64 // the deliveries it logged
}

func beginReclaim(t *testing.T, db *sqlx.DB, now int64) (*reclaimer, bool) {
	t.Helper()
	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Error(err)
		return nil, false
	}
	t.Cleanup(func() { tx.Rollback() })
	return &reclaimer{t: t, tx: tx, now: now}, true
}

func (r *reclaimer) log() bool {
	r.t.Helper()
	q, v := boundQuery(r.t, postgres.DriverName, "queries/attempts.sql", "attempts_log_expired_leases", map[string]any{"now": r.now, "limit": protocol.MaxClaimBatch})
	rows, err := r.tx.QueryContext(r.t.Context(), q, v...)
	if err != nil {
		r.t.Error(err)
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			r.t.Error(err)
			return false
		}
		r.ids = append(r.ids, id)
	}
	if err := rows.Err(); err != nil {
		r.t.Error(err)
		return false
	}
	return true
}

func (r *reclaimer) reclaim() bool {
	r.t.Helper()
	q, v := boundQuery(r.t, postgres.DriverName, "queries/outbox.sql", "outbox_reclaim_expired_leases", map[string]any{"now": r.now, "ids": jsonArg(r.ids)})
	rows, err := r.tx.QueryContext(r.t.Context(), q, v...)
	if err != nil {
		r.t.Error(err)
		return false
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		r.t.Error(err)
		return false
	}
	if n != len(r.ids) {
		r.t.Errorf("a reclaim at %d logged %d expired leases and reclaimed %d", r.now, len(r.ids), n)
		return false
	}
	return true
}

func (r *reclaimer) end(commit bool) bool {
	r.t.Helper()
	var err error
	if commit {
		err = r.tx.Commit()
	} else {
		err = r.tx.Rollback()
	}
	if err != nil {
		r.t.Error(err)
		return false
	}
	return true
}

// TestConcurrentReclaimsLogAndReclaimEachLeaseOnce: on PostgreSQL, claims
// that take back expired leases at once, in transactions of their own, at
// the same time or not, some rolling back after they logged, log each
// expired lease's attempt once and reclaim each lease once, and reclaim
// none they did not log: every transaction reclaims exactly the leases it
// logged, and once they are done and the claims after them drained the
// rest, no expired lease is left leased.
func TestConcurrentReclaimsLogAndReclaimEachLeaseOnce(t *testing.T) {
	t.Parallel()
	const total, expired = 6000, 3500
	type step struct {
		who  int
		what string // log, reclaim, commit, rollback
	}
	for _, tc := range []struct {
		name  string
		nows  []int64 // each reclaimer's now, after the fill's
		steps []step
	}{
		{"same now, reclaimed in turn", []int64{0, 0}, []step{{0, "log"}, {1, "log"}, {0, "reclaim"}, {1, "reclaim"}, {0, "commit"}, {1, "commit"}}},
		{"same now, the second commits first", []int64{0, 0}, []step{{0, "log"}, {1, "log"}, {1, "reclaim"}, {1, "commit"}, {0, "reclaim"}, {0, "commit"}}},
		{"own nows, the later commits first", []int64{0, 1}, []step{{0, "log"}, {1, "log"}, {1, "reclaim"}, {1, "commit"}, {0, "reclaim"}, {0, "commit"}}},
		{"same now, one rolls back after it reclaimed", []int64{0, 0, 0}, []step{{0, "log"}, {1, "log"}, {1, "reclaim"}, {1, "rollback"}, {2, "log"}, {0, "reclaim"}, {2, "reclaim"}, {0, "commit"}, {2, "commit"}}},
		{"same now, one rolls back after it logged", []int64{0, 0}, []step{{1, "log"}, {0, "log"}, {1, "rollback"}, {0, "reclaim"}, {0, "commit"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, db := migratedStore(t, openPostgres)
			now := time.Now().UnixMicro()
			fillLeases(t, db, total, expired, now)
			rs := make([]*reclaimer, len(tc.nows))
			for i, d := range tc.nows {
				var ok bool
				if rs[i], ok = beginReclaim(t, db, now+d); !ok {
					t.FailNow()
				}
			}
			for _, s := range tc.steps {
				ok := false
				switch r := rs[s.who]; s.what {
				case "log":
					ok = r.log()
				case "reclaim":
					ok = r.reclaim()
				default:
					ok = r.end(s.what == "commit")
				}
				if !ok {
					t.FailNow()
				}
			}
			drainReclaims(t, db, now+10)
			checkReclaimedOnce(t, db, now, expired)
		})
	}
	t.Run("claimers at once", func(t *testing.T) {
		t.Parallel()
		_, db := migratedStore(t, openPostgres)
		now := time.Now().UnixMicro()
		fillLeases(t, db, total, expired, now)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 10 {
					r, ok := beginReclaim(t, db, now+int64(i%2))                       // half of them at one now
					if !ok || !r.log() || !r.reclaim() || !r.end(w != 3 || i%3 != 0) { // one claimer rolls some back
						return
					}
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		drainReclaims(t, db, now+10)
		checkReclaimedOnce(t, db, now, expired)
	})
}

// drainReclaims reclaims, a claim after another, until none is left.
func drainReclaims(t *testing.T, db *sqlx.DB, now int64) {
	t.Helper()
	for i := range 20 {
		r, ok := beginReclaim(t, db, now+int64(i))
		if !ok || !r.log() {
			t.FailNow()
		}
		if len(r.ids) == 0 {
			r.end(false)
			return
		}
		if !r.reclaim() || !r.end(true) {
			t.FailNow()
		}
	}
	t.Fatal("expired leases still left after 20 claims")
}

// checkReclaimedOnce checks that no lease expired at now is left leased,
// and that each of the expired ones was logged once and none reclaimed
// unlogged.
func checkReclaimedOnce(t *testing.T, db *sqlx.DB, now int64, expired int) {
	t.Helper()
	ctx := context.Background()
	var leased, logged, twice, unlogged int
	for q, dst := range map[string]*int{
		"SELECT count(*) FROM courier_outbox WHERE status = 'leased' AND lease_expires_at <= $1::bigint": &leased,
		"SELECT count(*) FROM courier_attempts WHERE outcome = 'lease_expired' AND $1::bigint > 0":       &logged,
		`SELECT count(*) FROM (SELECT delivery_id FROM courier_attempts WHERE outcome = 'lease_expired' AND $1::bigint > 0
			GROUP BY delivery_id HAVING count(*) > 1) AS d`: &twice,
		`SELECT count(*) FROM courier_outbox AS o WHERE status <> 'leased' AND $1::bigint > 0 AND NOT EXISTS (
			SELECT 1 FROM courier_attempts AS a WHERE a.delivery_id = o.id AND a.outcome = 'lease_expired')`: &unlogged,
	} {
		if err := db.GetContext(ctx, dst, q, now); err != nil {
			t.Fatal(err)
		}
	}
	if leased != 0 || logged != expired || twice != 0 || unlogged != 0 {
		t.Errorf("%d expired leases left leased, %d logged (%d of them twice), %d reclaimed unlogged; want 0, %d (0), 0",
			leased, logged, twice, unlogged, expired)
	}
}

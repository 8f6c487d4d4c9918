package storetest_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store/postgres"
)

// TestReclaimReadsABatchWhateverTheStatistics: on PostgreSQL, a claim
// after a fleet of workers stopped takes back a batch of its expired
// leases reading about a batch's rows, whatever the plan: with the
// statistics of before the fleet leased them (the autovacuum has not
// caught up), planned with the values or generically. The statistics
// show a few leases; the fleet then leased 20,000 deliveries, 5,000 of
// whose leases have expired. Planned with its values, the log of the
// expired leases read every one of them from courier_outbox_leases and
// sorted them all for its ORDER BY (lease_expires_at, id), which the
// index (lease_expires_at) gives only in part; planned generically, the
// reclaim joined every expired lease it walked with every attempt the
// log had just written (a nested loop whose join filter compared them,
// millions of pairs), not probing courier_attempts by delivery.
func TestReclaimReadsABatchWhateverTheStatistics(t *testing.T) {
	t.Parallel()
	_, db := migratedStore(t, openPostgres)
	ctx := t.Context()
	now := time.Now().UnixMicro()
	fillLeases(t, db, 100, 50, now-time.Hour.Microseconds())
	fillRows(t, db, "finished", 20_000)
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
	fillRows(t, db, "scheduled", 20_000)
	if _, err := db.ExecContext(ctx, `UPDATE courier_outbox SET status = 'leased', attempts = 1,
		lease_owner = 'crashed', lease_token = 't' || id, leased_at = $1::bigint - 60000000,
		lease_expires_at = CASE WHEN id % 4 = 0 THEN $1::bigint - 1000000 + id ELSE $1::bigint + 60000000 + id END
		WHERE status = 'pending'`, now); err != nil {
		t.Fatal(err)
	}
	const batch = protocol.MaxClaimBatch
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			for _, s := range []string{"SET plan_cache_mode = " + mode, "BEGIN"} {
				if _, err := conn.ExecContext(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			defer conn.ExecContext(context.WithoutCancel(ctx), "RESET plan_cache_mode")
			var ids []int64
			for _, f := range [][2]string{{"attempts", "attempts_log_expired_leases"}, {"outbox", "outbox_reclaim_expired_leases"}} {
				q, vals := boundQuery(t, postgres.DriverName, "queries/"+f[0]+".sql", f[1], map[string]any{"now": now, "limit": batch, "ids": jsonArg(ids)})
				if _, err := conn.ExecContext(ctx, "PREPARE courier_reclaim AS "+q); err != nil {
					t.Fatalf("%s: %v", f[1], err)
				}
				plan, err := planText(conn.QueryContext(ctx, "EXPLAIN (ANALYZE) EXECUTE courier_reclaim"+literals(vals)))
				if err != nil {
					t.Fatalf("%s: %v", f[1], err)
				}
				if _, err := conn.ExecContext(ctx, "DEALLOCATE courier_reclaim"); err != nil {
					t.Fatal(err)
				}
				if read := rowsRead(plan); read > 2*batch {
					t.Errorf("%s read %d rows to take back a batch of %d:\n%s", f[1], read, batch, plan)
				}
				if ids == nil {
					ids = loggedAt(ctx, t, conn, now)
				}
			}
		})
	}
}

var (
	scanRows    = regexp.MustCompile(`(?:Seq Scan|Index Scan|Index Only Scan|Bitmap Heap Scan)\b.*\(actual time=\S+ rows=(\d+) loops=(\d+)\)`)
	nodeLoops   = regexp.MustCompile(`\(actual time=\S+ rows=\d+ loops=(\d+)\)`)
	removedRows = regexp.MustCompile(`Rows Removed by (?:Join )?Filter: (\d+)`)
)

// rowsRead sums the rows an EXPLAIN ANALYZE's scans read: those they
// returned, and those their filters and the joins' filters removed.
func rowsRead(plan string) int {
	read, loops := 0, 1
	for _, l := range strings.Split(plan, "\n") {
		if m := nodeLoops.FindStringSubmatch(l); m != nil {
			loops, _ = strconv.Atoi(m[1])
		}
		if m := scanRows.FindStringSubmatch(l); m != nil {
			r, _ := strconv.Atoi(m[1])
			read += r * loops
		}
		if m := removedRows.FindStringSubmatch(l); m != nil {
			r, _ := strconv.Atoi(m[1]) // per loop
			read += r * loops
		}
	}
	return read
}

// loggedAt returns the deliveries whose lease_expired attempt the
// transaction on conn logged at now, asked with ctx.
func loggedAt(ctx context.Context, t *testing.T, conn interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, now int64) []int64 {
	t.Helper()
	rows, err := conn.QueryContext(ctx, `SELECT delivery_id FROM courier_attempts WHERE outcome = 'lease_expired' AND finished_at = $1::bigint ORDER BY delivery_id`, now)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	ids := []int64{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// jsonArg writes ids as a JSON array, as the store writes :ids.
func jsonArg(ids []int64) string {
	if ids == nil {
		ids = []int64{}
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

// fillLeases fills the outbox with total deliveries leased by a stopped
// worker, the first expired of them (by id) expired at now, one
// microsecond apart, and the rest expiring a minute after now.
func fillLeases(t *testing.T, db *sqlx.DB, total, expired int, now int64) {
	t.Helper()
	fillRows(t, db, "due", total)
	if _, err := db.ExecContext(t.Context(), `UPDATE courier_outbox SET status = 'leased', attempts = 1,
		lease_owner = 'crashed', lease_token = 't' || id, leased_at = $1::bigint - 60000000,
		lease_expires_at = CASE WHEN id < (SELECT min(id) FROM courier_outbox WHERE status = 'pending') + $2::bigint
			THEN $1::bigint - 1000000 + id ELSE $1::bigint + 60000000 + id END
		WHERE status = 'pending'`, now, expired); err != nil {
		t.Fatal(err)
	}
}

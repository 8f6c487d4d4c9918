package storetest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
)

// TestPruneBatchReadsOnlyItsRows: a batch of Outbox.Prune reads its rows
// in updated_at order from an index, on both engines, with and without
// statistics: it never sorts every prunable row to keep a batch of them,
// which made a whole prune quadratic in the rows it removes. PostgreSQL is
// told to avoid sequential scans, so its plan shows a sort of the outbox
// only where no index gives the order.
func TestPruneBatchReadsOnlyItsRows(t *testing.T) {
	t.Parallel()
	args := map[string]any{"before": int64(1 << 62), "limit": 100}
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		text, vals := boundQuery(t, e.driver, "queries/outbox.sql", "outbox_prune", args)
		for _, stage := range []string{"empty", "1000 prunable rows, analyzed"} {
			if stage != "empty" {
				fillPrunable(t, s, db, 1000)
			}
			var unsorted string
			if e.name == "sqlite" {
				plan, err := planText(db.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+text, vals...))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(plan, "USE TEMP B-TREE FOR ORDER BY") || !strings.Contains(plan, "courier_outbox_status") {
					unsorted = plan
				}
			} else {
				unsorted = pgSortsTheOutbox(t, db, text, vals)
			}
			if unsorted != "" {
				t.Errorf("%s: outbox_prune sorts prunable rows it reads in no order, to keep a batch:\n%s", stage, unsorted)
			}
		}
	})
}

// fillPrunable enqueues n deliveries and finishes them, succeeded and
// suppressed by turns, then has the engine gather statistics.
func fillPrunable(t *testing.T, s *store.Store, db *sqlx.DB, n int) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for i := range n {
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("p-%d", i), Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE courier_outbox SET attempts = 1,
		status = CASE WHEN id % 2 = 0 THEN 'succeeded' ELSE 'suppressed' END,
		ack_sha256 = CASE WHEN id % 2 = 0 THEN '' END,
		last_error_code = CASE WHEN id % 2 = 1 THEN 'cancelled' END`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatal(err)
	}
}

// pgPlan is a node of PostgreSQL's EXPLAIN (FORMAT JSON).
type pgPlan struct {
	NodeType string   `json:"Node Type"`
	Relation string   `json:"Relation Name"`
	Plans    []pgPlan `json:"Plans"`
}

// pgSortsTheOutbox explains text on PostgreSQL with sequential scans
// avoided, and returns the plan if a Sort node takes courier_outbox's rows
// from a scan no Limit bounds, "" if none does.
func pgSortsTheOutbox(t *testing.T, db *sqlx.DB, text string, vals []any) string {
	t.Helper()
	ctx := t.Context()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
		t.Fatal(err)
	}
	var out string
	if err := tx.GetContext(ctx, &out, "EXPLAIN (FORMAT JSON) "+text, vals...); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan pgPlan }
	if err := json.Unmarshal([]byte(out), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN (FORMAT JSON) = %s: %v", out, err)
	}
	var sorts func(p pgPlan, inSort bool) bool
	sorts = func(p pgPlan, inSort bool) bool {
		switch p.NodeType {
		case "Sort", "Incremental Sort":
			inSort = true
		case "Limit":
			inSort = false
		}
		if inSort && p.Relation == "courier_outbox" {
			return true
		}
		for _, c := range p.Plans {
			if sorts(c, inSort) {
				return true
			}
		}
		return false
	}
	if !sorts(plans[0].Plan, false) {
		return ""
	}
	var b strings.Builder
	var draw func(p pgPlan, depth int)
	draw = func(p pgPlan, depth int) {
		fmt.Fprintf(&b, "%s%s %s\n", strings.Repeat("  ", depth), p.NodeType, p.Relation)
		for _, c := range p.Plans {
			draw(c, depth+1)
		}
	}
	draw(plans[0].Plan, 0)
	return b.String()
}

// TestPruneStatementsReadAnIndex: every bounded prune statement picks its
// batch from an index on the time it prunes by, on both engines, never by
// reading its whole table: each statement holds SQLite's write lock (or
// PostgreSQL's row locks) only for the rows of its batch. PostgreSQL is
// told to avoid sequential scans, so its plan names the index only where
// one serves the query.
func TestPruneStatementsReadAnIndex(t *testing.T) {
	t.Parallel()
	args := map[string]any{"before": int64(1 << 50), "now": int64(1 << 50), "live_bucket": int64(1 << 30), "limit": 100}
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ctx := t.Context()
		for _, c := range []struct{ file, name, table, index string }{
			{"queries/outbox.sql", "outbox_prune", "courier_outbox", "courier_outbox_status"},
			{"queries/attempts.sql", "attempts_prune", "courier_attempts", "courier_attempts_finished"},
			{"queries/inbox.sql", "inbox_prune", "courier_inbox", "courier_inbox_updated"},
			{"queries/replay.sql", "replay_prune", "courier_replay", "courier_replay_expires"},
			{"queries/replay.sql", "replay_prune_counts", "courier_replay_counts", "courier_replay_counts_bucket"},
		} {
			text, vals := boundQuery(t, e.driver, c.file, c.name, args)
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			explain, scan := "EXPLAIN QUERY PLAN ", "SCAN "+c.table
			if e.name == "postgres" {
				if _, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
					t.Fatal(err)
				}
				explain, scan = "EXPLAIN ", "Seq Scan on "+c.table
			}
			plan, err := planText(tx.QueryContext(ctx, explain+text, vals...))
			tx.Rollback()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if strings.Contains(plan, scan) || !strings.Contains(plan, c.index) {
				t.Errorf("%s does not pick its batch from %s:\n%s", c.name, c.index, plan)
			}
		}
	})
}

// BenchmarkPruneDeadEndpoints times one Outbox.Prune of 100,000 breaker
// records two days old of endpoints with nothing left to send, half open
// and half disabled by a 410 Gone, beside 100,000 deliveries waiting for
// a live endpoint (which each statement reads to keep that endpoint's
// record). deleted is the records the prune deleted; max-batch-ms the
// longest one statement took, about the longest the prune held SQLite's
// one writer at a time. Run it with -benchtime=1x: each iteration fills
// the tables again, untimed.
func BenchmarkPruneDeadEndpoints(b *testing.B) {
	const dead, waiting = 100_000, 100_000
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s, db := migratedStore(b, e.open)
			ctx := context.Background()
			sum := sha256.Sum256(benchPayload)
			digest := hex.EncodeToString(sum[:])
			fillEndpoints := db.Rebind(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at)
				SELECT 'https://gone-' || i || '.example/h', CASE WHEN i % 2 = 0 THEN 'disabled' ELSE 'open' END, 1, ?, ?,
					CASE WHEN i % 2 = 0 THEN 'endpoint_gone' ELSE 'receiver_unavailable' END, ?
				FROM n`)
			payloadCol, payloadVal := "payload, ", "?, " // SQLite: fillPayloads, after
			if payloadsApart(db) {
				payloadCol, payloadVal = "", ""
			}
			fillWaiting := db.Rebind(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO courier_outbox (notification_id, endpoint, ` + payloadCol + `payload_sha256, profile, key_id, status,
					priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
				SELECT 'n-' || i, 'https://live.example/h', ` + payloadVal + `?, 'courier', '', 'pending', 0, 0, 8, ?, ?, ?, ?
				FROM n`)
			for b.Loop() {
				b.StopTimer()
				for _, table := range []string{"courier_endpoints", "courier_outbox"} {
					if _, err := db.ExecContext(ctx, "DELETE FROM "+table); err != nil {
						b.Fatal(err)
					}
				}
				now := time.Now()
				then := now.Add(-48 * time.Hour).UnixMicro()
				if _, err := db.ExecContext(ctx, fillEndpoints, dead, then, then, then); err != nil {
					b.Fatal(err)
				}
				args := []any{waiting, benchPayload, digest, now.UnixMicro(), now.Add(time.Hour).UnixMicro(), now.UnixMicro(), now.UnixMicro()}
				if payloadsApart(db) {
					args = slices.Delete(args, 1, 2)
				}
				if _, err := db.ExecContext(ctx, fillWaiting, args...); err != nil {
					b.Fatal(err)
				}
				fillPayloads(b, db, benchPayload)
				if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
					b.Fatal(err)
				}
				var longest time.Duration
				last := time.Now()
				b.StartTimer()
				n, err := s.Outbox.Prune(ctx, store.PruneParams{OlderThan: 24 * time.Hour, OnBatch: func(int) {
					longest = max(longest, time.Since(last))
					last = time.Now()
				}})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(n), "deleted")
				b.ReportMetric(float64(longest.Microseconds())/1000, "max-batch-ms")
			}
		})
	}
}

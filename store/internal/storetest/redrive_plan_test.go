package storetest_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
)

// TestRedriveReadsItsKeysOnce: the statement that moves an endpoint's
// failed deliveries (outbox_redrive) reads the ordering keys Redrive took
// once, on both engines, and looks each delivery's key up in what it read:
// never the whole list again for each delivery. Read per row, a redrive of
// n keyed deliveries was quadratic in n, and on SQLite held the one writer
// (every claim, settle and enqueue) for minutes once n was in the tens of
// thousands.
func TestRedriveReadsItsKeysOnce(t *testing.T) {
	t.Parallel()
	args := map[string]any{
		"now": int64(1), "deadline": int64(2), "budget": 8, "endpoint": "https://r.example/h", "ids": `[1, 2]`,
		"keys": `[{"endpoint":"https://r.example/h","ordering_key":"k"}]`,
	}
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		text, vals := boundQuery(t, e.driver, "queries/outbox.sql", "outbox_redrive", args)
		explain := "EXPLAIN QUERY PLAN "
		if e.name == "postgres" {
			explain = "EXPLAIN "
		}
		plan, err := planText(db.QueryContext(t.Context(), explain+text, vals...))
		if err != nil {
			t.Fatal(err)
		}
		if perRow(e.name, plan) {
			t.Errorf("outbox_redrive reads its keys again for every delivery:\n%s", plan)
		}
	})
}

// perRow reports whether a plan reads the JSON list of keys in a
// subquery run for each row: on SQLite a correlated one (an uncorrelated
// list is read once, into an index), on PostgreSQL a SubPlan not hashed.
func perRow(engine, plan string) bool {
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "json_each") && !strings.Contains(l, "jsonb_to_recordset") {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			if engine == "sqlite" && strings.Contains(lines[j], "SUBQUERY") {
				return strings.Contains(lines[j], "CORRELATED")
			}
			if engine == "postgres" {
				if m := regexp.MustCompile(`SubPlan (\d+)`).FindStringSubmatch(lines[j]); m != nil {
					return !strings.Contains(plan, "hashed SubPlan "+m[1])
				}
			}
		}
		return true
	}
	return true // no read of the keys at all: not the statement this test knows
}

// TestRedriveReadsEachBatchInOrder: Redrive reads each batch
// (outbox_redrive_batch) in order from courier_outbox_status, after its
// engine's outbox_redrive_in_order, never by reading and sorting every
// failed delivery, on both engines, even on a table whose statistics
// predate its failures (never analyzed here). A sort per batch made a
// large Redrive quadratic in the deliveries it moves.
func TestRedriveReadsEachBatchInOrder(t *testing.T) {
	t.Parallel()
	const failed = 5000
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ps := make([]store.EnqueueParams, failed)
		for i := range ps {
			ps[i] = store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://r.example/h", Payload: benchPayload}
		}
		tx, err := s.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Outbox.EnqueueMany(t.Context(), tx, ps); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), `UPDATE courier_outbox SET status = 'failed', attempts = 1, last_error_code = 'receiver_unavailable'`); err != nil {
			t.Fatal(err)
		}
		args := map[string]any{
			"status": "failed", "endpoint": "https://r.example/h", "limit": 200,
			"after_updated_at": int64(0), "after_id": int64(0), "last_updated_at": int64(1) << 62, "last_id": int64(1) << 62,
		}
		read, err := db.BeginTxx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer read.Rollback()
		if text, _ := boundQuery(t, e.driver, "queries/outbox.sql", "outbox_redrive_in_order", nil); strings.TrimSpace(text) != "" {
			if _, err := read.ExecContext(t.Context(), text); err != nil {
				t.Fatal(err)
			}
		}
		text, vals := boundQuery(t, e.driver, "queries/outbox.sql", "outbox_redrive_batch", args)
		explain, sorted := "EXPLAIN QUERY PLAN ", "TEMP B-TREE"
		if e.name == "postgres" {
			explain, sorted = "EXPLAIN ", "Sort"
		}
		plan, err := planText(read.QueryContext(t.Context(), explain+text, vals...))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, sorted) || !strings.Contains(plan, "courier_outbox_status") {
			t.Errorf("outbox_redrive_batch does not read courier_outbox_status in order:\n%s", plan)
		}
	})
}

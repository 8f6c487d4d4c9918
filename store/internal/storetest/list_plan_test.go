package storetest_test

import (
	"fmt"
	"strings"
	"testing"
)

// listByStatus is the query Outbox.List runs for a page of one status.
const listByStatus = "outbox_list_by_status"

// TestListByStatusReadsItsStatusInIDOrder: a page of Outbox.List of one
// status, newest first, reads that status's deliveries from an index in
// id order, from the cursor down, on both engines, with statistics or
// (SQLite) without: a page costs what it shows. Written as "no status or
// this one", the filter gave no index a range: SQLite walked the primary
// key from the cursor down, every delivery for the few of a rare status
// (a failed one among a million succeeded), or, with statistics, read
// every delivery of the status from courier_outbox_status and sorted
// them, as PostgreSQL did, for each page of a common one.
func TestListByStatusReadsItsStatusInIDOrder(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		for _, analyze := range []bool{false, true} {
			if !analyze && e.name == "postgres" {
				continue // autovacuum keeps statistics
			}
			t.Run(fmt.Sprintf("%s/stats=%t", e.name, analyze), func(t *testing.T) {
				t.Parallel()
				_, db := migratedStore(t, e.open)
				ctx := t.Context()
				fillRows(t, db, "due", 10)
				fillRows(t, db, "finished", 5_000)
				if analyze {
					if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
						t.Fatal(err)
					}
				}
				for _, status := range []string{"pending", "succeeded"} {
					args := map[string]any{
						"status": status, "endpoint": "", "endpoint_spelled": "", "since": int64(0), "until": int64(1 << 62),
						"max_id": int64(1<<63 - 1), "limit": 101,
					}
					text, vals := boundQuery(t, e.driver, "queries/outbox.sql", listByStatus, args)
					explain, want, bad := "EXPLAIN QUERY PLAN ", "USING INDEX courier_outbox_listed (status=? AND rowid<?)", []string{"TEMP B-TREE", "SCAN courier_outbox"}
					if e.name == "postgres" {
						// PostgreSQL weighs its statistics: the few of a rare
						// status come from the status's index, and a page of
						// the status of nearly every row may walk the primary
						// key, which finds it at once. Neither sorts.
						explain, want, bad = "EXPLAIN ", "Index Scan Backward using courier_outbox_listed", []string{"Sort", "Seq Scan"}
						if status == "succeeded" {
							want = "Index Scan Backward using "
						}
					}
					plan, err := planText(db.QueryContext(ctx, explain+text, vals...))
					if err != nil {
						t.Fatal(err)
					}
					if !strings.Contains(plan, want) || strings.Contains(plan, bad[0]) || strings.Contains(plan, bad[1]) {
						t.Errorf("a page of the %s deliveries is not read from the status's index in id order:\n%s", status, plan)
					}
				}
			})
		}
	}
}

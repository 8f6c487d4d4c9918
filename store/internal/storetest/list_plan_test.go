package storetest_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
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
	planned(t, func(tb testing.TB, db *sqlx.DB) {
		fillRows(tb, db, "due", 10)
		fillRows(tb, db, "finished", 5_000)
	}, func(t *testing.T, name, driver string, db *sqlx.DB) {
		ctx := t.Context()
		for _, status := range []string{"pending", "succeeded"} {
			args := map[string]any{
				"status": status, "endpoint": "", "endpoint_spelled": "", "since": int64(0), "until": int64(1 << 62),
				"max_id": int64(1<<63 - 1), "limit": 101,
			}
			text, vals := boundQuery(t, driver, "queries/outbox.sql", listByStatus, args)
			explain, want, bad := "EXPLAIN QUERY PLAN ", "USING INDEX courier_outbox_listed (status=? AND rowid<?)", []string{"TEMP B-TREE", "SCAN courier_outbox"}
			if name == "postgres" {
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

// planned runs check on a migrated database of each engine that fill
// filled, with statistics and, on SQLite, without (PostgreSQL's
// autovacuum keeps them): the plans an application's database may get.
func planned(t *testing.T, fill func(testing.TB, *sqlx.DB), check func(t *testing.T, name, driver string, db *sqlx.DB)) {
	t.Parallel()
	for _, e := range engines {
		for _, analyze := range []bool{false, true} {
			if !analyze && e.name == "postgres" {
				continue // autovacuum keeps statistics
			}
			t.Run(fmt.Sprintf("%s/stats=%t", e.name, analyze), func(t *testing.T) {
				t.Parallel()
				_, db := migratedStore(t, e.open)
				fill(t, db)
				if analyze {
					if _, err := db.ExecContext(t.Context(), "ANALYZE"); err != nil {
						t.Fatal(err)
					}
				}
				check(t, e.name, e.driver, db)
			})
		}
	}
}

// listByEndpoint is the query Outbox.List runs for a page of one
// endpoint, and of one endpoint and a finished status.
const listByEndpoint = "outbox_list_by_endpoint"

// The endpoints of TestListByEndpointReadsItsEndpointInIDOrder and
// BenchmarkListByEndpoint: a rare one, with the oldest few deliveries, in
// its normalized form and a spelling a database written before endpoints
// were normalized may hold (see Endpoints), and the common one fillRows
// gives every other delivery.
const (
	rareEndpoint        = "https://rare.example/h"
	rareEndpointSpelled = "https://RARE.example:443/h"
	commonEndpoint      = "https://r.example/h"
)

// fillRare gives the endpoint the n oldest deliveries of the outbox: the
// first half under its normalized form, the rest under its older
// spelling, so that a page of it merges the two.
func fillRare(tb testing.TB, db *sqlx.DB, n int) {
	tb.Helper()
	fillRows(tb, db, "due", n)
	if _, err := db.ExecContext(context.Background(), db.Rebind(`UPDATE courier_outbox
		SET endpoint = CASE WHEN id % 2 = 0 THEN ? ELSE ? END WHERE notification_id LIKE 'due-%'`), rareEndpoint, rareEndpointSpelled); err != nil {
		tb.Fatal(err)
	}
}

// sortOfNothing is a PostgreSQL plan's sort of a read it knows is empty.
var sortOfNothing = regexp.MustCompile(`Sort  \(cost=[0-9.]+ rows=0 `)

// TestListByEndpointReadsItsEndpointInIDOrder: a page of Outbox.List of
// one endpoint, newest first, reads that endpoint's deliveries from an
// index in id order, from the cursor down, under each of the two forms
// the endpoint may be stored under, merged in id order, on both engines,
// with statistics or (SQLite) without: a page costs what it shows. So
// does a page of one endpoint and a finished status (succeeded,
// suppressed: what grows with the traffic), which walks only the
// endpoint's own deliveries of other statuses. Written as "no endpoint or
// one of these", the filter gave no index a range: SQLite walked the
// primary key from the cursor down, every delivery of the outbox for the
// few of a rare endpoint, or, with statistics, read every delivery from
// courier_outbox_status and sorted them, as PostgreSQL did from the table
// for each page.
func TestListByEndpointReadsItsEndpointInIDOrder(t *testing.T) {
	planned(t, func(tb testing.TB, db *sqlx.DB) {
		fillRare(tb, db, 10)
		fillRows(tb, db, "finished", 5_000)
	}, func(t *testing.T, name, driver string, db *sqlx.DB) {
		ctx := t.Context()
		for _, c := range []struct{ status, endpoint, spelled string }{
			{"", rareEndpoint, rareEndpointSpelled},
			{"", rareEndpoint, rareEndpoint},
			{"succeeded", rareEndpoint, rareEndpointSpelled},
			{"", commonEndpoint, commonEndpoint},
		} {
			args := map[string]any{
				"status": c.status, "endpoint": c.endpoint, "endpoint_spelled": c.spelled, "since": int64(0), "until": int64(1 << 62),
				"max_id": int64(1<<63 - 1), "limit": 101,
			}
			text, vals := boundQuery(t, driver, "queries/outbox.sql", listByEndpoint, args)
			explain, want, bad := "EXPLAIN QUERY PLAN ", "USING INDEX courier_outbox_endpoint (endpoint=? AND rowid<?)", []string{"TEMP B-TREE", "SCAN courier_outbox"}
			if name == "postgres" {
				// As for a status: the few of a rare endpoint come
				// from the endpoint's index, and a page of the
				// endpoint of nearly every row may walk the primary
				// key, which finds it at once. Neither sorts.
				explain, want, bad = "EXPLAIN ", "Index Scan Backward using courier_outbox_endpoint", []string{"Sort  (", "Seq Scan"}
				if c.endpoint == commonEndpoint {
					want = "Index Scan Backward using "
				}
			}
			plan, err := planText(db.QueryContext(ctx, explain+text, vals...))
			if err != nil {
				t.Fatal(err)
			}
			// PostgreSQL sorts the read it knows to be empty, the
			// spelling's when it is the normalized form (One-Time
			// Filter: false), to merge it: no row to sort.
			sorted := sortOfNothing.ReplaceAllString(plan, "")
			if !strings.Contains(plan, want) || strings.Contains(sorted, bad[0]) || strings.Contains(plan, bad[1]) {
				t.Errorf("a page of %+v is not read from the endpoint's index in id order:\n%s", c, plan)
			}
		}
	})
}

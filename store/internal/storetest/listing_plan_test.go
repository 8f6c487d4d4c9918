package storetest_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
)

// TestTheAdminsPagesReadTheirPageFromThePrimaryKeys: a page of the
// endpoints or of the contract pins for the Admin (endpoint_page,
// contract_page) is read from the primary keys from its cursor on, on
// both engines, with statistics, at 50,000 of each: it costs what it shows, however many
// endpoints the store keeps. The Admin read every one and paged them in
// Go (Endpoints.List, Contracts.List).
func TestTheAdminsPagesReadTheirPageFromThePrimaryKeys(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ctx := t.Context()
		for _, fill := range []string{
			"INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, reason, updated_at) SELECT 'https://e-' || (100000 + n) || '.example/h', 'disabled', 0, 'endpoint_disabled', n FROM series",
			"INSERT INTO courier_contracts (endpoint, capabilities_sha256, pinned_at) SELECT 'https://e-' || (100000 + n) || '.example/h', '" + strings.Repeat("a", 64) + "', n FROM series",
		} {
			if _, err := db.ExecContext(ctx, "WITH RECURSIVE series (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM series WHERE n < 50000) "+fill); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
		for _, q := range []struct{ file, name, table string }{
			{"queries/endpoints.sql", "endpoint_page", "courier_endpoints"},
			{"queries/contracts.sql", "contract_page", "courier_contracts"},
		} {
			args := map[string]any{"after": "https://e-125000.example/h", "limit": 101}
			text, vals := boundQuery(t, e.driver, q.file, q.name, args)
			// SQLite scans only the page's rows (the named subqueries);
			// a scan of a table, by its name or alias, reads it whole.
			explain, want, bad := "EXPLAIN QUERY PLAN ", fmt.Sprintf("INDEX sqlite_autoindex_%s_1 (endpoint>?)", q.table), regexp.MustCompile(`(?m)^SCAN (courier_\w+|[eklfm])$`)
			if e.name == "postgres" {
				explain, want, bad = "EXPLAIN ", fmt.Sprintf("Index Only Scan using %s_pkey on %s", q.table, q.table), regexp.MustCompile(`Seq Scan on `+q.table)
				if q.name == "contract_page" {
					want = fmt.Sprintf("Index Scan using %s_pkey on %s", q.table, q.table)
				}
			}
			plan, err := planText(db.QueryContext(ctx, explain+text, vals...))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, want) || bad.MatchString(plan) {
				t.Errorf("%s does not read its page from the primary key of %s:\n%s", q.name, q.table, plan)
			}
		}
	})
}

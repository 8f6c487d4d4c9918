package storetest_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestAnOperatorsLookupsByEndpointReadTheEndpointsRows: two reads an
// operator's action makes of one endpoint's deliveries on SQLite, with
// statistics or without, read that endpoint's rows from an index that
// leads with it, however many deliveries the outbox keeps. FailMismatched
// (contract_fail_mismatched) reads the endpoint's unfinished commands
// from the contract index: it read every waiting delivery of the outbox
// by courier_outbox_listed, then, once migration 15 gave the endpoint an
// index of its own, every delivery of the endpoint from it, or, with
// statistics, the whole outbox. Whether an unfinished delivery is stored
// under a spelling an operator named (endpoint_spelled) reads the
// spelling's deliveries from courier_outbox_endpoint, none for a spelling
// nothing is stored under: with statistics, it read the whole outbox.
func TestAnOperatorsLookupsByEndpointReadTheEndpointsRows(t *testing.T) {
	t.Parallel()
	for _, analyze := range []bool{false, true} {
		t.Run(fmt.Sprintf("sqlite/stats=%t", analyze), func(t *testing.T) {
			t.Parallel()
			e := engines[0]
			_, db := migratedStore(t, e.open)
			ctx := t.Context()
			fillRows(t, db, "due", 10)
			fillRows(t, db, "finished", 5_000)
			for _, q := range []string{
				"UPDATE courier_outbox SET contract_sha256 = '" + strings.Repeat("b", 64) + "' WHERE status = 'pending'",
				"INSERT INTO courier_contracts (endpoint, capabilities_sha256, pinned_at) VALUES ('" + commonEndpoint + "', '" + strings.Repeat("a", 64) + "', 1)",
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			if analyze {
				if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
					t.Fatal(err)
				}
			}
			for _, q := range []struct {
				file, name, index string
				args              map[string]any
			}{
				{"queries/contracts.sql", "contract_fail_mismatched", "courier_outbox_contract", map[string]any{"endpoint": commonEndpoint, "now": int64(1)}},
				{"queries/endpoints.sql", "endpoint_spelled", "courier_outbox_endpoint", map[string]any{"endpoint": commonEndpoint}},
			} {
				text, vals := boundQuery(t, e.driver, q.file, q.name, q.args)
				plan, err := planText(db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+text, vals...))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(plan, "USING INDEX "+q.index+" (endpoint=?") || strings.Contains(plan, "SCAN courier_outbox") {
					t.Errorf("%s does not read the endpoint's deliveries from %s:\n%s", q.name, q.index, plan)
				}
			}
		})
	}
}

package storetest_test

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/courier-go/courier/store/postgres"
)

// TestStatementsBesideAFleetsLeasesArePricedBelowJIT: on PostgreSQL,
// with statistics that count a fleet's leases (20,000, all to one
// endpoint), the planner prices the statements that count an endpoint's
// leases below jit_above_cost, planned with their values or generically,
// so PostgreSQL does not compile them to machine code at every call.
// Priced as a guess of a hundred parked endpoints, each counting every
// lease of its endpoint, a claim's look passed it (416,000 against
// 100,000) and was compiled at each claim, about 45 ms, to run in a
// fraction of one, nothing parked: its counts stop at what they are
// compared with (the worker's share, MaxInFlight), which bounds their
// price too. Endpoints.List, a metrics scrape's and the ops page's read,
// priced its in-flight count once per endpoint it may list (a thousand
// here, 2,000,000 in all) and spent some 200 ms compiling and optimizing
// it at every call: it counts the listed endpoints' leases once, grouped.
func TestStatementsBesideAFleetsLeasesArePricedBelowJIT(t *testing.T) {
	t.Parallel()
	_, db := migratedStore(t, openPostgres)
	ctx := t.Context()
	now := time.Now().UnixMicro()
	fillRows(t, db, "scheduled", 20_000)
	for _, q := range []string{
		`UPDATE courier_outbox SET status = 'leased', attempts = 1, lease_owner = 'w', lease_token = 't' || id,
			leased_at = ` + strconv.FormatInt(now, 10) + `, lease_expires_at = ` + strconv.FormatInt(now+time.Hour.Microseconds(), 10),
		"ANALYZE",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var jitAbove float64
	if err := db.GetContext(ctx, &jitAbove, "SELECT current_setting('jit_above_cost')::float8"); err != nil {
		t.Fatal(err)
	}
	total := regexp.MustCompile(`cost=[0-9.]+\.\.([0-9.]+)`)
	for _, st := range []struct {
		file, name string
		args       map[string]any
	}{
		{"outbox", "outbox_claim_look", map[string]any{"now": now, "owner": "w", "cap": 8}},
		{"endpoints", "endpoint_list", map[string]any{"every": true, "limit": 1000}},
	} {
		q, vals := boundQuery(t, postgres.DriverName, "queries/"+st.file+".sql", st.name, st.args)
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(st.name+"/"+mode, func(t *testing.T) {
				conn, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				defer conn.ExecContext(context.WithoutCancel(ctx), "RESET plan_cache_mode")
				if _, err := conn.ExecContext(ctx, "SET plan_cache_mode = "+mode); err != nil {
					t.Fatal(err)
				}
				plan, err := explainPrepared(ctx, conn, genericPlanStatement{name: st.name, text: q, vals: vals}, 0)
				if err != nil {
					t.Fatal(err)
				}
				m := total.FindStringSubmatch(plan)
				if m == nil {
					t.Fatalf("no cost in the plan:\n%s", plan)
				}
				cost, err := strconv.ParseFloat(m[1], 64)
				if err != nil {
					t.Fatal(err)
				}
				if cost >= jitAbove {
					t.Errorf("%s is priced %.0f, at or above jit_above_cost (%.0f): PostgreSQL compiles it at every call:\n%s", st.name, cost, jitAbove, plan)
				}
			})
		}
	}
}

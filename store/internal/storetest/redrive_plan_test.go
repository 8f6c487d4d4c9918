package storetest_test

import (
	"regexp"
	"strings"
	"testing"
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
		"now": int64(1), "deadline": int64(2), "budget": 8, "endpoint": "https://r.example/h", "id": int64(0),
		"keys": `[{"endpoint":"https://r.example/h","ordering_key":"k"}]`,
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			_, db := migratedStore(t, e.open)
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

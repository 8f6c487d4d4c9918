package postgres_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/sqlfile"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/engine"
	"github.com/courier-go/courier/store/postgres"
)

// bounded32 are the parameters PostgreSQL may type as a 32-bit integer
// (compared with or written to an integer column), each held by the Go
// side to 32 bits.
var bounded32 = map[string]string{
	"priority":              "EnqueueParams.Priority: within int32",
	"max_attempts":          "at most 1000",
	"enqueued_max_attempts": "0, or at most 1000 as max_attempts",
	"budget":                "an attempt budget: at most 1000",
	"max_attempts_bound":    "max_attempts' bound: 1000",
	"max_in_flight":         "Limits.MaxInFlight: bounded by validate",
	"burst":                 "Limits.Burst: bounded by validate",
	"consecutive_failures":  "one a failed attempt while the breaker is closed or probing",
	"version":               "a migration's number",
}

// TestNoUnboundedParameterIsTyped32Bit prepares every named query and
// reads the type PostgreSQL gave each parameter: one it types as a 32-bit
// integer (a comparison with a literal, `:id = 0`, is typed integer) fails
// for a Go value above 2^31-1 that SQLite takes (a delivery id, a
// worker's cap), answered database_unavailable as if the database were
// down. Every such parameter is either bounded to 32 bits in Go or cast.
func TestNoUnboundedParameterIsTyped32Bit(t *testing.T) {
	t.Parallel()
	db := openPostgres(t)
	ctx := t.Context()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	eng, ok := engine.Lookup(postgres.DriverName)
	if !ok {
		t.Fatal("no postgres engine")
	}
	paths, err := fs.Glob(eng.SQL, "queries/*.sql")
	if err != nil || len(paths) == 0 {
		t.Fatalf("query files: %v, %v", paths, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prepared := 0
	for _, p := range paths {
		b, err := fs.ReadFile(eng.SQL, p)
		if err != nil {
			t.Fatal(err)
		}
		stmts, err := sqlfile.Parse(string(b))
		if err != nil {
			t.Fatal(err)
		}
		for name, text := range stmts {
			q, params := sqlfile.Compile(text, eng.Placeholder)
			if len(params) == 0 {
				continue
			}
			if _, err := conn.ExecContext(ctx, "PREPARE courier_param_types AS "+q); err != nil {
				t.Errorf("%s: PREPARE: %v", name, err)
				continue
			}
			var types string
			err := conn.QueryRowContext(ctx, "SELECT parameter_types::text FROM pg_prepared_statements WHERE name = 'courier_param_types'").Scan(&types)
			if _, derr := conn.ExecContext(ctx, "DEALLOCATE courier_param_types"); derr != nil {
				t.Fatal(derr)
			}
			if err != nil {
				t.Fatal(err)
			}
			prepared++
			for i, ty := range strings.Split(strings.Trim(types, "{}"), ",") {
				if (ty == "integer" || ty == "smallint") && bounded32[params[i]] == "" {
					t.Errorf("%s: :%s ($%d) is typed %s, and nothing bounds it to 32 bits: cast it (:%s::bigint)", name, params[i], i+1, ty, params[i])
				}
			}
		}
	}
	if prepared < 50 {
		t.Fatalf("prepared %d queries, want every named query with parameters", prepared)
	}
}

package storetest_test

import (
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/sqlfile"
	"github.com/courier-go/courier/store/internal/engine"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// engines are the databases the tests and benchmarks here run on.
// PostgreSQL is skipped when no server can be had (see internal/pgtest).
var engines = []struct {
	name   string
	driver string
	open   func(tb testing.TB) *sqlx.DB
}{
	{"sqlite", sqlite.DriverName, openSQLite},
	{"postgres", postgres.DriverName, openPostgres},
}

func openSQLite(tb testing.TB) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(tb.TempDir(), "courier.db"), 0))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(tb testing.TB) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open(postgres.DriverName, pgtest.URL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// TestQueriesAgree: every engine defines the same named queries, each
// with the same parameters, in the file of the table its name begins
// with, so package store runs unchanged on either.
func TestQueriesAgree(t *testing.T) {
	t.Parallel()
	files := map[string]string{ // name prefix -> file
		"schema": "schema.sql", "outbox": "outbox.sql", "attempts": "attempts.sql", "inbox": "inbox.sql",
		"replay": "replay.sql", "subscription": "subscriptions.sql", "endpoint": "endpoints.sql", "contract": "contracts.sql",
	}
	params := make(map[string]map[string][]string) // engine -> query -> sorted parameter names
	for _, e := range engines {
		eng, ok := engine.Lookup(e.driver)
		if !ok {
			t.Fatalf("%s: no engine registered for %q", e.name, e.driver)
		}
		paths, err := fs.Glob(eng.SQL, "queries/*.sql")
		if err != nil || len(paths) == 0 {
			t.Fatalf("%s: no query files (%v)", e.name, err)
		}
		params[e.name] = make(map[string][]string)
		for _, p := range paths {
			b, err := fs.ReadFile(eng.SQL, p)
			if err != nil {
				t.Fatal(err)
			}
			stmts, err := sqlfile.Parse(string(b))
			if err != nil {
				t.Fatalf("%s %s: %v", e.name, p, err)
			}
			for name, text := range stmts {
				prefix, _, _ := cutPrefix(name)
				if want := files[prefix]; filepath.Base(p) != want {
					t.Errorf("%s: query %s is in %s, want %s", e.name, name, filepath.Base(p), want)
				}
				params[e.name][name] = sqlfile.Params(text)
			}
		}
	}
	sq, pg := params["sqlite"], params["postgres"]
	if a, b := slices.Sorted(maps.Keys(sq)), slices.Sorted(maps.Keys(pg)); !slices.Equal(a, b) {
		t.Fatalf("query names differ\nsqlite:   %v\npostgres: %v", a, b)
	}
	for name, want := range sq {
		if got := pg[name]; !slices.Equal(got, want) {
			t.Errorf("%s: parameters differ: sqlite %v, postgres %v", name, want, got)
		}
	}
}

// cutPrefix splits a query name at its first underscore.
func cutPrefix(name string) (prefix, rest string, ok bool) {
	for i := range len(name) {
		if name[i] == '_' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

package pgtest_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier/internal/testmain"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// open connects to dbURL with the pgx stdlib driver and closes the connection
// in t's cleanup.
func open(t *testing.T, dbURL string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatalf("ping %s: %v", dbURL, err)
	}
	return db
}

// databaseName returns the database part of dbURL.
func databaseName(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func TestURL(t *testing.T) {
	t.Parallel()
	admin := open(t, pgtest.Server(t))

	// lingering stays connected to a database of the subtest until the
	// subtest's cleanup has dropped it.
	var lingering *sqlx.DB
	t.Cleanup(func() {
		if lingering != nil {
			lingering.Close()
		}
	})

	var names []string
	t.Run("isolated", func(t *testing.T) {
		first, second, third := pgtest.URL(t), pgtest.URL(t), pgtest.URL(t)
		if first == second {
			t.Fatalf("two URL calls gave the same URL %s", first)
		}
		names = []string{databaseName(t, first), databaseName(t, second), databaseName(t, third)}

		var err error
		if lingering, err = sqlx.Open("pgx", third); err != nil {
			t.Fatal(err)
		}
		if err := lingering.Ping(); err != nil { // leaves an idle connection open
			t.Fatalf("ping %s: %v", third, err)
		}

		a, b := open(t, first), open(t, second)
		a.MustExec(`CREATE TABLE widgets (id int PRIMARY KEY)`)
		a.MustExec(`INSERT INTO widgets VALUES (1)`)
		for _, tc := range []struct {
			name string
			db   *sqlx.DB
			want bool
		}{
			{"first", a, true},
			{"second", b, false},
		} {
			var exists bool
			if err := tc.db.Get(&exists, `SELECT to_regclass('widgets') IS NOT NULL`); err != nil {
				t.Fatal(err)
			}
			if exists != tc.want {
				t.Errorf("%s database: table widgets exists = %v, want %v", tc.name, exists, tc.want)
			}
		}
	})

	// The subtest's cleanup has dropped its databases, including the one
	// lingering is still connected to.
	for _, name := range names {
		var n int
		if err := admin.Get(&n, `SELECT count(*) FROM pg_database WHERE datname = $1`, name); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists after cleanup", name)
		}
	}
}

func TestURLParallel(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := open(t, pgtest.URL(t))
			var got string
			if err := db.Get(&got, `SELECT current_database()`); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got, "courier_") {
				t.Errorf("current_database() = %q, want a courier_ database", got)
			}
		})
	}
}

func TestAvailable(t *testing.T) {
	t.Parallel()
	pgtest.Server(t)
	if ok, reason := pgtest.Available(); !ok {
		t.Errorf("Available() = false, %q after Server succeeded", reason)
	}
}

// TestUnavailable runs this test binary again without PostgreSQL programs
// and checks that a test asking for a database is skipped, or fails when
// COURIER_PG_REQUIRE is set. In that child process, it is the test asking.
func TestUnavailable(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		if ok, reason := pgtest.Available(); ok || !strings.Contains(reason, "COURIER_PG_BIN") {
			t.Errorf("Available() = %v, %q; want false and a reason naming COURIER_PG_BIN", ok, reason)
		}
		pgtest.URL(t)
		t.Error("URL returned without a server")
		return
	}

	t.Parallel()
	checkUnavailable(t, "TestUnavailable", "COURIER_PG_", "COURIER_PG_REQUIRE",
		[]string{"COURIER_PG_BIN=" + t.TempDir()}, // empty: no initdb there
		"no PostgreSQL available", "COURIER_PG_BIN=", "no initdb program")
}

// TestTemplate: each URL of a Template is a fresh database of its own,
// holding what the template's prepare left there (made once, for all of
// them), changed apart from the others, and dropped by the test's
// cleanup; nobody may connect to the template itself.
func TestTemplate(t *testing.T) {
	t.Parallel()
	admin := open(t, pgtest.Server(t))
	var prepared atomic.Int32
	var template string
	tp := pgtest.NewTemplate(func(ctx context.Context, dbURL string) error {
		prepared.Add(1)
		template = databaseName(t, dbURL)
		db, err := sqlx.Open("pgx", dbURL)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, `CREATE TABLE widgets (id int PRIMARY KEY); INSERT INTO widgets VALUES (1)`)
		return err
	})

	var names []string
	t.Run("copies", func(t *testing.T) {
		a, b := open(t, tp.URL(t)), open(t, tp.URL(t))
		names = []string{databaseName(t, tp.URL(t))}
		a.MustExec(`INSERT INTO widgets VALUES (2)`)
		for _, tc := range []struct {
			name string
			db   *sqlx.DB
			want int
		}{{"first", a, 2}, {"second", b, 1}} {
			var n int
			if err := tc.db.Get(&n, `SELECT count(*) FROM widgets`); err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Errorf("%s copy: %d widgets, want %d", tc.name, n, tc.want)
			}
			var name string
			if err := tc.db.Get(&name, `SELECT current_database()`); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		if names[1] == names[2] || names[1] == template {
			t.Errorf("databases %v from the template %s, want each its own", names, template)
		}
	})
	if n := prepared.Load(); n != 1 {
		t.Errorf("the template was prepared %d times, want once", n)
	}
	for _, name := range names {
		var n int
		if err := admin.Get(&n, `SELECT count(*) FROM pg_database WHERE datname = $1`, name); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still exists after cleanup", name)
		}
	}
	var allowed bool
	if err := admin.Get(&allowed, `SELECT datallowconn FROM pg_database WHERE datname = $1`, template); err != nil {
		t.Fatalf("the template %s: %v", template, err)
	}
	if allowed {
		t.Errorf("the template %s allows connections", template)
	}
}

// TestPgBouncerUnavailable runs this test binary again without the
// pgbouncer program and checks that a test asking for one is skipped, or
// fails when COURIER_PGBOUNCER_REQUIRE is set. In that child process, it
// is the test asking.
func TestPgBouncerUnavailable(t *testing.T) {
	if os.Getenv("PGTEST_CHILD") == "1" {
		pgtest.PgBouncer(t, "postgres://postgres@127.0.0.1:1/db", 1)
		t.Error("PgBouncer returned without the program")
		return
	}

	t.Parallel()
	checkUnavailable(t, "TestPgBouncerUnavailable", "COURIER_PGBOUNCER", "COURIER_PGBOUNCER_REQUIRE",
		[]string{"COURIER_PGBOUNCER=" + filepath.Join(t.TempDir(), "pgbouncer")}, // no such program
		"no PgBouncer available", "COURIER_PGBOUNCER=")
}

// checkUnavailable runs this test binary again, as the test named test
// alone (which, with PGTEST_CHILD set, asks for what is missing), with
// the environment variables that start with prefix replaced by env, and
// the variable require unset, false, 1 or true: the child test is
// skipped, or fails when required, and its output says each of says.
func checkUnavailable(t *testing.T, test, prefix, require string, env []string, says ...string) {
	for _, tc := range []struct {
		name    string
		require string
		wantErr bool
		want    string
	}{
		{"skip", "", false, "--- SKIP: " + test},
		{"not required", "false", false, "--- SKIP: " + test},
		{"required", "1", true, "--- FAIL: " + test},
		{"required true", "true", true, "--- FAIL: " + test},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v")
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, prefix) && !strings.HasPrefix(kv, "GORACE=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env,
				// A race-enabled child would wait a second before exiting.
				"GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0",
				"PGTEST_CHILD=1",
				require+"="+tc.require,
			)
			cmd.Env = append(cmd.Env, env...)
			out, err := cmd.CombinedOutput()
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("child failed = %v (%v), want %v", gotErr, err, tc.wantErr)
			}
			for _, want := range append([]string{tc.want}, says...) {
				if !strings.Contains(string(out), want) {
					t.Errorf("child output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// TestMigrateRefusesAnEngineTheDBIsNot: -engine that names another engine
// than -db's is a usage error, and -print writes nothing, rather than the
// other engine's SQL for the database; -engine without -print, which it
// goes with, is one too, and migrate applies nothing.
func TestMigrateRefusesAnEngineTheDBIsNot(t *testing.T) {
	t.Parallel()
	sqliteDB := filepath.Join(t.TempDir(), "app.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-print", "-engine", "sqlite", "-db", "postgres://app@db.internal/app"}, "-engine sqlite"},
		{[]string{"-print", "-engine", "postgres", "-db", sqliteDB}, "-engine postgres"},
		{[]string{"-engine", "postgres", "-db", sqliteDB}, "-engine goes with -print"},
	} {
		code, out, errOut := courierRun(t, append([]string{"migrate"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("migrate %v: exit %d, stdout %.100q, stderr %q; want %d saying %q", tc.args, code, out, errOut, exitUsage, tc.want)
		}
	}
	if _, err := os.Stat(sqliteDB); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused migrate made the SQLite file: %v", err)
	}
}

// bothEngines are the two engines: their migrations, and a fresh database's
// -db with a connection to it of the test's own.
var bothEngines = []struct {
	name       string
	migrations func() fs.FS
	db         func(t *testing.T) (db string, conn *sqlx.DB)
}{
	{"sqlite", sqlite.Migrations, func(t *testing.T) (string, *sqlx.DB) {
		db := filepath.Join(t.TempDir(), "app.db")
		return db, testConn(t, sqlite.DriverName, sqlite.DSN(db, store.DurabilityFull))
	}},
	{"postgres", postgres.Migrations, func(t *testing.T) (string, *sqlx.DB) {
		db := couriertest.PostgresURL(t)
		return db, testConn(t, postgres.DriverName, db)
	}},
}

// testConn opens a connection pool closed when t ends.
func testConn(t *testing.T, driver, dsn string) *sqlx.DB {
	t.Helper()
	d, err := sqlx.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// runResult is how a run of the tool ended.
type runResult struct {
	code        int
	out, errOut string
}

// runInBackground runs the tool with ctx, which the test cancels as
// Ctrl-C does, and sends how it ended on the channel it returns.
func runInBackground(ctx context.Context, args ...string) <-chan runResult {
	done := make(chan runResult, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run(ctx, args, &out, &errOut)
		done <- runResult{code, out.String(), errOut.String()}
	}()
	return done
}

// awaitLockWait returns once a session of conn's PostgreSQL database
// waits for a lock, failing t if the run done ends first.
func awaitLockWait(t *testing.T, conn *sqlx.DB, done <-chan runResult) {
	t.Helper()
	for waiting := 0; waiting == 0; {
		if err := conn.GetContext(t.Context(), &waiting, "SELECT COUNT(*) FROM pg_locks WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND NOT granted"); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("the command ended without waiting for the lock: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
		case <-time.After(10 * time.Millisecond): // a poll of the server's locks, not a synchronization
		}
	}
}

// TestMigrateManyAtOnce: operators (or a deploy's hooks) running courier
// migrate on one new database at the same time all succeed, and each
// migration is recorded once, on both engines.
func TestMigrateManyAtOnce(t *testing.T) {
	t.Parallel()
	for _, e := range bothEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db, conn := e.db(t)
			const n = 4
			var wg sync.WaitGroup
			codes, outs := make([]int, n), make([]string, n)
			for i := range n {
				wg.Go(func() {
					var out, errOut bytes.Buffer
					codes[i] = run(t.Context(), []string{"migrate", "-db", db}, &out, &errOut)
					outs[i] = out.String() + errOut.String()
				})
			}
			wg.Wait()
			for i := range n {
				if codes[i] != exitOK || !strings.HasPrefix(outs[i], "migrated: ") && !strings.HasPrefix(outs[i], "up to date: ") {
					t.Errorf("migrate %d of %d at once: exit %d, output %q; want 0, migrated", i+1, n, codes[i], outs[i])
				}
			}
			var versions, distinct int
			if err := conn.QueryRowContext(t.Context(), "SELECT COUNT(*), COUNT(DISTINCT version) FROM courier_schema WHERE version > 0").Scan(&versions, &distinct); err != nil {
				t.Fatal(err)
			}
			if names, _ := fs.Glob(e.migrations(), "*.sql"); versions != len(names) || distinct != versions {
				t.Fatalf("courier_schema holds %d versions, %d distinct; want each of the %d migrations once", versions, distinct, len(names))
			}
			if out := mustRun(t, exitOK, "health", "-db", db); !strings.HasPrefix(out, "status: ok\n") {
				t.Fatalf("health after the migrations: %q", out)
			}
		})
	}
}

// TestMigrateRefusesASchemaTooNew: a database a newer courier migrated,
// whose migration says older couriers must not run on it (see Upgrades in
// package store), is refused, by migrate and by every command that reads
// it, as schema_too_new (exit 1), and migrate leaves it as it was.
func TestMigrateRefusesASchemaTooNew(t *testing.T) {
	t.Parallel()
	for _, e := range bothEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db, conn := e.db(t)
			mustRun(t, exitOK, "migrate", "-db", db)
			if _, err := conn.ExecContext(t.Context(), `INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema;
				INSERT INTO courier_schema (version, applied_at) SELECT -MAX(version), 1 FROM courier_schema`); err != nil {
				t.Fatal(err)
			}
			var before int
			if err := conn.GetContext(t.Context(), &before, "SELECT COUNT(*) FROM courier_schema"); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"migrate"}, {"health"}, {"prune"}, {"deliveries", "list"}, {"endpoints", "list"}} {
				code, out, errOut := courierRun(t, append(cmd, "-db", db)...)
				if code != exitFailed || out != "" || !strings.Contains(errOut, "schema_too_new") {
					t.Errorf("courier %s on a newer schema: exit %d, stdout %q, stderr %q; want %d, schema_too_new", cmd[0], code, out, errOut, exitFailed)
				}
			}
			var after int
			if err := conn.GetContext(t.Context(), &after, "SELECT COUNT(*) FROM courier_schema"); err != nil || after != before {
				t.Fatalf("courier_schema after the refused migrate: %d versions, %v; want %d", after, err, before)
			}
		})
	}
}

// TestMigrateInterruptedWhileWaitingLeavesNothing: a courier migrate that
// waits for another migration of the same PostgreSQL database (here an
// application's, in a transaction of its own) and is interrupted exits 1
// having applied nothing; the other's migration, rolled back, leaves no
// table either, and migrate run again applies them all.
func TestMigrateInterruptedWhileWaitingLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := couriertest.PostgresURL(t)
	conn := testConn(t, postgres.DriverName, db)
	other, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if err := postgres.MigrateTx(ctx, other.Tx); err != nil {
		t.Fatal(err)
	}
	migrateCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	done := runInBackground(migrateCtx, "migrate", "-db", db)
	awaitLockWait(t, conn, done) // migrate waits for the other migration
	interrupt()
	if r := <-done; r.code != exitFailed || r.out != "" || !strings.Contains(r.errOut, "context canceled") {
		t.Fatalf("the interrupted migrate: exit %d, stdout %q, stderr %q; want %d, context canceled", r.code, r.out, r.errOut, exitFailed)
	}
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := conn.GetContext(ctx, &tables, "SELECT COUNT(*) FROM information_schema.tables WHERE table_name LIKE 'courier%'"); err != nil || tables != 0 {
		t.Fatalf("after the interrupted migrate: %d of courier's tables, %v; want none", tables, err)
	}
	if out := mustRun(t, exitOK, "migrate", "-db", db); !strings.HasPrefix(out, "migrated: schema version ") {
		t.Fatalf("migrate again: %q", out)
	}
	if out := mustRun(t, exitOK, "health", "-db", db); !strings.HasPrefix(out, "status: ok\n") {
		t.Fatalf("health after migrate: %q", out)
	}
}

// TestMigrateSaysWhatItFound: migrate tells an operator what it did: the
// migrations it applied, that there were none to apply, or that a newer
// courier migrated the database (a rolling deploy's later release), which
// this one runs on and applies nothing to, rather than "migrated".
func TestMigrateSaysWhatItFound(t *testing.T) {
	t.Parallel()
	for _, e := range bothEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			db, conn := e.db(t)
			names, err := fs.Glob(e.migrations(), "*.sql")
			if err != nil {
				t.Fatal(err)
			}
			n := len(names)
			if out, want := mustRun(t, exitOK, "migrate", "-db", db), fmt.Sprintf("migrated: schema version %d (was 0)\n", n); out != want {
				t.Errorf("migrate on a new database: %q, want %q", out, want)
			}
			if out, want := mustRun(t, exitOK, "migrate", "-db", db), fmt.Sprintf("up to date: schema version %d\n", n); out != want {
				t.Errorf("migrate again: %q, want %q", out, want)
			}
			if _, err := conn.ExecContext(t.Context(), `INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`); err != nil {
				t.Fatal(err)
			}
			out := mustRun(t, exitOK, "migrate", "-db", db)
			if want := fmt.Sprintf("schema version %d, newer than this courier's %d: nothing to apply", n+1, n); !strings.HasPrefix(out, want) {
				t.Errorf("migrate on a newer courier's schema: %q, want it to begin %q", out, want)
			}
		})
	}
}

// TestMigrateWithoutADBSaysSo: migrate without -db is a usage error that
// names -db, as every command's; it once blamed -print, which was not
// given, and asked for -engine, which migrate refuses without -print.
func TestMigrateWithoutADBSaysSo(t *testing.T) {
	t.Parallel()
	code, out, errOut := courierRun(t, "migrate")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "-db is required") || strings.Contains(errOut, "-print") {
		t.Errorf("migrate = %d, %q, %q; want a usage error saying -db is required", code, out, errOut)
	}
}

package sqlite_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// between opens dsn as a pool of go-sqlite3's own "sqlite3" driver whose
// connections run fn once, between two statements: before the first
// statement that follows one whose SQL contains marker. fn stands for
// another process acting at that moment.
func between(t *testing.T, dsn, marker string, fn func()) *sqlx.DB {
	t.Helper()
	db := sqlx.NewDb(sql.OpenDB(&hookConnector{dsn: dsn, marker: marker, fn: fn}), "sqlite3")
	t.Cleanup(func() { db.Close() })
	return db
}

// hookConnector opens the connections of a between pool.
type hookConnector struct {
	dsn    string
	marker string
	fn     func()

	mu          sync.Mutex
	seen, fired bool
}

func (c *hookConnector) Connect(context.Context) (driver.Conn, error) {
	dc, err := c.Driver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &hookConn{SQLiteConn: dc.(*sqlite3.SQLiteConn), c: c}, nil
}

func (c *hookConnector) Driver() driver.Driver { return &sqlite3.SQLiteDriver{} }

// starting is told of each statement as it starts, and runs fn before
// the first that follows the marker's.
func (c *hookConnector) starting(query string) {
	c.mu.Lock()
	fire := c.seen && !c.fired
	c.fired = c.fired || fire
	c.seen = c.seen || strings.Contains(query, c.marker)
	c.mu.Unlock()
	if fire {
		c.fn()
	}
}

// hookConn is a go-sqlite3 connection of a between pool.
type hookConn struct {
	*sqlite3.SQLiteConn
	c *hookConnector
}

func (h *hookConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	h.c.starting(query)
	return h.SQLiteConn.ExecContext(ctx, query, args)
}

func (h *hookConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	h.c.starting(query)
	return h.SQLiteConn.QueryContext(ctx, query, args)
}

// applyFirst applies the first n of the exported migration files, each in
// a transaction of its own, as an older courier's Migrate left them.
func applyFirst(t *testing.T, db *sqlx.DB, n int) {
	t.Helper()
	files := sqlite.Migrations()
	names, err := fs.Glob(files, "*.sql")
	if err != nil || n > len(names) {
		t.Fatalf("%d of %d migrations: %v", n, len(names), err)
	}
	for _, name := range names[:n] {
		text, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.Beginx()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(string(text)); err != nil {
			_ = tx.Rollback()
			t.Fatalf("%s: %v", name, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// migrationCount is how many migrations this courier has.
func migrationCount(t *testing.T) int {
	t.Helper()
	names, err := fs.Glob(sqlite.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// TestAStoreOpenedWhileANewerCourierMigratesStopsItsClaims: a rolling
// upgrade. An older process opens its Store while a newer courier's
// migration commits, after Open's guard read the version and the columns;
// the migration says older couriers must not run on its schema (one that
// only adds lets them: testRollingDeployOnAnAdditiveNewerSchema).
// Open read the fingerprint claims compare with after the guard, took the
// newer schema's for the one it had checked, and its claims went on for
// good, where a Store opened a moment earlier stops them. The fingerprint
// is read before the guard now: the first claim sees it changed and
// refuses, as a fresh Open does.
func TestAStoreOpenedWhileANewerCourierMigratesStopsItsClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	newer := openFile(t, path)
	if err := store.Migrate(ctx, newer); err != nil {
		t.Fatal(err)
	}
	var n int // the versions this courier knows, all applied
	if err := newer.GetContext(ctx, &n, `SELECT max(version) FROM courier_schema`); err != nil {
		t.Fatal(err)
	}
	// The newer courier's next migration, once the guard read the columns,
	// which this courier must not run on.
	db := between(t, "file:"+path+"?_busy_timeout=10000&_journal_mode=WAL", "pragma_table_info", func() {
		if _, err := newer.ExecContext(ctx, `ALTER TABLE courier_outbox ADD COLUMN newer_column TEXT;
			INSERT INTO courier_schema (version, applied_at) SELECT max(version) + 1, 1 FROM courier_schema;
			INSERT INTO courier_schema (version, applied_at) SELECT -max(version), 1 FROM courier_schema`); err != nil {
			t.Errorf("the newer migration: %v", err)
		}
	})
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatalf("Open, which checked the schema before the newer migration: %v", err)
	}
	defer s.Close()
	_, err = store.Open(ctx, newer, store.Config{})
	if !errors.Is(err, courier.CodeSchemaTooNew) {
		t.Fatalf("a fresh Open after the newer migration = %v, want schema_too_new", err)
	}
	if want := fmt.Sprintf("needs a courier that knows version %d, this one knows %d", n+1, n); !strings.Contains(err.Error(), want) {
		t.Errorf("schema_too_new says %q, want it to name the versions: %q", err, want)
	}
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n1", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if !errors.Is(err, courier.CodeSchemaTooNew) || len(c) != 0 {
		t.Fatalf("claim on the newer schema = %d leased, %v; want none, schema_too_new", len(c), err)
	}
}

// TestConcurrentMigrateThroughTheSqlite3Driver: two processes migrate one
// file through pools of go-sqlite3's own "sqlite3" driver, whose
// transactions begin deferred. The second tries while the first has read
// the version and not yet applied what is pending. The first read the
// version from a snapshot without the write lock, so the second's
// migration committed and the first's write then failed with SQLite's
// busy error, which no busy timeout waits out. Migrate takes the write
// lock before it reads the version now: the second waits for the first
// (here it gives up at once, busy, as its busy timeout is zero) and the
// first applies the pending migrations.
func TestConcurrentMigrateThroughTheSqlite3Driver(t *testing.T) {
	t.Parallel()
	all := migrationCount(t)
	for _, tc := range []struct {
		name string
		have int // migrations applied before
	}{
		{"a new file", 0},
		{"an older courier's file", all - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "courier.db")
			dsn := "file:" + path + "?_busy_timeout=10000&_journal_mode=WAL"
			old := sqlx.MustOpen("sqlite3", dsn)
			defer old.Close()
			applyFirst(t, old, tc.have)

			other := sqlx.MustOpen("sqlite3", "file:"+path+"?_busy_timeout=0&_journal_mode=WAL")
			defer other.Close()
			var otherErr error
			db := between(t, dsn, "MAX(version)", func() { otherErr = store.Migrate(ctx, other) })
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatalf("Migrate while another process tried to: %v (code %q)", err, courier.CodeOf(err))
			}
			if otherErr != nil && !errors.Is(otherErr, courier.CodeDatabaseUnavailable) {
				t.Errorf("the other Migrate, refused while the first held the lock = %v, want database_unavailable", otherErr)
			}
			var versions []int
			if err := old.SelectContext(ctx, &versions, "SELECT version FROM courier_schema WHERE version > 0 ORDER BY version"); err != nil {
				t.Fatal(err)
			}
			if len(versions) != all || versions[all-1] != all {
				t.Fatalf("versions recorded: %v, want 1..%d once each", versions, all)
			}
			s, err := store.Open(ctx, old, store.Config{})
			if err != nil {
				t.Fatalf("Open after both: %v", err)
			}
			s.Close()
		})
	}
}

// TestMigrateAndOpenOnAFailedFileAreDatabaseUnavailable: Migrate, store.Open
// and sqlite.Open on a file SQLite cannot open, or that another process
// holds locked, fail with code database_unavailable, as every other store
// call on a failed database does; they had no code.
func TestMigrateAndOpenOnAFailedFileAreDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	want := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, courier.CodeDatabaseUnavailable) {
			t.Errorf("%s = %v (code %q), want database_unavailable", what, err, courier.CodeOf(err))
		}
	}
	t.Run("a file that cannot be opened", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "no-such-directory", "courier.db")
		db := openFile(t, missing)
		want(t, "Migrate", store.Migrate(ctx, db))
		_, err := store.Open(ctx, db, store.Config{})
		want(t, "store.Open", err)
		_, err = sqlite.Open(ctx, missing, store.Config{})
		want(t, "sqlite.Open", err)
	})
	t.Run("a file another process holds locked", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "courier.db")
		holder := openFile(t, path)
		applyFirst(t, holder, migrationCount(t)-1)
		tx, err := holder.BeginTxx(ctx, nil) // BEGIN IMMEDIATE: the write lock
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		db := sqlx.MustOpen("sqlite3", "file:"+path+"?_busy_timeout=0&_journal_mode=WAL")
		defer db.Close()
		want(t, "Migrate", store.Migrate(ctx, db))
	})
}

// openFile returns a pool of DriverName on the file at path, configured
// as DSN configures it.
func openFile(t *testing.T, path string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConcurrentOpensOfANewFile: processes started together on a file
// that does not exist yet (an application's replicas, or its sender and
// receiver Stores opened side by side) each create, migrate and open it.
// Each connection turns the new file to WAL as it opens, and SQLite
// answers one of two connections doing so at once busy at once, without
// its busy timeout: sqlite.Open failed with database_unavailable where it
// should have waited for the other.
func TestConcurrentOpensOfANewFile(t *testing.T) {
	t.Parallel()
	for round := range 30 {
		path := filepath.Join(t.TempDir(), "courier.db")
		var wg sync.WaitGroup
		stores := make([]*store.Store, 8)
		errs := make([]error, len(stores))
		for i := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stores[i], errs[i] = sqlite.Open(t.Context(), path, store.Config{})
			}()
		}
		wg.Wait()
		for i, s := range stores {
			if errs[i] != nil {
				t.Fatalf("round %d: Open %d of 8 at once: %v", round, i+1, errs[i])
			}
			s.Close()
		}
	}
}

// TestMigrateAndOpenOfACurrentFileWhileAnotherProcessWrites: an
// application process starts (sqlite.Open, or store.Migrate at start)
// while another process holds the write lock: a running application's
// long transaction, a bulk load, a sqlite3 shell left in BEGIN IMMEDIATE.
// The schema is current, so there is nothing to migrate; Migrate took the
// writer all the same, waited for it the whole busy timeout and failed,
// database is locked. Both go on without it, while the lock is held, and
// so on a newer courier's schema this one runs on; on one it must not run
// on they say so (schema_too_new) rather than wait.
func TestMigrateAndOpenOfACurrentFileWhileAnotherProcessWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		newer string // what a newer courier's migration recorded
		want  courier.Code
	}{
		{"current", "", ""},
		{"a newer courier's this one runs on", "INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema", ""},
		{"a newer courier's this one must not run on", `INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema;
			INSERT INTO courier_schema (version, applied_at) SELECT -MAX(version), 1 FROM courier_schema`, courier.CodeSchemaTooNew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "courier.db")
			s, err := sqlite.Open(t.Context(), path, store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()

			holder := sqlx.MustOpen("sqlite3", "file:"+path+"?_txlock=immediate&_journal_mode=WAL")
			defer holder.Close()
			if tc.newer != "" {
				if _, err := holder.ExecContext(t.Context(), tc.newer); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := holder.BeginTxx(t.Context(), nil) // BEGIN IMMEDIATE: the write lock, held until both returned
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()

			// Well short of the 10 s busy timeout sqlite.Open's connections
			// wait for the lock; store.Migrate's pool waits 100 ms.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			db := sqlx.MustOpen(sqlite.DriverName, strings.Replace(sqlite.DSN(path, store.DurabilityFull), "_busy_timeout=10000", "_busy_timeout=100", 1))
			defer db.Close()
			check := func(what string, err error) {
				t.Helper()
				if tc.want == "" && err != nil {
					t.Errorf("%s while another process holds the write lock: %v; want nothing to do", what, err)
				}
				if tc.want != "" && !errors.Is(err, tc.want) {
					t.Errorf("%s while another process holds the write lock: %v; want %s", what, err, tc.want)
				}
			}
			check("store.Migrate", store.Migrate(ctx, db))
			s, err = sqlite.Open(ctx, path, store.Config{})
			if err == nil {
				s.Close()
			}
			check("sqlite.Open", err)
		})
	}
}

package sqlite_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/sqlite"
)

// openSQLite returns a fresh SQLite file database for one test.
func openSQLite(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(t.TempDir(), "courier.db"), store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformance runs the store conformance suite on SQLite.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) })
}

// TestOpenWriter: a Store from Open writes through one
// connection of its own. Concurrent writers queue for it and all commit
// (none fails with a busy error), and reading through DB() goes on while a
// write transaction is open.
func TestOpenWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const writers = 64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			tx, err := s.Begin(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer tx.Rollback()
			k := protocol.InboxKey{Sender: "s", Key: fmt.Sprintf("k%02d", i), PayloadSHA256: strings.Repeat("0", 64)}
			if _, err := protocol.InboxFor(s).Record(ctx, tx, k); err != nil {
				errs <- err
				return
			}
			if err := protocol.InboxFor(s).Complete(ctx, tx, k, []byte("ack")); err != nil {
				errs <- err
				return
			}
			errs <- tx.Commit()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("writer: %v", err)
		}
	}

	held, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	var n int
	if err := s.DB().GetContext(ctx, &n, "SELECT count(*) FROM courier_inbox WHERE status = 'completed'"); err != nil {
		t.Fatalf("read while the writer is held: %v", err)
	}
	if n != writers {
		t.Errorf("%d completed inbox records, want %d", n, writers)
	}
}

// TestMigrationsForTeamsWithTheirOwnTool: the files of Migrations and
// MigrateTx over a *sql.Tx (see storetest.Migrations).
func TestMigrationsForTeamsWithTheirOwnTool(t *testing.T) {
	t.Parallel()
	storetest.Migrations(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) }, storetest.MigrationKit{
		Files:     sqlite.Migrations(),
		MigrateTx: sqlite.MigrateTx,
		SchemaQuery: `SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master
			WHERE name LIKE 'courier%' ORDER BY type, name`,
	})
}

package sqlite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
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

// TestSchemaAlteredStopsTheNextClaim: on SQLite the claim compares the
// schema cookie (PRAGMA schema_version) with the one it last saw, so the
// very next claim after another process alters courier's tables refuses
// with schema_altered and leases nothing.
func TestSchemaAlteredStopsTheNextClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	other, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "ALTER TABLE courier_outbox ADD COLUMN surprise INTEGER"); err != nil {
		t.Fatal(err)
	}
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
	if courier.CodeOf(err) != courier.CodeSchemaAltered || len(c) != 0 {
		t.Fatalf("Claim after the schema was altered = %d rows, %v; want none, schema_altered", len(c), err)
	}
	// A change to a table that is not courier's runs the full guard
	// again, which passes.
	if _, err := other.ExecContext(ctx, "ALTER TABLE courier_outbox DROP COLUMN surprise"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, "CREATE TABLE app_orders (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute}); err != nil || len(c) != 1 {
		t.Fatalf("Claim after an application's own migration = %d rows, %v; want the delivery", len(c), err)
	}
}

// TestCheckFindsADamagedFile: Check runs SQLite's quick_check, which reads
// the whole file: a damaged b-tree page makes it report blocked with code
// database_corrupt, not fail.
func TestCheckFindsADamagedFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"pad":"` + strings.Repeat("x", 2000) + `"}`)
	for i := range 200 {
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://r.example/h", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if h, err := s.Outbox.Check(ctx, store.CheckParams{}); err != nil || h.Status != store.HealthOK {
		t.Fatalf("Check of a sound file = %+v, %v", h, err)
	}
	var root, pageSize int64
	if err := s.DB().GetContext(ctx, &root, "SELECT rootpage FROM sqlite_master WHERE name = 'courier_outbox'"); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().GetContext(ctx, &pageSize, "PRAGMA page_size"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // the last connection checkpoints the WAL into the file
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The table's root page gets a page type no b-tree page has.
	if _, err := f.WriteAt([]byte{0x00}, (root-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Outbox.Check(ctx, store.CheckParams{})
	if err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeDatabaseCorrupt {
		t.Fatalf("Check of the damaged file = %s/%s, %v; want blocked/database_corrupt", h.Status, h.Code, err)
	}
}

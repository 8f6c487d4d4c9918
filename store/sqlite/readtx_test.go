package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestReadOnlyTransactionThroughDBDoesNotWaitForTheWriter: a read-only
// transaction through DB() began IMMEDIATE, as the DSN's other
// transactions do, so while the writer was held (a transaction from Begin,
// a receiver's) it waited for the busy timeout and failed "database is
// locked"; from a context marked as holding the writer (a receiver's
// function) it was refused with write_outside_transaction. It now begins
// deferred and reads the last committed state at once, marked or not.
func TestReadOnlyTransactionThroughDBDoesNotWaitForTheWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE orders (id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "INSERT INTO orders (id) VALUES ('committed')"); err != nil {
		t.Fatal(err)
	}
	w, err := s.Begin(ctx) // holds the writer until the end of the test
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	if _, err := w.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('uncommitted')"); err != nil {
		t.Fatal(err)
	}

	for name, ctx := range map[string]context.Context{"unmarked": ctx, "marked as holding the writer": writerctx.WithHeld(ctx)} {
		t.Run(name, func(t *testing.T) {
			// Bounds the wait for the writer, should there be one.
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			tx, err := s.DB().BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatalf("a read-only transaction through DB() while the writer is held: %v", err)
			}
			defer tx.Rollback()
			var ids []string
			if err := tx.SelectContext(ctx, &ids, "SELECT id FROM orders"); err != nil {
				t.Fatalf("read in it: %v", err)
			}
			if len(ids) != 1 || ids[0] != "committed" {
				t.Fatalf("read %q, want the committed row only", ids)
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
		})
	}
}

// TestReadOnlyTransactionThroughDBRefusesWrites: a read-only transaction
// through DB() is read-only in SQLite too (query_only), and its connection
// writes again once it ends, committed or rolled back: the write after it
// is committed, seen by another pool, not left in a transaction. Each
// subtest checks its own write, so that one skipped (-run, -skip, or
// -failfast after another test's failure, where t.Run runs nothing and
// reports success) does not fail the other or the test.
func TestReadOnlyTransactionThroughDBRefusesWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := sqlite.DSN(filepath.Join(t.TempDir(), "courier.db"), store.DurabilityFull)
	db, err := sqlx.Open(sqlite.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // every transaction and write below on one connection
	other, err := sqlx.Open(sqlite.DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			tx, err := db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ('in a read-only transaction')")
			if e := (sqlite3.Error{}); !errors.As(err, &e) || e.Code != sqlite3.ErrReadonly {
				t.Errorf("a write in a read-only transaction: %v, want SQLite's read-only error", err)
			}
			if end == "commit" {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatalf("%s: %v", end, err)
			}
			after := "after " + end
			if _, err := db.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", after); err != nil {
				t.Fatalf("a write after the read-only transaction: %v", err)
			}
			var ids []string
			if err := other.SelectContext(ctx, &ids, "SELECT id FROM orders"); err != nil || len(ids) != 1 || ids[0] != after {
				t.Fatalf("another pool reads %q (%v), want the write after the read-only transaction only, committed", ids, err)
			}
			if _, err := db.ExecContext(ctx, "DELETE FROM orders"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestHealthDoesNotWaitForTheWriter: Health reads its one snapshot in a
// read-only transaction, which neither takes nor waits for the writer:
// while a transaction from Begin holds it with an enqueue not yet
// committed, Health answers at once, from a context marked as holding the
// writer (a receiver's function) too, with the last committed state.
func TestHealthDoesNotWaitForTheWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	committed := store.EnqueueParams{NotificationID: "committed", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`)}
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), committed); err != nil {
		t.Fatal(err)
	}
	w, err := s.Begin(ctx) // holds the writer until the end of the test
	if err != nil {
		t.Fatal(err)
	}
	defer w.Rollback()
	uncommitted := committed
	uncommitted.NotificationID = "uncommitted"
	if _, err := s.Outbox.Enqueue(ctx, w, uncommitted); err != nil {
		t.Fatal(err)
	}
	for name, ctx := range map[string]context.Context{"unmarked": ctx, "marked as holding the writer": writerctx.WithHeld(ctx)} {
		t.Run(name, func(t *testing.T) {
			// Bounds the wait for the writer, should there be one.
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			h, err := s.Outbox.Health(ctx)
			if err != nil {
				t.Fatalf("Health while the writer is held: %v", err)
			}
			if h.Counts[courier.StatusPending] != 1 || h.Due != 1 {
				t.Fatalf("Health counts %d pending, %d due, want the committed one only", h.Counts[courier.StatusPending], h.Due)
			}
		})
	}
}

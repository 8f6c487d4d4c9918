package handler_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
)

// TestAConnectionEndedUnderTheFunctionIsTheStores: PostgreSQL ends the
// connection of a receiver's transaction while the application's function
// runs in it (pg_terminate_backend here; a restart, a failover), and the
// function's next statement fails through no fault of its own. The store
// failed: 503 internal_error with Retry-After, as for a begin or commit
// that fails, not 500 handler_failed; nothing is recorded, and the
// redelivery runs the function again and is accepted.
func TestAConnectionEndedUnderTheFunctionIsTheStores(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := openPostgresStore(t, store.Config{})
		var once atomic.Bool
		e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			if !once.CompareAndSwap(false, true) {
				return nil
			}
			var pid int
			if err := tx.GetContext(ctx, &pid, "SELECT pg_backend_pid()"); err != nil {
				return err
			}
			if _, err := s.DB().ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Error(err)
			}
			_, err := tx.ExecContext(ctx, "SELECT 1")
			return err
		}})
		rec := serve(e.handler, e.request(t))
		if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("the connection ended under the function: answered %d %s (Retry-After %q), want 503 internal_error with Retry-After",
				rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 2 {
			t.Fatalf("%d inbox records after %d calls; want 1 after 2", inbox, e.calls.Load())
		}
	})
}

// TestADatabaseFullUnderTheFunctionIsTheStores: the SQLite file fills up
// (a quota: max_page_count here; a full disk alike) while the
// application's function inserts its rows in the receiver's transaction.
// SQLite fails the statement with SQLITE_FULL and rolls back only that
// statement, so the transaction still rolls back cleanly; the store
// failed all the same, through no fault of the function: 503
// internal_error with Retry-After, as a full database gets when the
// Inbox's own insert fails, not 500 handler_failed. Nothing is recorded,
// and once there is room the redelivery runs the function again and is
// accepted. A constraint the function's own insert violates stays the
// function's failure.
func TestADatabaseFullUnderTheFunctionIsTheStores(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := anyStore(t)
		ctx := t.Context()
		if _, err := s.DB().ExecContext(ctx, "CREATE TABLE app_rows (k TEXT PRIMARY KEY, b BLOB)"); err != nil {
			t.Fatal(err)
		}
		// max_page_count holds for the connection that sets it: set it on
		// the writer's, which the receiver's transactions run on.
		// room is the pages it may grow by.
		quota := func(room int) {
			t.Helper()
			tx, err := s.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var pages int
			if err := tx.GetContext(ctx, &pages, "PRAGMA page_count"); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages+room)); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		quota(20)
		var dup atomic.Bool
		e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			rows := 100
			if dup.Load() {
				rows = 1
			}
			// Many rows in one statement: SQLite keeps a statement
			// journal, and rolls back the statement alone.
			_, err := tx.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
				INSERT INTO app_rows SELECT 'row-' || i, randomblob(8192) FROM n`, rows)
			if err == nil && dup.Load() {
				_, err = tx.ExecContext(ctx, "INSERT INTO app_rows VALUES ('row-1', NULL)")
			}
			return err
		}})
		rec := serve(e.handler, e.request(t))
		if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("the database filled up under the function: answered %d %s (Retry-After %q), want 503 internal_error with Retry-After",
				rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		if inbox, _ := e.written(t); inbox != 0 || rows(t, s, "app_rows") != 0 {
			t.Fatalf("%d inbox records and %d rows of the function's after the failure; want none", inbox, rows(t, s, "app_rows"))
		}

		quota(1 << 20)
		dup.Store(true)
		if rec = serve(e.handler, e.request(t)); rec.Code != http.StatusInternalServerError || problemOf(t, rec).Code != courier.CodeHandlerFailed {
			t.Fatalf("the function's own constraint failed: answered %d %s, want 500 handler_failed", rec.Code, rec.Body)
		}
		dup.Store(false)
		if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 3 || rows(t, s, "app_rows") != 100 {
			t.Fatalf("%d inbox records and %d rows after %d calls; want 1 and 100 after 3", inbox, rows(t, s, "app_rows"), e.calls.Load())
		}
	})
}

// TestALockTimeoutUnderTheFunctionIsTheStores: on PostgreSQL the
// application's function waits for a row another transaction holds, past
// its lock_timeout, and its statement fails with lock_not_available. The
// transaction rolls back cleanly, but the database refused it for a
// while, through no fault of the function: 503 internal_error with
// Retry-After, as a lock conflict of the Inbox's own gets, not 500
// handler_failed. Once the row is free the redelivery is accepted.
func TestALockTimeoutUnderTheFunctionIsTheStores(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := openPostgresStore(t, store.Config{})
		ctx := t.Context()
		if _, err := s.DB().ExecContext(ctx, "CREATE TABLE app_rows (id int PRIMARY KEY); INSERT INTO app_rows VALUES (1)"); err != nil {
			t.Fatal(err)
		}
		holder, err := s.DB().BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.ExecContext(ctx, "SELECT id FROM app_rows WHERE id = 1 FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = '20ms'"); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "UPDATE app_rows SET id = id WHERE id = 1")
			return err
		}})
		rec := serve(e.handler, e.request(t))
		if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("the function's row stayed locked: answered %d %s (Retry-After %q), want 503 internal_error with Retry-After",
				rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
		if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 2 {
			t.Fatalf("%d inbox records after %d calls; want 1 after 2", inbox, e.calls.Load())
		}
	})
}

// TestARejectionWhoseRollbackFailsIsTheStores: the application's function
// refuses a notification (Reject) after PostgreSQL ended the connection of
// its transaction, so the receiver cannot roll the transaction back. The
// store failed under the function: its refusal may rest on what it could
// not read, and nothing says the store can answer. A 422 would tell the
// sender never to deliver again; the answer is the store's, 503
// internal_error with Retry-After, and the redelivery runs the function
// again and is accepted.
func TestARejectionWhoseRollbackFailsIsTheStores(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := openPostgresStore(t, store.Config{})
		var once atomic.Bool
		e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			if !once.CompareAndSwap(false, true) {
				return nil
			}
			var pid int
			if err := tx.GetContext(ctx, &pid, "SELECT pg_backend_pid()"); err != nil {
				return err
			}
			if _, err := s.DB().ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Error(err)
			}
			return handler.Reject("", "refused")
		}})
		rec := serve(e.handler, e.request(t))
		if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("the function refused after its connection ended: answered %d %s (Retry-After %q), want 503 internal_error with Retry-After",
				rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 2 {
			t.Fatalf("%d inbox records after %d calls; want 1 after 2", inbox, e.calls.Load())
		}
	})
}

package handler_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
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
	pgAdmin := postgresServer(t)
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := openPostgresStoreOn(t, pgAdmin, store.Config{})
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

package handler_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/damage"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestADamagedDatabaseIsAnswered503InEveryReceiver: SQLite's
// SQLITE_CORRUPT is database_corrupt, a case of database_unavailable:
// the database failed, not the application's function, so every receiver
// answers 503 internal_error with Retry-After, whether a store statement
// met the damage (a courier table's page) or the function did (one of
// the application's tables, its driver's error returned as it is).
// Publish is left out: its fan-out reads subscriptions through an
// index, which a damaged table's root page leaves readable.
func TestADamagedDatabaseIsAnswered503InEveryReceiver(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, table string }{
		{"in courier's tables", "courier_inbox courier_outbox"},
		{"in the application's", "app_orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
				s := damagedStore(t, tc.table)
				e := target.open(t, anyOptions{store: s, logger: slog.New(new(logtest.Records)), appTx: func(ctx context.Context, tx *sqlx.Tx) error {
					var n int
					return tx.GetContext(ctx, &n, "SELECT count(*) FROM app_orders WHERE id > 0")
				}})
				rec := serve(e.handler, e.request(t))
				if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
					t.Fatalf("got %d %s (Retry-After %q), want 503 internal_error with Retry-After: %s",
						rec.Code, p.Code, rec.Header().Get("Retry-After"), rec.Body)
				}
			})
		})
	}
}

// damagedStore returns a Store on a SQLite file whose tables (courier's,
// or app_orders, the application's, which it holds beside them), named
// in tables, separated by spaces, each have a root page no b-tree page
// is.
func damagedStore(t *testing.T, tables string) *store.Store {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "any.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE app_orders (id INTEGER PRIMARY KEY); INSERT INTO app_orders VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	damage.Tables(t, s, path, strings.Fields(tables)...)
	if s, err = sqlite.Open(ctx, path, store.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

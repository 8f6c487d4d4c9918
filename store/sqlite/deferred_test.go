package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAnEnqueueInADeferredTransactionAfterAnotherCommitIsBusy: an
// application's own pool whose DSN begins transactions deferred
// (go-sqlite3's default, without _txlock=immediate) reads from a snapshot
// until its first write; once another connection or process has committed
// since, SQLite refuses that write at once, whatever the busy timeout. An
// Enqueue after a read in such a transaction fails with code
// database_unavailable, as the package documentation says, and its message
// names the way out, since trying again cannot pass; the same transaction
// through a pool opened with DSN's settings goes through.
func TestAnEnqueueInADeferredTransactionAfterAnotherCommitIsBusy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.db")
	other, err := sqlite.Open(ctx, path, store.Config{}) // another process's Store, say
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, tc := range []struct {
		name, dsn string
		wantBusy  bool
	}{
		{"deferred", "file:" + path + "?_journal_mode=WAL&_busy_timeout=10000", true},
		{"DSN", sqlite.DSN(path, store.DurabilityFull), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sqlx.Open("sqlite3", tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			s, err := store.Open(ctx, db, store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tx, err := db.BeginTxx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			var n int
			if err := tx.GetContext(ctx, &n, "SELECT COUNT(*) FROM courier_outbox"); err != nil { // the application's read first
				t.Fatal(err)
			}
			if !tc.wantBusy { // the transaction holds the lock: the other's write would wait for it
				if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-" + tc.name, Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if _, err := other.Outbox.Enqueue(ctx, other.DB(), store.EnqueueParams{NotificationID: "elsewhere", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-" + tc.name, Endpoint: "https://r.example/h", Payload: []byte(`{}`)})
			if courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
				t.Fatalf("Enqueue in a deferred transaction after another commit = %v, want code database_unavailable", err)
			}
			for _, fix := range []string{"Store.Begin", "sqlite.DSN"} {
				if !strings.Contains(err.Error(), fix) {
					t.Errorf("Enqueue's error %q does not name %s, the way out", err, fix)
				}
			}
		})
	}
}

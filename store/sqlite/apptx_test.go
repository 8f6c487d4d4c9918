package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestEnqueuesInTheApplicationsTransactionOnSQLite: the application
// enqueues in a transaction of Store.Begin, rolls back to savepoints
// taken before and after enqueues and commits; and in transactions of
// pools of its own on the same file, through go-sqlite3's driver and
// through DriverName. The outbox holds exactly the deliveries that
// survived, each claimed once, and a commit through a DriverName pool
// wakes the Store's workers.
func TestEnqueuesInTheApplicationsTransactionOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "app.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	delivery := func(id string) store.EnqueueParams {
		return store.EnqueueParams{NotificationID: id, Endpoint: "https://receiver.example/hook", Payload: []byte(`{}`), OrderingKey: "order-1"}
	}
	enqueue := func(tx *sqlx.Tx, id string) {
		t.Helper()
		if _, err := s.Outbox.Enqueue(ctx, tx, delivery(id)); err != nil {
			t.Fatalf("enqueue %s: %v", id, err)
		}
	}
	exec := func(tx *sqlx.Tx, q string) {
		t.Helper()
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}

	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	exec(tx, "SAVEPOINT before")
	enqueue(tx, "gone-1") // its key's first: rolled back, the next heads the key
	exec(tx, "ROLLBACK TO before")
	enqueue(tx, "kept-1")
	exec(tx, "SAVEPOINT after")
	enqueue(tx, "gone-2")
	exec(tx, "ROLLBACK TO after")
	exec(tx, "RELEASE after")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	wake, stop, err := protocol.For(s).Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select { // a wake-up pending from the commit above
	case <-wake:
	default:
	}
	for _, driver := range []string{"sqlite3", sqlite.DriverName} {
		other, err := sqlx.Open(driver, sqlite.DSN(path, store.DurabilityFull))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx, err := other.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		enqueue(tx, "kept-"+driver)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	<-wake // DriverName's commit hook; the test's deadline bounds a failure

	var ids []string
	if err := s.DB().SelectContext(ctx, &ids, "SELECT notification_id FROM courier_outbox ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ids, " "), "kept-1 kept-sqlite3 kept-"+sqlite.DriverName; got != want {
		t.Fatalf("the outbox holds %s; want %s", got, want)
	}
	// One key: each is claimed once, in turn, as the one before succeeds.
	for _, id := range ids {
		c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(c) != 1 || c[0].NotificationID != id {
			t.Fatalf("claimed %d deliveries; want %s alone", len(c), id)
		}
		settled, err := protocol.For(s).Settle(ctx, protocol.Outcome{Lease: c[0].Lease, Result: protocol.Succeeded, HTTPStatus: 200})
		if err != nil || settled[0].Err != nil {
			t.Fatalf("settle %s: %v, %+v", id, err, settled)
		}
	}
}

// TestAnEnqueueInATransactionOfAnotherFileIsAConfigError: the
// application hands Enqueue a transaction of its own database file, not
// the one courier's Store migrated. No retry mends that: the enqueue
// fails config_invalid, naming the table SQLite did not find, and the
// application's file is left without courier's tables.
func TestAnEnqueueInATransactionOfAnotherFileIsAConfigError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	app, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(dir, "app.db"), store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	tx, err := app.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://receiver.example/hook", Payload: []byte(`{}`)})
	if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("enqueue in a transaction of another file = %v; want config_invalid naming the missing table", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := app.GetContext(ctx, &tables, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'courier%'"); err != nil || tables != 0 {
		t.Fatalf("the application's file has %d of courier's tables (%v); want none", tables, err)
	}
}

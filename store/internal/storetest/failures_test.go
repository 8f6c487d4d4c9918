package storetest_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// TestDatabaseFailuresHaveACode: a failure of the database itself is
// courier.CodeDatabaseUnavailable, whatever the driver said, so a caller
// tells "retry later" apart without importing a driver: a lock the
// store waited for in vain (lock_timeout), and a connection the server
// ended in the middle of the caller's transaction. The driver's error
// stays in the chain, for the log. A context's end keeps its own error.
func TestDatabaseFailuresHaveACode(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("lock_timeout", "100ms")
	u.RawQuery = q.Encode()
	db, err := sqlx.Open(postgres.DriverName, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	id := enqueue(t, s, store.EnqueueParams{NotificationID: "a", Endpoint: "https://receiver.example/a", Payload: []byte(`{"id":"a"}`)})

	lock, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec("SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE", id); err != nil {
		t.Fatal(err)
	}
	err = s.Outbox.Cancel(ctx, id)
	lock.Rollback()
	if code := courier.CodeOf(err); code != courier.CodeDatabaseUnavailable {
		t.Errorf("Cancel of a row locked past lock_timeout: code %q (%v), want %q", code, err, courier.CodeDatabaseUnavailable)
	}

	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var pid int
	if err := tx.Get(&pid, "SELECT pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "b", Endpoint: "https://receiver.example/b", Payload: []byte(`{"id":"b"}`)})
	if code := courier.CodeOf(err); code != courier.CodeDatabaseUnavailable {
		t.Errorf("Enqueue on a connection the server ended: code %q (%v), want %q", code, err, courier.CodeDatabaseUnavailable)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Outbox.Get(cancelled, id); !errors.Is(err, context.Canceled) || courier.CodeOf(err) != "" {
		t.Errorf("Get under an ended context: %v (code %q), want context.Canceled alone", err, courier.CodeOf(err))
	}
}

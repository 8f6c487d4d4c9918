package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
	"github.com/jmoiron/sqlx"
)

// TestCloseConcurrently: a Store is safe for concurrent use, Close too: a
// shutdown path and a deferred Close running together close each thing
// the Store opened once, without a race.
func TestCloseConcurrently(t *testing.T) {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { errs <- s.Close() })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// TestACallOnAClosedStoreFails: after Close every call fails at once, with
// code database_unavailable and the protocol's ErrClosed in its chain (the
// worker tries no write again on it), the database opened by the caller
// included.
func TestACallOnAClosedStoreFails(t *testing.T) {
	ctx := t.Context()
	db := migratedDB(t)
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, enqueueErr := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n", Endpoint: "https://r.example/h", Payload: []byte(`{}`)})
	_, beginErr := s.Begin(ctx)
	_, healthErr := s.Outbox.Health(ctx)
	_, listErr := s.Outbox.List(ctx, store.ListParams{Status: courier.StatusFailed})
	window := store.ListParams{Status: courier.StatusFailed, Since: time.Now().Add(-time.Hour)}
	_, windowErr := s.Outbox.List(ctx, window)
	// A Store sqlite.Open opened closes its database too.
	own, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "own.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Close(); err != nil {
		t.Fatal(err)
	}
	_, ownWindowErr := own.Outbox.List(ctx, window)
	for name, err := range map[string]error{
		"Enqueue": enqueueErr, "Begin": beginErr, "Health": healthErr, "List": listErr, "List in a window": windowErr,
		"List in a window, sqlite.Open's": ownWindowErr,
	} {
		if !errors.Is(err, courier.CodeDatabaseUnavailable) || !errors.Is(err, protocol.ErrClosed) {
			t.Errorf("%s on a closed Store = %v, want database_unavailable, ErrClosed", name, err)
		}
	}
}

// TestOpenRefusesABreakerThatWouldMisbehave: a negative Threshold opened
// an endpoint's breaker at its first failure, and a negative DisableAfter
// disabled the endpoint for good; Open refuses each bound it documents,
// naming the field.
func TestOpenRefusesABreakerThatWouldMisbehave(t *testing.T) {
	ctx := t.Context()
	db := migratedDB(t)
	for name, b := range map[string]store.BreakerConfig{
		"Threshold":    {Threshold: -1},
		"Cooldown":     {Cooldown: -time.Second},
		"DisableAfter": {DisableAfter: -time.Hour},
	} {
		if s, err := store.Open(ctx, db, store.Config{Breaker: b}); err == nil {
			s.Close()
			t.Errorf("Open took a negative %s", name)
		} else if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), "Breaker."+name) {
			t.Errorf("negative %s: Open = %v, want config_invalid naming it", name, err)
		}
	}
	s, err := store.Open(ctx, db, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Millisecond, DisableAfter: time.Millisecond}})
	if err != nil {
		t.Fatalf("Open at the bounds: %v", err)
	}
	s.Close()
}

// migratedDB is a migrated SQLite database the test opened itself, closed
// when it ends.
func migratedDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(t.TempDir(), "c.db"), store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestCloseWithTheWriterHeldReturnsAndFreesItsWaiters: on SQLite a
// Store's writes go through one connection. Close, called while a
// request's transaction holds it and another Begin waits for it, returns
// at once rather than wait for the connection, and the waiting Begin
// fails then rather than wait for ever.
func TestCloseWithTheWriterHeldReturnsAndFreesItsWaiters(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "c.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	held, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	waiting := make(chan error, 1)
	go func() {
		tx, err := s.Begin(ctx)
		if err == nil {
			tx.Rollback()
		}
		waiting <- err
	}()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Close with the writer held did not return")
	}
	select {
	case err := <-waiting:
		if err == nil || ctx.Err() != nil {
			t.Errorf("a Begin waiting for the writer through Close = %v (context: %v); want a failure before its deadline", err, ctx.Err())
		}
	case <-ctx.Done():
		t.Fatal("a Begin waiting for the writer through Close still waits")
	}
}

package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// lockedStore opens a Store over a fresh file and takes SQLite's write
// lock on it from a connection of its own, as an application's
// transaction or another process does; release lets it go.
func lockedStore(t *testing.T) (s *store.Store, release func()) {
	t.Helper()
	s, hold := lockableStore(t)
	return s, hold()
}

// lockableStore opens a Store over a fresh file; hold takes SQLite's write
// lock on it from a connection of its own, as an application's
// transaction or another process does, and returns what lets it go.
func lockableStore(t *testing.T) (s *store.Store, hold func() (release func())) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "o.db")
	s, err := sqlite.Open(t.Context(), file, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	other, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(file, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return s, func() func() {
		tx, err := other.BeginTxx(t.Context(), nil) // the DSN's transactions take the lock as they begin
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("UPDATE courier_schema SET version = version WHERE 0"); err != nil {
			t.Fatal(err)
		}
		return func() { tx.Rollback() }
	}
}

// TestAWaitForTheWriteLockEndsWithItsContext: while another connection
// holds the write lock, the Store's writes wait for it (as long as the
// busy timeout, 10 s), and a context's end cuts the wait short: it waited
// inside SQLite, where no context reaches, so a Worker's Stop or a
// request that ended was held up for the whole 10 s.
func TestAWaitForTheWriteLockEndsWithItsContext(t *testing.T) {
	t.Parallel()
	s, release := lockedStore(t)
	defer release()

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	begun := make(chan error, 1)
	go func() {
		tx, err := s.Begin(ctx)
		if err == nil {
			tx.Rollback()
		}
		begun <- err
	}()
	select {
	case err := <-begun:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Begin with the lock held elsewhere = %v, want the context's end", err)
		}
	case <-time.After(5 * time.Second): // a bound on failure: the busy timeout is 10 s
		t.Fatal("Begin waited on past its context's end")
	}

	_, err := s.Outbox.Prune(ctx, store.PruneParams{OlderThan: time.Hour}) // a write outside a transaction: the context has ended
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Prune with the lock held elsewhere and its context ended = %v, want the context's end", err)
	}
}

// TestTheWriterWaitsForTheWriteLock: each kind of write of the Store's
// (a transaction, a statement on its own, a write with RETURNING outside
// a transaction) waits while another connection holds the lock, longer
// than one of the writer's short waits inside SQLite, and goes through
// once it is let go. Subscriptions.Create without a transaction was a
// query on the writer, which no one tried again: it failed busy after
// 25 ms.
func TestTheWriterWaitsForTheWriteLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(ctx context.Context, s *store.Store) error
	}{
		{"Begin", func(ctx context.Context, s *store.Store) error {
			tx, err := s.Begin(ctx)
			if err == nil {
				err = tx.Commit()
			}
			return err
		}},
		{"Outbox.Prune", func(ctx context.Context, s *store.Store) error {
			_, err := s.Outbox.Prune(ctx, store.PruneParams{OlderThan: time.Hour})
			return err
		}},
		{"Replay.Remember", func(ctx context.Context, s *store.Store) error {
			_, err := s.Replay.Remember(ctx, "k1", "n1", time.Now().Add(time.Minute))
			return err
		}},
		{"Subscriptions.Create without a transaction", func(ctx context.Context, s *store.Store) error {
			_, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r.example/h",
				EventTypes: []string{"order.created"}, KeyID: "k1"})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, release := lockedStore(t)
			done := make(chan error, 1)
			go func() { done <- tc.write(t.Context(), s) }()
			select {
			case err := <-done:
				t.Fatalf("%s returned %v while another connection held the lock; want it to wait", tc.name, err)
			case <-time.After(200 * time.Millisecond): // eight of the writer's waits inside SQLite
			}
			release()
			if err := <-done; err != nil {
				t.Fatalf("%s once the lock was let go = %v", tc.name, err)
			}
		})
	}
}

// TestWritesQueuedBehindABusyWaitShareItsTimeout: while another process
// holds the write lock past the busy timeout, the Store's writes, which
// queue for its one writer in Go, each waited the whole busy timeout in
// turn once they had the writer: the third of three concurrent writes
// failed after 30 s, the n-th of a receiver's n requests after n times
// 10 s. A write now waits 10 s at most from when it asked for the
// writer, its time queued behind the writes waiting before it included.
func TestWritesQueuedBehindABusyWaitShareItsTimeout(t *testing.T) {
	t.Parallel()
	s, release := lockedStore(t)
	defer release()
	const writes = 3
	start := time.Now()
	done := make(chan error, writes)
	for range writes {
		go func() {
			tx, err := s.Begin(t.Context())
			if err == nil {
				tx.Rollback()
			}
			done <- err
		}()
	}
	for range writes {
		select {
		case err := <-done:
			if courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
				t.Fatalf("Begin with the lock held elsewhere = %v, want code database_unavailable", err)
			}
		case <-time.After(15*time.Second - time.Since(start)): // a bound on failure: the busy timeout is 10 s
			t.Fatalf("a Begin queued behind another's wait for the lock was still waiting %v after it began", time.Since(start))
		}
	}
}

// TestAWriteAfterAWaitThatGaveUpWaitsForTheLockTakenAfresh: once a write
// had waited the busy timeout for a lock held elsewhere and failed, the
// writes that came within a second after it, not queued behind it, took
// its wait for their own: with the lock let go and taken again at once by
// another process's next transaction, held for a moment only, such a
// write failed at once with code database_unavailable instead of waiting
// for that moment to pass. Only the writes queued while a write waited
// share its wait.
func TestAWriteAfterAWaitThatGaveUpWaitsForTheLockTakenAfresh(t *testing.T) {
	t.Parallel()
	s, hold := lockableStore(t)
	begin := func() error {
		tx, err := s.Begin(t.Context())
		if err == nil {
			err = tx.Commit()
		}
		return err
	}
	release := hold()
	if err := begin(); courier.CodeOf(err) != courier.CodeDatabaseUnavailable {
		t.Fatalf("Begin with the lock held elsewhere = %v, want code database_unavailable", err)
	}
	release()
	release = hold() // another process's next transaction, a short one
	done := make(chan error, 1)
	go func() { done <- begin() }()
	select {
	case err := <-done:
		release()
		t.Fatalf("Begin with the lock just taken afresh elsewhere returned %v; want it to wait", err)
	case <-time.After(200 * time.Millisecond): // eight of the writer's waits inside SQLite
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Begin once the lock was let go = %v", err)
	}
}

// TestTwoStoresOnOneFileBothMakeProgress: two Stores on one file, each
// with a writer connection of its own as two processes have, enqueue
// without a pause from several goroutines each, their writes queued for
// their writer while the other Store holds SQLite's lock in turn: every
// write of both goes through, none fails with database_unavailable.
func TestTwoStoresOnOneFileBothMakeProgress(t *testing.T) {
	file := filepath.Join(t.TempDir(), "o.db")
	var stores [2]*store.Store
	for i := range stores {
		s, err := sqlite.Open(t.Context(), file, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const writers = 4
	end := time.Now().Add(3 * time.Second)
	var done, failed [2]atomic.Int64
	var first sync.Once
	var wg sync.WaitGroup
	for i, s := range stores {
		for w := range writers {
			wg.Go(func() {
				for n := 0; time.Now().Before(end); n++ {
					tx, err := s.Begin(t.Context())
					if err == nil {
						_, err = s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d-%d-%d", i, w, n), Endpoint: "https://r.example/h", Payload: []byte(`{}`)})
						if err == nil {
							err = tx.Commit()
						} else {
							tx.Rollback()
						}
					}
					if err != nil {
						failed[i].Add(1)
						first.Do(func() { t.Logf("store %d: %v", i, err) })
						continue
					}
					done[i].Add(1)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("done %d/%d, failed %d/%d", done[0].Load(), done[1].Load(), failed[0].Load(), failed[1].Load())
	for i := range stores {
		if failed[i].Load() > 0 || done[i].Load() == 0 {
			t.Errorf("store %d: %d writes went through, %d failed", i, done[i].Load(), failed[i].Load())
		}
	}
}

package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/store"
)

// TestAWriteQueuedBehindTheWritersOwnTransactionWaitsForTheLock: a write
// that asked for the writer long ago, queued behind a transaction of the
// Store's own (a receiver's slow function, say) rather than behind writes
// waiting for the lock held elsewhere, waits its whole busy timeout once
// its turn comes for another process's transaction to end: the time it
// was queued while the writer held the lock itself is no wait for the
// lock.
func TestAWriteQueuedBehindTheWritersOwnTransactionWaitsForTheLock(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "o.db")
	w := openWriter(file, store.DurabilityFull)
	defer w.Close()
	if _, err := w.ExecContext(t.Context(), "PRAGMA user_version = 1"); err != nil {
		t.Fatal(err)
	}
	other, err := sqlx.Open(DriverName, DSN(file, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	hold, err := other.BeginTxx(t.Context(), nil) // the DSN's transactions take the lock as they begin
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback()

	asked := writerctx.WithAsked(t.Context(), time.Now().Add(-2*busyTimeout*time.Millisecond))
	done := make(chan error, 1)
	go func() {
		_, err := w.ExecContext(asked, "PRAGMA user_version = 2")
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a write queued long behind the writer's own transaction returned %v while another connection held the lock; want it to wait", err)
	case <-time.After(200 * time.Millisecond): // eight of the writer's waits inside SQLite
	}
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the write once the lock was let go = %v", err)
	}
}

package sqlite_test

import (
	"database/sql"
	"fmt"
	"math/bits"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestALongReadDoesNotStallEveryCommit: a read transaction held for
// minutes in another process (a backup, a sqlite3 shell left in a BEGIN)
// keeps the -wal file from starting over. The writer waited 250 ms for it
// at every look past the limit, every 64 commits, for as long as the read
// lasted: the application's writes ran several times slower throughout.
// It now waits again only once the file has doubled since a wait that
// failed, and still resets the file once the read ends.
func TestALongReadDoesNotStallEveryCommit(t *testing.T) {
	const limit = 1 << 20
	defer sqlite.SetWALLimit(limit)()
	ctx := t.Context()
	s, path, walSize := walStore(t)
	enqueue := enqueuer(t, s)

	reader, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	read, err := reader.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := read.GetContext(ctx, &rows, "SELECT COUNT(*) FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	before := sqlite.WALWaits()
	const commits = 1024 // 16 looks at the -wal file's size
	enqueue(commits)
	waits := sqlite.WALWaits() - before
	peak := walSize()
	if peak <= 8*limit {
		t.Fatalf("the -wal file is %d bytes under a reader's snapshot: the test wrote too little to tell", peak)
	}
	// One wait past the limit, then one each time the file doubled.
	if most := int64(2 + bits.Len64(uint64(peak/limit))); waits > most {
		t.Fatalf("the writer waited for the reader %d times in %d commits (the -wal file grew to %d bytes), want at most %d", waits, commits, peak, most)
	}
	if err := read.Rollback(); err != nil {
		t.Fatal(err)
	}

	enqueue(64)
	if size := walSize(); size > limit {
		t.Fatalf("the -wal file is %d bytes after the read ended (peak %d), want at most %d", size, peak, limit)
	}
}

// TestAResetByAnotherProcessStartsTheWaitsOver: once a long read had made
// the writer's reset of the -wal file fail, the writer waited again only
// when the file had doubled since; when the file then went back under the
// limit without the writer's own reset (another process's writer, or
// SQLite starting it over by itself), the writer kept that size, and the
// next time reads held the file past the limit, for as short as they
// were, it did not wait for them until the file was twice the size of the
// long read's: reads overlapping without a pause grew it that far. A file
// back under the limit starts over: past it, the writer waits at once.
func TestAResetByAnotherProcessStartsTheWaitsOver(t *testing.T) {
	const limit = 1 << 20
	defer sqlite.SetWALLimit(limit)()
	ctx := t.Context()
	s, path, walSize := walStore(t)
	enqueue := enqueuer(t, s)
	other, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull)) // another process's connections
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	longRead := func() (end func()) {
		t.Helper()
		read, err := other.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		var rows int
		if err := read.GetContext(ctx, &rows, "SELECT COUNT(*) FROM courier_outbox"); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := read.Rollback(); err != nil {
				t.Fatal(err)
			}
		}
	}

	end := longRead()
	enqueue(1024)
	if peak := walSize(); peak <= 8*limit {
		t.Fatalf("the -wal file is %d bytes under a reader's snapshot: the test wrote too little to tell", peak)
	}
	end()
	if _, err := other.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil { // another process's writer resets the file
		t.Fatal(err)
	}
	if size := walSize(); size > limit {
		t.Fatalf("the -wal file is %d bytes after another process's reset", size)
	}

	end = longRead()
	defer end()
	before := sqlite.WALWaits()
	for walSize() <= 2*limit {
		enqueue(64)
	}
	if sqlite.WALWaits() == before {
		t.Fatalf("the writer did not wait for the reads in progress with the -wal file past the limit again (%d bytes), after another process had reset it", walSize())
	}
}

// enqueuer returns a function that enqueues count deliveries of an empty
// payload to s, each in a transaction of its own, numbering them on from
// the last.
func enqueuer(t *testing.T, s *store.Store) func(count int) {
	n := 0
	return func(count int) {
		t.Helper()
		for range count {
			n++
			tx, err := s.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", n), Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

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
	n := 0
	enqueue := func(count int) {
		t.Helper()
		for range count {
			n++
			tx, err := s.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", n), Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}

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

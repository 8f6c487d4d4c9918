package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestTheWALStaysBounded: while a read is in progress the -wal file cannot
// start over, and every commit adds to it (an application's own queries
// on the file, a Health probe). SQLite never shrank it afterwards: a peak
// stayed on disk for good, and while reads overlapped without a pause it
// grew for as long as they did. Once the reads let it, the writer brings
// it back under its limit.
func TestTheWALStaysBounded(t *testing.T) {
	const limit = 1 << 20
	defer sqlite.SetWALLimit(limit)()
	ctx := t.Context()
	s, path, walSize := walStore(t)
	enqueue := func(n int, payload []byte) {
		t.Helper()
		for range n {
			tx, err := s.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", walSize()), Endpoint: "https://r.example/h", Payload: payload}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A reader holds its snapshot while 128 deliveries of 32 KiB commit.
	reader, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	read, err := reader.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := read.GetContext(ctx, &n, "SELECT COUNT(*) FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	enqueue(128, []byte(`{"pad":"`+strings.Repeat("x", 32<<10)+`"}`))
	peak := walSize()
	if peak <= 4*limit {
		t.Fatalf("the -wal file is %d bytes under a reader's snapshot: the test wrote too little to tell", peak)
	}
	if err := read.Rollback(); err != nil {
		t.Fatal(err)
	}

	// The read is over: the next commits bring the file back under the limit.
	enqueue(64, []byte(`{}`))
	if size := walSize(); size > limit {
		t.Fatalf("the -wal file is %d bytes after the read ended (peak %d), want at most %d", size, peak, limit)
	}
}

// walStore opens a Store on a file of its own, closed when t ends, and
// returns it, the file's path and a reader of its -wal file's size.
func walStore(t *testing.T) (*store.Store, string, func() int64) {
	t.Helper()
	s, path := storeAt(t)
	return s, path, func() int64 {
		t.Helper()
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
}

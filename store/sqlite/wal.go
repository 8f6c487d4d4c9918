package sqlite

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/mattn/go-sqlite3"
)

// walLimit is the size past which the writer resets the -wal file. In WAL
// mode each commit appends to the -wal file, and SQLite's own checkpoints
// (every 1,000 pages, PASSIVE) copy it back into the database without
// waiting for anyone; the file starts over from its beginning only at a
// moment no reader is using it. While reads overlap without a pause (an
// application's own queries on the same file, a Health probe in a loop)
// there is no such moment and the file grows with every commit, for as
// long as they do, and SQLite never shrinks it afterwards.
var walLimit atomic.Int64 // 64 MiB; tests lower it

func init() { walLimit.Store(64 << 20) }

// walWait is how long the writer waits, once the -wal file is past
// walLimit, for the reads in progress to end so that it can start the
// file over: writes queue behind it meanwhile. Reads that begin while it
// waits read the database file and do not hold it up.
const walWait = 250 // milliseconds

// walCheckEvery is how many commits pass between two looks at the size
// of the -wal file.
const walCheckEvery = 64

// busyTimeout is DSN's _busy_timeout: how long a connection waits for
// SQLite's write lock, held by another connection, before it answers
// busy. SQLite's wait does not end with the context: on the writer,
// courier waits in steps of writerBusyStep instead (see waitBusy),
// as long in all.
const busyTimeout = 10000 // milliseconds

// writerBusyStep is the writer's own busy timeout, restored after a
// reset: the longest wait that cannot be cut short.
const writerBusyStep = 25 // milliseconds

// walBound keeps the writer's -wal file near walLimit: past it, the
// writer checkpoints with TRUNCATE, which copies every frame back, waits
// up to walWait for the reads in progress, and empties the file. A reset
// that could not wait long enough is tried again at the next look.
// journal_size_limit truncates the file to walLimit at the resets SQLite
// makes by itself, so a peak (one large transaction) does not stay.
type walBound struct {
	path    string // the -wal file
	commits int    // since the last look
}

// boundWAL sets up the bound on the writer connection sc, nil for a
// database in memory.
func boundWAL(sc *sqlite3.SQLiteConn) (*walBound, error) {
	file, err := connFile(sc)
	if err != nil || file == "" {
		return nil, err
	}
	if _, err := sc.ExecContext(context.Background(), fmt.Sprintf("PRAGMA journal_size_limit = %d", walLimit.Load()), nil); err != nil {
		return nil, err
	}
	return &walBound{path: file + "-wal"}, nil
}

// committed counts a commit and, every walCheckEvery, resets the -wal
// file if it has grown past walLimit. A reset that does not complete is
// left for the next look: the commit itself has succeeded. It reports
// false if the connection's busy timeout could not be restored, so that
// the connection is not used again.
func (w *walBound) committed(sc *sqlite3.SQLiteConn) bool {
	if w.commits++; w.commits < walCheckEvery {
		return true
	}
	w.commits = 0
	if fi, err := os.Stat(w.path); err != nil || fi.Size() <= walLimit.Load() {
		return true
	}
	ctx := context.Background()
	if _, err := sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", walWait), nil); err != nil {
		return true
	}
	_, _ = sc.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)", nil)
	_, err := sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", writerBusyStep), nil)
	return err == nil
}

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
// that could not complete is tried again at the next look. A read held
// for long (a backup, a sqlite3 shell left in a transaction, in any
// process) keeps every reset from completing while it lasts: waiting for
// it at every look would hold up every writer walWait in each
// walCheckEvery commits, for as long as it reads. So once a reset that
// waited has failed, the next looks try without waiting (one succeeds as
// soon as no read is in progress at that moment), and wait again only once
// the file has doubled since: a few waits in all, however long the read.
// journal_size_limit truncates the file to walLimit at the resets SQLite
// makes by itself, so a peak (one large transaction) does not stay.
type walBound struct {
	path    string // the -wal file
	commits int    // since the last look
	// failedAt is the file's size when a reset that waited last failed,
	// 0 once the file is found reset (whoever reset it): until the file
	// is twice that, resets do not wait.
	failedAt int64
	seen     int64 // the file's size at the last look
}

// walWaits counts the resets that waited for reads, in every writer of
// the process; tests read it.
var walWaits atomic.Int64

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
	fi, err := os.Stat(w.path)
	if err != nil {
		return true
	}
	// The file only grows until it is reset: back within walLimit, or
	// smaller than at the last look, it was reset since (by another
	// process's writer, or by SQLite starting it over).
	if fi.Size() <= walLimit.Load() || fi.Size() < w.seen {
		w.failedAt = 0
	}
	w.seen = fi.Size()
	if fi.Size() <= walLimit.Load() {
		return true
	}
	wait := w.failedAt == 0 || fi.Size() >= 2*w.failedAt
	busy := 0
	if wait {
		busy = walWait
		walWaits.Add(1)
	}
	ctx := context.Background()
	if _, err := sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busy), nil); err != nil {
		return true
	}
	_, _ = sc.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)", nil)
	_, err = sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", writerBusyStep), nil)
	if after, statErr := os.Stat(w.path); statErr == nil {
		switch {
		case after.Size() <= walLimit.Load():
			w.failedAt = 0
		case wait:
			w.failedAt = after.Size()
		}
		w.seen = after.Size()
	}
	return err == nil
}

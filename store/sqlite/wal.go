package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/jmoiron/sqlx"
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
	// file is the -wal file the writer commits into, as first seen; once
	// another is found at path, or none, removed is set (see removal).
	file    os.FileInfo
	removed bool
	secured bool // since removed, what the unlinked file holds is in the database file
	// shown is what the looks found, for Health (walGone); nil: for no one.
	shown *walSeen
}

// walSeen is what the writer's looks at its -wal file found, shown to
// Health, which reads it without waiting for the writer (walGone): the
// file as the writer first saw it, and whether a look found it gone. The
// writer's connections share it, so one opened again keeps what an
// earlier one found.
type walSeen struct {
	path    string
	file    atomic.Pointer[os.FileInfo]
	removed atomic.Bool
}

// walWaits counts the resets that waited for reads, in every writer of
// the process; tests read it.
var walWaits atomic.Int64

// boundWAL sets up the bound on the writer connection sc, nil for a
// database in memory; its looks are shown to Health through shown.
func boundWAL(sc *sqlite3.SQLiteConn, shown *walSeen) (*walBound, error) {
	file, err := connFile(sc)
	if err != nil || file == "" {
		return nil, err
	}
	if _, err := sc.ExecContext(context.Background(), fmt.Sprintf("PRAGMA journal_size_limit = %d", walLimit.Load()), nil); err != nil {
		return nil, err
	}
	w := &walBound{path: file + "-wal", shown: shown}
	switch {
	case shown == nil:
	case shown.removed.Load():
		w.removed = true // found so through an earlier connection: refused still
	default:
		// A connection opened again (the earlier one dropped) may find
		// another -wal file, SQLite's own: it removes the file as the
		// last connection to the database closes.
		shown.file.Store(nil)
	}
	fi, err := os.Stat(w.path) // else at the first look
	w.gone(fi, err)
	return w, nil
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
	if w.foundGone(sc, fi, err) {
		return true // kept: another connection would find the frames of the unlinked file missing
	}
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

// foundGone reports whether the look that found fi (or err) found the
// -wal file removed or replaced (see gone); if so, from then on the
// writer refuses writes (see removal), what the unlinked file holds
// secured first.
func (w *walBound) foundGone(sc *sqlite3.SQLiteConn, fi os.FileInfo, err error) bool {
	if !w.gone(fi, err) {
		return false
	}
	w.removed = true
	if w.shown != nil {
		w.shown.removed.Store(true)
	}
	w.secure(sc)
	return true
}

// gone reports whether the -wal file at the look that found fi (or err)
// is no longer the one the writer commits into: removed, or replaced. A
// writer that has committed has a -wal file for as long as it is open:
// SQLite removes it only as the last connection to the database closes.
// One never seen is no removal: a database SQLite keeps out of WAL mode
// (the DSN only asks for it) has none.
func (w *walBound) gone(fi os.FileInfo, err error) bool {
	if err == nil && w.file == nil {
		w.file = fi
		if w.shown != nil {
			w.shown.file.Store(&fi)
		}
		return false
	}
	return walReplaced(w.file, fi, err)
}

// walReplaced reports whether the -wal file a look found (fi, or err)
// is no longer first, the one seen before (nil: none seen).
func walReplaced(first, fi os.FileInfo, err error) bool {
	switch {
	case first == nil:
		return false
	case errors.Is(err, fs.ErrNotExist):
		return true
	case err != nil:
		return false
	}
	return !os.SameFile(first, fi)
}

// secure copies every frame of the -wal file the writer still commits
// into, removed from the directory, into the database file (a FULL
// checkpoint, which syncs the database file; it waits up to walWait for
// the reads in progress), so that a crash loses none of them. It leaves
// the -wal file's index as it is: a new connection to the database finds
// the frames it counts missing and fails, rather than start a -wal file
// of its own beside the one the Store's connections write. A checkpoint
// that could not copy every frame is made again at the next write
// refused (see removal).
func (w *walBound) secure(sc *sqlite3.SQLiteConn) {
	ctx := context.Background()
	if _, err := sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", walWait), nil); err != nil {
		return
	}
	rows, err := sc.QueryContext(ctx, "PRAGMA wal_checkpoint(FULL)", nil)
	if err == nil {
		vals := make([]driver.Value, 3) // busy, frames in the file, frames copied
		if rows.Next(vals) == nil {
			busy, _ := vals[0].(int64)
			frames, _ := vals[1].(int64)
			copied, _ := vals[2].(int64)
			w.secured = busy == 0 && frames == copied
		}
		rows.Close()
	}
	// Its error is dropped: the connection writes nothing more, and a
	// longer wait would cost only a refusal's time.
	_, _ = sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", writerBusyStep), nil)
}

// walLost is the engine's Lost: it looks at the -wal file the writer of
// db commits into at once, rather than at its next look (see committed),
// and reports whether it was removed or replaced, secured as committed
// does when it finds it so.
func walLost(ctx context.Context, db *sqlx.DB) (bool, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	var lost bool
	err = c.Raw(func(dc any) error { //nolint:contextcheck // the checkpoint that secures the removed -wal file's commits must not be cut short by ctx's end
		w, ok := dc.(*conn)
		if !ok || w.wal == nil {
			return nil
		}
		if !w.wal.removed {
			fi, err := os.Stat(w.wal.path)
			w.wal.foundGone(w.SQLiteConn, fi, err)
		}
		lost = w.wal.removed
		return nil
	})
	return lost, err
}

// walGone is the engine's Gone: whether the writer of db found its -wal
// file removed or replaced, or a look now finds it so. It neither takes
// nor waits for the writer, and stops no write: Lost does, or the
// writer's own next look.
func walGone(db *sqlx.DB) bool {
	d, ok := db.Driver().(*writerDriver)
	if !ok {
		return false
	}
	if d.shown.removed.Load() {
		return true
	}
	first := d.shown.file.Load()
	if first == nil {
		return false
	}
	fi, err := os.Stat(d.shown.path)
	return walReplaced(*first, fi, err)
}

// errWALRemoved is the error of every write on a writer whose -wal file
// was removed (see removal): SQLite's I/O error, code
// database_unavailable at the store.
var errWALRemoved = sqlite3.Error{Code: sqlite3.ErrIoErr, SystemErrno: syscall.ENOENT}

// removal returns the error of a write on the writer once its -wal file
// was found removed or replaced, nil before. What the writer would commit
// from then on would be in no file on disk but the unlinked one, lost at
// a crash (and a receiver's Ack for it a lie), so it writes nothing more
// until the database is opened again: once every connection to it has
// closed, SQLite copies the unlinked file into the database file, and the
// next opening starts a -wal file afresh. Until what the unlinked file
// holds is secured in the database file, each refusal tries again.
func (w *walBound) removal(sc *sqlite3.SQLiteConn) error {
	if w == nil || !w.removed {
		return nil
	}
	if !w.secured {
		w.secure(sc)
	}
	return fmt.Errorf("sqlite: %s was removed or replaced under the open database, whose commits would be lost at a crash: close the Store (or restart the process) and open it again: %w", w.path, errWALRemoved)
}

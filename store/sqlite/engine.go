package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/engine"
)

//go:embed sql
var sqlFiles embed.FS

var sqliteEngine = &engine.Engine{
	Name:         "sqlite",
	SQL:          must(fs.Sub(sqlFiles, "sql")),
	Placeholder:  func(int) string { return "?" },
	LastInsertID: true, // RETURNING costs a third more than last_insert_rowid here
	Tables:       tables,
	Objects:      objects,
	Interpret:    interpret,
	Writer:       writer,
	Listen:       listen,
	Wake:         wake,
	Lost:         walLost,
	Gone:         walGone,
	InTx:         inTx,
}

// tables amends the columns of courier's tables to SQLite's: a delivery's
// payload is in a table of its own, keyed by the delivery's id (migration
// 13), rather than a column of courier_outbox.
func tables(columns map[string][]string) {
	columns["courier_outbox"] = slices.DeleteFunc(columns["courier_outbox"], func(c string) bool { return c == "payload" })
	columns["courier_outbox_payload"] = []string{"id", "payload"}
}

// objects amends the indexes and triggers on courier's tables to
// SQLite's: a trigger deletes a delivery's payload with it (migration 13),
// and the replay cache's count takes two triggers (an insert, an update
// of expires_at) where PostgreSQL's one trigger fires for both.
func objects(objects map[string][]string) {
	objects["courier_outbox"] = append(objects["courier_outbox"], "trigger courier_outbox_payload_deleted")
	objects["courier_replay"] = append(objects["courier_replay"], "trigger courier_replay_recounted")
}

// inTx reports whether a go-sqlite3 connection (courier's, or the plain
// driver's) is in a transaction: not in autocommit mode.
func inTx(dc any) bool {
	c, ok := dc.(interface{ AutoCommit() bool })
	return ok && !c.AutoCommit()
}

func must(f fs.FS, err error) fs.FS {
	if err != nil {
		panic(err) // the embedded tree has a sql directory
	}
	return f
}

// errBusySnapshot names the fix for SQLITE_BUSY_SNAPSHOT, which only a
// transaction begun deferred meets (courier's own connections begin
// IMMEDIATE): the application's pool opened with go-sqlite3's defaults,
// whose transaction read from a snapshot that another connection's commit
// has since made stale, so that SQLite refuses its first write at once,
// whatever the busy timeout. Trying the statement again cannot pass.
var errBusySnapshot = errors.New("the transaction began deferred and read before it wrote, and another connection committed since: SQLite refuses its writes, whatever the busy timeout; roll it back, and begin such transactions with Store.Begin, or on a pool opened with sqlite.DSN's settings (BEGIN IMMEDIATE)")

// interpret reads go-sqlite3's errors.
func interpret(err error) engine.Failure {
	var e sqlite3.Error
	if !errors.As(err, &e) {
		return engine.Failure{}
	}
	switch e.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		if e.ExtendedCode == sqlite3.ErrBusySnapshot {
			return engine.Failure{Kind: engine.Busy, Err: fmt.Errorf("%w: %w", e, errBusySnapshot)}
		}
		return engine.Failure{Kind: engine.Busy}
	case sqlite3.ErrReadonly:
		return engine.Failure{Kind: engine.ReadOnly}
	case sqlite3.ErrFull, sqlite3.ErrNomem, sqlite3.ErrIoErr, sqlite3.ErrCantOpen:
		return engine.Failure{Kind: engine.Unavailable}
	case sqlite3.ErrCorrupt, sqlite3.ErrNotADB:
		return engine.Failure{Kind: engine.Corrupt}
	case sqlite3.ErrConstraint:
		return engine.Failure{Kind: engine.Constraint, Constraint: constraintName(e.Error())}
	case sqlite3.ErrError:
		if strings.HasPrefix(e.Error(), "no such table") {
			return engine.Failure{Kind: engine.Missing}
		}
	}
	return engine.Failure{}
}

// constraintName keeps the part of an SQLite constraint message that names
// the constraint, never values.
func constraintName(msg string) string {
	if _, after, ok := strings.Cut(msg, "failed: "); ok {
		return after
	}
	return "check"
}

// writer opens the one connection courier writes db's file through, with
// courier's settings: SQLite has one writer at a time, and writers that
// each hold a connection wait for one another in a busy handler that
// sleeps, and find their page cache dropped by one another's commits.
//
// An in-memory database is refused: each connection of a pool is a
// database of its own (or, shared, one that vanishes with the pool's
// last idle connection), so rows committed through one would be lost to
// the next.
//
// The file must be writable now: SQLite opens a file it may not write
// read-only, without a word, and every write would fail later. The
// writer's connection, as every one of DriverName, is refused before
// SQLite opens such a file (unwritable); checkWritable then asks SQLite
// itself, for a file that look let through and SQLite opened read-only
// all the same (where the kernel cannot say, and off Unix, where there
// is no look).
// Should SQLite find the database read-only after all, the connection is
// dropped and the next write opens the file afresh (see conn).
func writer(ctx context.Context, db *sqlx.DB, relaxed bool) (*sqlx.DB, bool, error) {
	file, err := mainFile(ctx, db)
	switch {
	case err != nil:
		return nil, false, err
	case file == "":
		return nil, false, &coded.Error{Code: courier.CodeConfigInvalid, Msg: "sqlite: the database is in memory, where each connection of a pool is a database of its own and committed rows are lost: open a file (in tests, one in t.TempDir())"}
	}
	durability := store.DurabilityFull
	if relaxed {
		durability = store.DurabilityRelaxed
	}
	w := openWriter(file, durability)
	if err := checkWritable(ctx, w, file); err != nil {
		w.Close()
		return nil, false, err
	}
	return w, true, nil
}

// openWriter returns the pool of the one connection courier writes file
// through.
func openWriter(file string, durability store.Durability) *sqlx.DB {
	w := sqlx.NewDb(sql.OpenDB(writerConnector(DSN(file, durability), file)), DriverName)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	return w
}

// checkWritable writes nothing, in a statement that needs the database
// writable: BEGIN IMMEDIATE succeeds on a file SQLite opened read-only,
// an UPDATE does not. SQLite refuses it on such a file before it asks
// for the write lock, so busy, the lock held by another connection (a
// process's long transaction, a bulk load), says the file can be
// written: the statement is tried once, on the writer's own short busy
// timeout (writerBusyStep), never waited for as a write is (waitBusy),
// so that an Open beside that process does not wait for the lock it has
// no use for yet, the busy timeout, and fail.
func checkWritable(ctx context.Context, w *sqlx.DB, file string) error {
	c, err := w.Conn(ctx)
	if err == nil {
		err = c.Raw(func(dc any) error {
			_, err := dc.(*conn).SQLiteConn.ExecContext(ctx, "UPDATE courier_schema SET version = version WHERE 0", nil)
			return err
		})
		c.Close()
	}
	switch {
	case isReadOnlyFile(err):
		return readOnlyFile(file, err)
	case isBusy(err):
		return nil
	case err != nil:
		return fmt.Errorf("sqlite: check that %s can be written: %w", file, err)
	}
	return nil
}

// isReadOnlyFile reports whether err is SQLite's "attempt to write a
// readonly database".
func isReadOnlyFile(err error) bool {
	var e sqlite3.Error
	return errors.As(err, &e) && e.Code == sqlite3.ErrReadonly
}

// readOnlyFile is SQLite's read-only error err, naming file and saying
// what to do about it; err itself when it says so already (a connection
// refused by unwritable).
func readOnlyFile(file string, err error) error {
	if said := (*readOnlyError)(nil); errors.As(err, &said) {
		return err
	}
	return &readOnlyError{file: file, err: err}
}

// readOnlyError is a database file this process may not write, and
// SQLite's read-only error for it.
type readOnlyError struct {
	file string
	err  error
}

func (e *readOnlyError) Error() string {
	return "sqlite: " + e.file + " cannot be written (SQLite opens it read-only): let this process write the file, its -wal and -shm files and its directory: " + e.err.Error()
}

func (e *readOnlyError) Unwrap() error { return e.err }

// cannotCreate is SQLite's error err for a database file at path it could
// not open, saying why when the cause is the path's rather than the
// database's: SQLite creates the file but not its directory, cannot
// create it in a directory this process may not write (its own error
// then says "no such file or directory", its read-only open's after the
// create was refused), and cannot open a directory as a database. It
// keeps err's code, as readOnlyFile does: the directory may yet appear
// (a volume mounted late), or be made writable. It returns nil for any
// other error. The driver wraps a connection's error in it
// (openFailure), for every pool of DriverName.
func cannotCreate(path string, err error) error {
	var e sqlite3.Error
	if !errors.As(err, &e) || e.Code != sqlite3.ErrCantOpen {
		return nil
	}
	var why string
	dir := filepath.Dir(path)
	if fi, serr := os.Stat(path); serr == nil && fi.IsDir() {
		why = path + " is a directory: name a file in it"
	} else if fi, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		why = "its directory " + dir + " does not exist: create it first (SQLite creates the file, not its directory)"
	} else if serr == nil && !fi.IsDir() {
		why = dir + " is not a directory"
	} else if errno, refused := refusesWrite(dirAccess(path, dir, serr == nil)); refused {
		why = "its directory " + dir + " cannot be written: let this process create files in it (SQLite creates the file there, and its -wal and -shm files beside it)"
		// SQLite's own errno is its read-only open's, ENOENT: the
		// directory's refusal is the one to say.
		err = sqlite3.Error{Code: e.Code, ExtendedCode: e.ExtendedCode, SystemErrno: errno}
	} else {
		return nil
	}
	return fmt.Errorf("sqlite: cannot open %s: %s: %w", path, why, err)
}

// dirAccess returns why this process may not write dir, the directory
// of the database file path, where dir is there (dirThere) and path is
// not: writeAccess's answer, or nil.
func dirAccess(path, dir string, dirThere bool) error {
	if !dirThere {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return writeAccess(dir)
	}
	return nil // there, or a failure SQLite's own error says
}

// mainFile returns the path of db's main database file, "" in memory.
func mainFile(ctx context.Context, db *sqlx.DB) (string, error) {
	var file string
	err := db.QueryRowxContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file)
	return file, err
}

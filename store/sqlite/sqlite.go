package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/engine"
)

// DriverName is the database/sql driver this package registers: go-sqlite3
// with hooks that tell workers in this process, within milliseconds, that
// an enqueue committed.
const DriverName = "courier-sqlite3"

func init() {
	sql.Register(DriverName, courierDriver)
	engine.Register(DriverName, sqliteEngine)
	engine.Register("sqlite3", sqliteEngine)
}

// Open opens (creating if needed) the SQLite database file at path,
// configured as DSN configures it, migrates courier's tables and returns
// the Store. The Store's DB() is a pool of its own for the application and
// for reads; Store.Close closes it. An in-memory database (":memory:") is
// refused, config_invalid: each connection of a pool is a database of its
// own there, and committed rows would be lost; in tests, open a file in
// t.TempDir(). The path is a file's name, never a URI:
// "file::memory:?cache=shared" names a file of that name in the working
// directory. The file's directory must exist: Open's error names it
// otherwise. A file this process may not write, or its -wal or -shm
// file, is refused, database_unavailable, on Unix before anything is
// created beside it (see the package doc).
func Open(ctx context.Context, path string, cfg store.Config) (*store.Store, error) {
	db, err := sqlx.Open(DriverName, DSN(path, cfg.Durability))
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx, db); err != nil {
		db.Close()
		if isReadOnlyFile(err) { // Migrate, with something to apply, writes first, to take the lock
			return nil, readOnlyFile(path, err)
		}
		return nil, err // a path that cannot be a file is said by the driver (cannotCreate)
	}
	engine.Adopt(db)
	s, err := store.Open(ctx, db, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// DSN returns the go-sqlite3 data source name courier opens path with:
// WAL, a busy timeout, foreign keys, BEGIN IMMEDIATE for every transaction
// but a read-only one (so writers queue instead of failing; with
// DriverName, a read-only transaction begins deferred and query_only, and
// waits for no writer), cached prepared statements, and
// synchronous=FULL, or NORMAL when durability is store.DurabilityRelaxed.
// The path is escaped, so any file name opens that file.
func DSN(path string, durability store.Durability) string {
	v := url.Values{}
	v.Set("_journal_mode", "WAL")
	v.Set("_busy_timeout", strconv.Itoa(busyTimeout))
	v.Set("_txlock", "immediate")
	v.Set("_foreign_keys", "1")
	v.Set("_synchronous", synchronous(durability))
	// Each connection keeps its prepared statements: compiling courier's
	// claim and settle statements again on every call costs more than
	// running them.
	v.Set("_stmt_cache_size", "128")
	return "file:" + escapePath(path) + "?" + v.Encode()
}

// synchronous is SQLite's synchronous setting for a durability. FULL
// syncs the WAL at every commit, so a committed transaction survives an
// OS crash or power loss: an Ack a receiver sent stays true. NORMAL syncs
// only at checkpoints: a crash of the process loses nothing, a crash of
// the machine can lose the latest commits.
func synchronous(d store.Durability) string {
	if d == store.DurabilityRelaxed {
		return "NORMAL"
	}
	return "FULL"
}

// escapePath percent-encodes what a file: URI would read as anything but
// the path: '%', '?' and '#'. SQLite decodes them back.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
}

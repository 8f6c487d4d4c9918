package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/url"
	"path/filepath"
	"sync"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"
)

// SQLiteDriver is the database/sql driver OpenSQLite registers: go-sqlite3
// with hooks that tell workers in this process, within milliseconds, that
// an enqueue committed. A database opened with the plain "sqlite3" driver
// works too; its workers find new rows by polling.
const SQLiteDriver = "courier-sqlite3"

func init() {
	sql.Register(SQLiteDriver, &sqlite3.SQLiteDriver{ConnectHook: hookCommits})
}

// OpenSQLite opens (creating if needed) the SQLite database file at path,
// configured the way courier needs it: WAL, a busy timeout, foreign keys,
// and BEGIN IMMEDIATE for every transaction so writers queue instead of
// failing. It migrates the schema and returns the Store.
//
// The Store writes through a connection of its own, one for the whole
// Store (see Store.Begin): SQLite has one writer at a time, and writers
// that each hold a connection wait for one another in a busy handler that
// sleeps, and find their page cache dropped by one another's commits.
// DB() is a pool of its own for the application and for reads.
func OpenSQLite(ctx context.Context, path string, cfg Config) (*Store, error) {
	db, err := sqlx.Open(SQLiteDriver, SQLiteDSN(path))
	if err != nil {
		return nil, wrapf(err, "open %s", filepath.Base(path))
	}
	if err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	s, err := Open(ctx, db, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	writer, err := sqlx.Open(SQLiteDriver, SQLiteDSN(path))
	if err != nil {
		db.Close()
		return nil, wrapf(err, "open %s", filepath.Base(path))
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	s.writer = writer
	s.closeFns = append(s.closeFns, func() { writer.Close() }, func() { db.Close() })
	return s, nil
}

// SQLiteDSN returns the go-sqlite3 data source name courier opens path
// with.
func SQLiteDSN(path string) string {
	v := url.Values{}
	v.Set("_journal_mode", "WAL")
	v.Set("_busy_timeout", "10000")
	v.Set("_txlock", "immediate")
	v.Set("_foreign_keys", "1")
	v.Set("_synchronous", "NORMAL")
	// Each connection keeps its prepared statements: compiling courier's
	// claim and settle statements again on every call costs more than
	// running them.
	v.Set("_stmt_cache_size", "128")
	return "file:" + path + "?" + v.Encode()
}

// Close releases what the Store opened itself (OpenSQLite's database).
func (s *Store) Close() error {
	for _, fn := range s.closeFns {
		fn()
	}
	s.closeFns = nil
	return nil
}

// sqliteWakeups fans commit notifications out per database file.
var sqliteWakeups = struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}{subs: make(map[string]map[chan struct{}]struct{})}

// hookCommits watches a connection: an insert into courier_outbox marks
// the transaction, and its commit wakes the database's listeners. The
// commit hook runs just before the commit completes; a woken worker's
// claim begins IMMEDIATE, so it waits for the commit and then sees the row.
func hookCommits(conn *sqlite3.SQLiteConn) error {
	file, err := mainFile(conn)
	if err != nil || file == "" { // in-memory databases are not shared
		return err
	}
	var mu sync.Mutex
	dirty := false
	conn.RegisterUpdateHook(func(op int, _ string, table string, _ int64) {
		if op == sqlite3.SQLITE_INSERT && table == "courier_outbox" {
			mu.Lock()
			dirty = true
			mu.Unlock()
		}
	})
	conn.RegisterCommitHook(func() int {
		mu.Lock()
		wake := dirty
		dirty = false
		mu.Unlock()
		if wake {
			notifySQLite(file)
		}
		return 0
	})
	conn.RegisterRollbackHook(func() {
		mu.Lock()
		dirty = false
		mu.Unlock()
	})
	return nil
}

// mainFile returns the path of a connection's main database file.
func mainFile(conn *sqlite3.SQLiteConn) (string, error) {
	rows, err := conn.Query("PRAGMA database_list", nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	for rows.Next(vals) == nil {
		if name, _ := vals[1].(string); name == "main" {
			file, _ := vals[2].(string)
			return file, nil
		}
	}
	return "", nil
}

func notifySQLite(file string) {
	sqliteWakeups.mu.Lock()
	defer sqliteWakeups.mu.Unlock()
	for ch := range sqliteWakeups.subs[file] {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// listenSQLite subscribes to the commits of the store's database file.
func listenSQLite(ctx context.Context, s *Store) (<-chan struct{}, func(), error) {
	var file string
	if err := s.db.QueryRowxContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file); err != nil {
		return nil, nil, wrapf(err, "listen")
	}
	ch := make(chan struct{}, 1)
	if file == "" {
		return ch, func() {}, nil // in-memory: polling only
	}
	sqliteWakeups.mu.Lock()
	if sqliteWakeups.subs[file] == nil {
		sqliteWakeups.subs[file] = make(map[chan struct{}]struct{})
	}
	sqliteWakeups.subs[file][ch] = struct{}{}
	sqliteWakeups.mu.Unlock()
	return ch, func() {
		sqliteWakeups.mu.Lock()
		delete(sqliteWakeups.subs[file], ch)
		if len(sqliteWakeups.subs[file]) == 0 {
			delete(sqliteWakeups.subs, file)
		}
		sqliteWakeups.mu.Unlock()
	}, nil
}

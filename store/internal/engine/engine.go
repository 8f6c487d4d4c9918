// Package engine is what an engine package (store/sqlite, store/postgres)
// hands package store: its SQL, how its driver's errors read, and the few
// things it does beyond SQL. An engine registers itself under the
// database/sql driver names it serves; package store looks it up by the
// driver name of the database a Store is opened on, so a program links
// only the engines it imports.
package engine

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io/fs"
	"sort"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// Engine is one database engine as package store uses it.
type Engine struct {
	// Name is what Store.Engine reports: "sqlite" or "postgres".
	Name string
	// SQL holds the engine's migrations/NNN_name.sql and queries/*.sql.
	// Every engine defines the same query names with the same :name
	// parameters.
	SQL fs.FS
	// Driver reports whether d, the database/sql driver of a pool whose
	// sqlx driver name is name (one of the engine's), is one the engine
	// works through (its Listen, InTx and Interpret read that driver's
	// connections and errors). Nil: any.
	Driver func(name string, d driver.Driver) bool
	// Placeholder writes the n-th (1-based) bind parameter.
	Placeholder func(n int) string
	// LastInsertID is true when the engine's outbox_enqueue reports the
	// new row's id through sql.Result.LastInsertId rather than a
	// RETURNING row.
	LastInsertID bool
	// Tables amends the columns the schema guard expects of courier's
	// tables, package store's list of them, the same on every engine,
	// where the engine's migrations make them otherwise: it is given that
	// list, table name to columns in order, to change in place. Nil: the
	// list as it is.
	Tables func(columns map[string][]string)
	// Objects amends, as Tables does the columns, the indexes and triggers
	// the schema guard expects on courier's tables: table name to each
	// object's kind and name ("trigger courier_replay_counted"), as the
	// engine's query schema_objects lists them. Nil: the list as it is.
	Objects func(objects map[string][]string)
	// Interpret says what kind of failure a driver error is.
	Interpret func(err error) Failure
	// Writer returns the pool courier's own writes go through for db, and
	// whether the Store owns it (and closes it); relaxed asks for commits
	// that may be lost when the machine (not the process) crashes. Nil: db
	// itself.
	Writer func(ctx context.Context, db *sqlx.DB, relaxed bool) (writer *sqlx.DB, owned bool, err error)
	// Listen returns wake-ups after committed enqueues to db's outbox and
	// after Wake, and a function that stops them. Nil: the engine has
	// none; workers poll.
	Listen func(ctx context.Context, db *sqlx.DB) (<-chan struct{}, func(), error)
	// ListenHoldsConn is true when Listen holds one of db's connections
	// until it is stopped.
	ListenHoldsConn bool
	// Isolation is the isolation level of the transactions the Store
	// begins (Store.Begin): one courier's statements rely on, whatever
	// the database's default. LevelDefault: the connection's.
	Isolation sql.IsolationLevel
	// Wake tells the workers listening on db that deliveries became due
	// by other means than an insert (a redrive, an Enable),
	// once that has committed. Nil: the engine has no wake-ups.
	Wake func(ctx context.Context, db *sqlx.DB) error
	// Lost reports whether a file of the database was found removed or
	// replaced under writer (the pool Writer returned), so that its
	// commits go to no file on disk (SQLite: the -wal file); the writer
	// then refuses every write. It waits for the writer. Nil: the engine
	// has no such file.
	Lost func(ctx context.Context, writer *sqlx.DB) (bool, error)
	// Gone is Lost at a glance, for Health, which is polled: whether the
	// writer found such a file removed or replaced, or a look at it now
	// finds it so. It neither takes nor waits for the writer, and stops
	// no write. Nil: the engine has no such file.
	Gone func(writer *sqlx.DB) bool
	// Clock reads the database's clock, which a Store whose Config.Now is
	// unset takes for its own, so that every process sharing the database
	// stamps leases and due times on one clock. Nil: the database runs on
	// this host (SQLite) and the process's clock is the database's.
	Clock func(ctx context.Context, db *sqlx.DB) (time.Time, error)
	// InTx reports whether a driver connection (as database/sql's
	// Conn.Raw hands it over) is inside a transaction: one an application
	// began on a *sql.Conn it gives the store, in which a transaction of
	// the store's own would nest. False for a connection it does not
	// know. Nil: the engine cannot tell.
	InTx func(driverConn any) bool
	// SchemaRecheck is how long a claim may rely on the schema fingerprint
	// (query schema_fingerprint) it last read, before reading it again:
	// zero reads it on every claim, for an engine that keeps a cheap
	// schema counter (SQLite's schema_version); PostgreSQL reads its
	// catalog, a round trip, so it reads it at most this often.
	SchemaRecheck time.Duration
}

// Kind is a class of driver failure package store treats alike.
type Kind int

// Kinds of failure.
const (
	Other       Kind = iota // anything else
	Busy                    // a lock or serialization conflict: try again
	Constraint              // a constraint refused a row
	ReadOnly                // the database cannot be written now
	Missing                 // a table or relation does not exist
	Denied                  // the connection's role lacks a privilege the statement needs
	Unavailable             // the database failed, not the statement: full, out of memory, an I/O error, shutting down
	Corrupt                 // the database's file is damaged, or is no database: no statement passes until it is restored
	Aborted                 // the transaction failed before, and runs no statement until it is rolled back
	Ended                   // the transaction was committed or rolled back already (as database/sql's sql.ErrTxDone)
)

// Failure is an interpreted driver error. Constraint names the constraint
// for Kind Constraint, never a value. Err, when set, stands in the
// store's error for the driver's, which must not be shown: it quotes the
// connection string, say, and with it a password.
type Failure struct {
	Kind       Kind
	Constraint string
	Err        error
}

var registry = struct {
	sync.RWMutex
	byDriver map[string]*Engine
}{byDriver: make(map[string]*Engine)}

// Register makes e the engine of databases opened with driver. It panics
// when driver already has an engine: two packages claim one driver.
func Register(driver string, e *Engine) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byDriver[driver]; dup {
		panic(fmt.Sprintf("store: engine for driver %q registered twice", driver))
	}
	registry.byDriver[driver] = e
}

// Lookup returns the engine registered for driver.
func Lookup(driver string) (*Engine, bool) {
	registry.RLock()
	defer registry.RUnlock()
	e, ok := registry.byDriver[driver]
	return e, ok
}

// Drivers returns the driver names with an engine, sorted.
func Drivers() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.byDriver))
	for d := range registry.byDriver {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// adopted holds databases an engine package opened for a Store it builds:
// the Store takes them over and closes them on Close.
var adopted sync.Map // *sqlx.DB -> struct{}

// Adopt marks db, opened by an engine package, as the Store's to close.
func Adopt(db *sqlx.DB) { adopted.Store(db, struct{}{}) }

// Adopted reports whether db was adopted, and forgets it.
func Adopted(db *sqlx.DB) bool {
	_, ok := adopted.LoadAndDelete(db)
	return ok
}

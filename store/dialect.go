package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/store/internal/engine"
)

// dialect is one engine with its SQL loaded: the named queries compiled
// for its placeholders, and its numbered migrations.
type dialect struct {
	*engine.Engine
	queries    map[string]*query
	migrations []engine.Migration
	tables     []table        // courier's tables on this engine, by name (see checkSchema)
	txOptions  *sql.TxOptions // of Store.Begin: the engine's Isolation, or nil
}

// dialects caches each engine's loaded dialect.
var dialects sync.Map // *engine.Engine -> func() (*dialect, error)

// dialectOf returns the dialect of the engine registered for a
// database/sql driver name.
func dialectOf(driver string) (*dialect, error) {
	e, ok := engine.Lookup(driver)
	if !ok {
		return nil, configError(fmt.Sprintf("no courier engine for database driver %q: import github.com/courier-go/courier/store/sqlite or .../store/postgres (engines for: %s)",
			driver, strings.Join(engine.Drivers(), ", ")))
	}
	load, _ := dialects.LoadOrStore(e, sync.OnceValues(func() (*dialect, error) { return loadDialect(e) }))
	return load.(func() (*dialect, error))()
}

// dialectOfDB returns the dialect of db's engine, refusing a driver
// registered under one of the engine's names that the engine cannot work
// through.
func dialectOfDB(db *sqlx.DB) (*dialect, error) {
	if db == nil {
		return nil, configError("the database is nil: open it first (see the engine packages)")
	}
	d, err := dialectOf(db.DriverName())
	if err != nil {
		return nil, err
	}
	if d.Driver != nil && !d.Driver(db.DriverName(), db.Driver()) {
		return nil, configError(fmt.Sprintf("database driver %q is a %T, not the driver courier's %s engine works through: open the database with the engine package's DriverName",
			db.DriverName(), db.Driver(), d.Name))
	}
	return d, nil
}

func loadDialect(e *engine.Engine) (*dialect, error) {
	d := &dialect{Engine: e}
	if e.Isolation != sql.LevelDefault {
		d.txOptions = &sql.TxOptions{Isolation: e.Isolation}
	}
	var err error
	if d.queries, err = loadQueries(e); err != nil {
		return nil, err
	}
	if d.migrations, err = e.Migrations(); err != nil {
		return nil, err
	}
	d.tables = tablesOf(e)
	return d, nil
}

func (d *dialect) query(name string) *query {
	q, ok := d.queries[name]
	if !ok {
		panic("store: " + d.Name + " has no query " + name)
	}
	return q
}

// Database failures, each courier.CodeDatabaseUnavailable (errCorrupt as
// the broader class of its own code).
var (
	errBusy        = &coded.Error{Code: courier.CodeDatabaseUnavailable, Msg: "database busy"} // a lock or serialization conflict: try again
	errReadOnly    = &coded.Error{Code: courier.CodeDatabaseUnavailable, Msg: "database is read-only"}
	errUnavailable = &coded.Error{Code: courier.CodeDatabaseUnavailable, Msg: "database failed"}
	// errCorrupt is a database whose file is damaged or is no database
	// (SQLite's SQLITE_CORRUPT, SQLITE_NOTADB), as Check and Health
	// report it: a case of database_unavailable, the database having
	// failed the operation, that no retry passes until the file is
	// restored.
	errCorrupt = &coded.Error{Code: courier.CodeDatabaseCorrupt, Msg: "database is damaged", Err: courier.CodeDatabaseUnavailable}
	// errAborted is a statement run in a transaction that failed before
	// it (PostgreSQL's 25P02): the caller's, which went on after a
	// failure. The database is fine; the transaction is lost, and is to
	// be rolled back (and run again whole, if what failed in it can pass
	// another time). Its code is the one of every failure that ends the
	// caller's transaction, so that a receiver answers it 503 and its
	// sender tries again, rather than give the notification up.
	errAborted = &coded.Error{Code: courier.CodeDatabaseUnavailable, Msg: "the transaction is aborted by an earlier failure in it: roll it back"}
)

// Failures that no retry mends, each courier.CodeConfigInvalid: the
// connection or transaction courier's statement ran on cannot reach its
// tables (an application's transaction on another database, or whose
// search_path leaves courier's schema out) or its role may not use them.
var (
	errNoTables = &coded.Error{Code: courier.CodeConfigInvalid, Msg: "courier's tables are not reachable on this connection: it reaches another database than the one migrated (on PostgreSQL, or a search_path that leaves courier's schema out)"}
	errDenied   = &coded.Error{Code: courier.CodeConfigInvalid, Msg: "the connection's role may not do this to courier's tables: grant it their privileges, or migrate as their owner"}
)

// errConstraint is what a violated constraint is a case of, in the
// error interpret makes of it: the rows written were refused
// (courier.CodePayloadInvalid).
var errConstraint = fmt.Errorf("constraint violated: %w", courier.CodePayloadInvalid)

// refusedByTheDatabase returns err, from an operation whose writes the
// caller's input does not shape (Redrive and Cancel move stored rows by
// id; Endpoints.Enable, Endpoints.Disable and Contracts.FailMismatched
// write what courier decides for the endpoint named; the Inbox records a
// key checkKey let through), with a violated constraint made CodeInternal
// rather than CodeInvalidArgument: a rule of the database's (a trigger, a
// CHECK of someone else's) refused the write, and no other input would
// pass it. It is given the error before
// the operation wraps it in words of its own: what it returns keeps the
// query's name, not what err's chain held around it.
func refusedByTheDatabase(err error) error {
	var qe *queryError
	if errors.As(err, &qe) && qe.err.Code == courier.CodeInvalidArgument {
		return &queryError{query: qe.query, err: &coded.Error{Code: courier.CodeInternal, Msg: "the database refused the write: " + qe.err.Msg, Err: errConstraint}}
	}
	return err
}

// queryError is a violated constraint of the named query, as interpret
// reports it: the query's name kept apart from the error, so that
// refusedByTheDatabase can give the same query another code.
type queryError struct {
	query string
	err   *coded.Error // its Err is errConstraint
}

func (e *queryError) Error() string { return "store: " + e.query + ": " + e.err.Error() }
func (e *queryError) Unwrap() error { return e.err }

// interpret translates driver errors at the store boundary, so no caller
// imports a driver to inspect one: a driver's failure is
// courier.CodeDatabaseUnavailable (the driver's error stays in the chain,
// for the log), a damaged file CodeDatabaseCorrupt, which is a case of
// it (errors.Is holds for both), a table out of reach or a privilege missing
// CodeConfigInvalid, a violated constraint CodeInvalidArgument (the rows an
// enqueue writes are its caller's; see refusedByTheDatabase). An error that
// has a code already, a context's end and sql.ErrNoRows pass through,
// wrapped with the query name.
func (d *dialect) interpret(name string, err error) error {
	if err == nil {
		return nil
	}
	f := d.Interpret(err)
	if f.Err != nil {
		err = f.Err
	}
	switch f.Kind {
	case engine.Busy:
		return fmt.Errorf("store: %s: %w: %w", name, errBusy, err)
	case engine.ReadOnly:
		return fmt.Errorf("store: %s: %w: %w", name, errReadOnly, err)
	case engine.Corrupt:
		return fmt.Errorf("store: %s: %w: %w", name, errCorrupt, err)
	case engine.Aborted:
		return fmt.Errorf("store: %s: %w: %w", name, errAborted, err)
	case engine.Missing:
		return fmt.Errorf("store: %s: %w: %w", name, errNoTables, err)
	case engine.Denied:
		return fmt.Errorf("store: %s: %w: %w", name, errDenied, err)
	case engine.Constraint:
		return &queryError{query: name, err: &coded.Error{Code: courier.CodeInvalidArgument, Msg: "constraint violated: " + f.Constraint, Err: errConstraint}}
	}
	if courier.CodeOf(err) != "" || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: %s: %w", name, err)
	}
	return fmt.Errorf("store: %s: %w: %w", name, errUnavailable, err)
}

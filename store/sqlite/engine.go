package sqlite

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

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
	Interpret:    interpret,
	Writer:       writer,
	Listen:       listen,
}

func must(f fs.FS, err error) fs.FS {
	if err != nil {
		panic(err) // the embedded tree has a sql directory
	}
	return f
}

// interpret reads go-sqlite3's errors.
func interpret(err error) engine.Failure {
	var e sqlite3.Error
	if !errors.As(err, &e) {
		return engine.Failure{}
	}
	switch e.Code {
	case sqlite3.ErrBusy, sqlite3.ErrLocked:
		return engine.Failure{Kind: engine.Busy}
	case sqlite3.ErrReadonly:
		return engine.Failure{Kind: engine.ReadOnly}
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
// sleeps, and find their page cache dropped by one another's commits. An
// in-memory database is written through db itself (another connection
// would be another database).
func writer(ctx context.Context, db *sqlx.DB, relaxed bool) (*sqlx.DB, bool, error) {
	file, err := mainFile(ctx, db)
	if err != nil || file == "" {
		return db, false, err
	}
	durability := store.DurabilityFull
	if relaxed {
		durability = store.DurabilityRelaxed
	}
	w, err := sqlx.Open(DriverName, DSN(file, durability))
	if err != nil {
		return nil, false, err
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	return w, true, nil
}

// mainFile returns the path of db's main database file, "" in memory.
func mainFile(ctx context.Context, db *sqlx.DB) (string, error) {
	var file string
	err := db.QueryRowxContext(ctx, "SELECT file FROM pragma_database_list WHERE name = 'main'").Scan(&file)
	return file, err
}

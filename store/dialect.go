package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
)

// dialect is one engine's SQL and the few behaviours that differ in Go.
type dialect struct {
	name       string
	queries    map[string]*query
	migrations []migration
	// listen returns wake-ups after committed enqueues, where the engine
	// can give them, for the database behind db.
	listen func(ctx context.Context, s *Store) (<-chan struct{}, func(), error)
	// insert runs an INSERT ... ON CONFLICT DO NOTHING and returns the new
	// row's id, or sql.ErrNoRows when it inserted nothing.
	insert func(ctx context.Context, x DBTX, q *query, args map[string]any) (int64, error)
}

// insertReturning reads the id from the statement's RETURNING clause.
func insertReturning(ctx context.Context, x DBTX, q *query, args map[string]any) (int64, error) {
	var id int64
	err := x.QueryRowContext(ctx, q.text, q.args(args)...).Scan(&id)
	return id, err
}

// insertLastID executes the statement and takes the id from the driver.
func insertLastID(ctx context.Context, x DBTX, q *query, args map[string]any) (int64, error) {
	res, err := x.ExecContext(ctx, q.text, q.args(args)...)
	if err != nil {
		return 0, err
	}
	switch n, err := res.RowsAffected(); {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, sql.ErrNoRows
	}
	return res.LastInsertId()
}

var (
	dialectsOnce sync.Once
	dialects     map[string]*dialect
	dialectsErr  error
)

// dialectOf returns the dialect for a database/sql driver name.
func dialectOf(driver string) (*dialect, error) {
	dialectsOnce.Do(func() {
		dialects = make(map[string]*dialect)
		for name, ph := range map[string]placeholder{"sqlite": questionMark, "postgres": dollarNumber} {
			d := &dialect{name: name}
			if d.queries, dialectsErr = loadQueries(name, ph); dialectsErr != nil {
				return
			}
			if d.migrations, dialectsErr = loadMigrations(name); dialectsErr != nil {
				return
			}
			dialects[name] = d
		}
		dialects["sqlite"].listen, dialects["sqlite"].insert = listenSQLite, insertLastID
		dialects["postgres"].listen, dialects["postgres"].insert = listenPostgres, insertReturning
	})
	if dialectsErr != nil {
		return nil, dialectsErr
	}
	d, ok := dialects[driverFamily(driver)]
	if !ok {
		return nil, configError(fmt.Sprintf("unsupported database driver %q", driver))
	}
	return d, nil
}

func (d *dialect) query(name string) *query {
	q, ok := d.queries[name]
	if !ok {
		panic("store: " + d.name + " has no query " + name)
	}
	return q
}

// errBusy is an engine's "try again": a lock or serialization conflict.
var errBusy = errors.New("store: database busy")

// interpret translates driver errors at the store boundary, so no caller
// imports a driver to inspect one. Other errors pass through, wrapped with
// the query name.
func (d *dialect) interpret(name string, err error) error {
	if err == nil {
		return nil
	}
	var sqliteErr sqlite3.Error
	if errors.As(err, &sqliteErr) {
		switch sqliteErr.Code {
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			return fmt.Errorf("store: %s: %w: %v", name, errBusy, err)
		case sqlite3.ErrConstraint:
			return fmt.Errorf("store: %s: %w", name, courier.Wrap(courier.ErrPayloadInvalid, courier.CodeInvalidArgument, "constraint violated: "+constraintName(sqliteErr.Error())))
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "40001" || pgErr.Code == "40P01" || pgErr.Code == "55P03":
			return fmt.Errorf("store: %s: %w: %v", name, errBusy, err)
		case strings.HasPrefix(pgErr.Code, "23"):
			return fmt.Errorf("store: %s: %w", name, courier.Wrap(courier.ErrPayloadInvalid, courier.CodeInvalidArgument, "constraint violated: "+pgErr.ConstraintName))
		}
	}
	return fmt.Errorf("store: %s: %w", name, err)
}

// constraintName keeps the part of an SQLite constraint message that names
// the constraint, never values.
func constraintName(msg string) string {
	if _, after, ok := strings.Cut(msg, "failed: "); ok {
		return after
	}
	return "check"
}

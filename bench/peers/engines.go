package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// plainSQLite is go-sqlite3's own driver name, which River's SQLite
// driver runs over: courier's store/sqlite registers a driver of its own
// (with commit hooks for its workers) and leaves this one as it is.
const plainSQLite = "sqlite3"

// engine is one database engine both sides are measured on. Each round
// gives each side a fresh database of its own: a file in dir on SQLite, a
// database on the server at adminURL on PostgreSQL.
type engine struct {
	name     string // "sqlite" or "postgres"
	dir      string // sqlite: the folder of the database files
	adminURL string // postgres: the server's admin URL
	server   string // postgres: where the server came from and how it is set
	pool     int    // postgres: each side's connection pool size
}

// setup says how each side is configured on the engine, for the report.
func (e *engine) setup() []string {
	switch e.name {
	case "sqlite":
		return []string{
			"courier: store/sqlite.Open with its default durability (DurabilityFull: WAL, synchronous=FULL)",
			"River:   riversqlite over go-sqlite3 on its own file with the same DSN (WAL, synchronous=FULL),",
			"         one connection (SetMaxOpenConns(1), as riversqlite's documentation asks)",
			"both:    a fresh file each per round; no ANALYZE (an application's SQLite file seldom has statistics)",
		}
	default:
		return []string{
			"server:  " + e.server,
			fmt.Sprintf("courier: store.Open over pgx's database/sql driver, pool of %d (open and idle)", e.pool),
			fmt.Sprintf("River:   riverpgxv5 over a pgxpool of %d connections", e.pool),
			"both:    a fresh database each per round; its table ANALYZEd before delivery (autovacuum's part in a live system)",
		}
	}
}

// openEngines prepares the engines named (benchkit.OpenEngines), each
// PostgreSQL one with a pool of pool connections.
func openEngines(ctx context.Context, names []string, pool int) ([]*engine, []string, func(), error) {
	return benchkit.OpenEngines(ctx, names, func(k benchkit.Engine) *engine {
		return &engine{name: k.Name, dir: k.Dir, adminURL: k.AdminURL, server: k.About, pool: pool}
	})
}

// openCourier opens a fresh, migrated courier Store named label.
func (e *engine) openCourier(ctx context.Context, label string, c courierConfig) (*courierSide, error) {
	switch e.name {
	case "sqlite":
		s, err := sqlite.Open(ctx, filepath.Join(e.dir, label+".db"), store.Config{})
		if err != nil {
			return nil, fmt.Errorf("courier on sqlite: %w", err)
		}
		return &courierSide{s: s, cfg: c, release: s.Close}, nil
	default:
		url, drop, err := pgtest.NewDatabase(ctx, e.adminURL)
		if err != nil {
			return nil, fmt.Errorf("courier on postgres: %w", err)
		}
		db, err := sqlx.Open(postgres.DriverName, url)
		if err != nil {
			return nil, dropAfter(ctx, drop, err)
		}
		db.SetMaxOpenConns(e.pool)
		db.SetMaxIdleConns(e.pool)
		if err := store.Migrate(ctx, db); err != nil {
			db.Close()
			return nil, dropAfter(ctx, drop, fmt.Errorf("courier on postgres: migrate: %w", err))
		}
		s, err := store.Open(ctx, db, store.Config{})
		if err != nil {
			db.Close()
			return nil, dropAfter(ctx, drop, fmt.Errorf("courier on postgres: %w", err))
		}
		return &courierSide{s: s, cfg: c, analyze: true, release: func() error {
			return dropAfter(ctx, drop, errors.Join(s.Close(), db.Close()))
		}}, nil
	}
}

// openRiver opens a fresh database named label with River's tables
// migrated, and a River client on it.
func (e *engine) openRiver(ctx context.Context, label string, c riverConfig) (side, error) {
	switch e.name {
	case "sqlite":
		db, err := sql.Open(plainSQLite, sqlite.DSN(filepath.Join(e.dir, label+".db"), store.DurabilityFull))
		if err != nil {
			return nil, fmt.Errorf("river on sqlite: %w", err)
		}
		db.SetMaxOpenConns(1)
		r, err := newRiverSide(ctx, riversqlite.New(db), c, riverDB[*sql.Tx]{
			begin:    func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, nil) },
			commit:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
			rollback: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
			count: func(ctx context.Context, q string) (n int, err error) {
				err = db.QueryRowContext(ctx, q).Scan(&n)
				return n, err
			},
			close: db.Close,
		})
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("river on sqlite: %w", err)
		}
		return r, nil
	default:
		url, drop, err := pgtest.NewDatabase(ctx, e.adminURL)
		if err != nil {
			return nil, fmt.Errorf("river on postgres: %w", err)
		}
		pc, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, dropAfter(ctx, drop, err)
		}
		pc.MaxConns = int32(e.pool)
		pool, err := pgxpool.NewWithConfig(ctx, pc)
		if err != nil {
			return nil, dropAfter(ctx, drop, err)
		}
		r, err := newRiverSide(ctx, riverpgxv5.New(pool), c, riverDB[pgx.Tx]{
			begin:    pool.Begin,
			commit:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
			rollback: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
			count: func(ctx context.Context, q string) (n int, err error) {
				err = pool.QueryRow(ctx, q).Scan(&n)
				return n, err
			},
			analyze: func(ctx context.Context) error {
				_, err := pool.Exec(ctx, "ANALYZE river_job")
				return err
			},
			close: func() error {
				pool.Close()
				return dropAfter(ctx, drop, nil)
			},
		})
		if err != nil {
			pool.Close()
			return nil, dropAfter(ctx, drop, fmt.Errorf("river on postgres: %w", err))
		}
		return r, nil
	}
}

// dropAfter drops a PostgreSQL database once what used it is closed, and
// returns err joined with the drop's error.
func dropAfter(ctx context.Context, drop func(context.Context) error, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return errors.Join(err, drop(ctx))
}

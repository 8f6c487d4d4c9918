package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// dbFlag adds -db to fs.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the database: a SQLite file path, or a PostgreSQL URL (postgres://…)")
}

// isPostgres reports whether -db names a PostgreSQL database.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openDB opens the database -db names, without checking courier's tables.
func openDB(db string) (*sqlx.DB, error) {
	if db == "" {
		return nil, errors.New("-db is required")
	}
	if isPostgres(db) {
		return sqlx.Open(postgres.DriverName, db)
	}
	return sqlx.Open(sqlite.DriverName, sqlite.DSN(db, store.DurabilityFull))
}

// openStore opens the Store over -db. A SQLite file must exist: the tool
// does not create databases except through migrate.
func openStore(ctx context.Context, db string) (*store.Store, func(), error) {
	if db != "" && !isPostgres(db) {
		if _, err := os.Stat(db); err != nil {
			return nil, nil, err
		}
	}
	d, err := openDB(db)
	if err != nil {
		return nil, nil, err
	}
	s, err := store.Open(ctx, d, store.Config{})
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return s, func() { s.Close(); d.Close() }, nil
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// dbFlag adds -db to fs.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the database: a SQLite file path, or a PostgreSQL URL (postgres://…) or keyword/value string (host=… dbname=…)")
}

// postgresSchemes are the URL schemes of a PostgreSQL connection string, as
// pgx spells them: it takes them in lower case only.
var postgresSchemes = []string{"postgres://", "postgresql://"}

// keywordValue matches the start of a libpq keyword/value connection string
// (host=db user=app …): a keyword, then =. libpq takes any string with an =
// for one; a path whose first word is not a keyword stays a path.
var keywordValue = regexp.MustCompile(`^\s*[A-Za-z_]+\s*=`)

// postgresDSN reports whether -db names a PostgreSQL database, and returns
// its connection string as pgx takes it: a postgres:// or postgresql:// URL,
// its scheme in any case (URL schemes are case-insensitive), or a libpq
// keyword/value string. Anything else is a SQLite file path.
func postgresDSN(db string) (string, bool) {
	for _, scheme := range postgresSchemes {
		if len(db) >= len(scheme) && strings.EqualFold(db[:len(scheme)], scheme) {
			return scheme + db[len(scheme):], true
		}
	}
	return db, keywordValue.MatchString(db)
}

// isPostgres reports whether -db names a PostgreSQL database.
func isPostgres(db string) bool {
	_, ok := postgresDSN(db)
	return ok
}

// openDB opens the database -db names, without checking courier's tables.
// No error of its, openStore's or dbError's quotes -db, which may hold a
// password.
func openDB(db string) (*sqlx.DB, error) {
	if db == "" {
		return nil, usageFailure("-db is required")
	}
	if dsn, ok := postgresDSN(db); ok {
		return sqlx.Open(postgres.DriverName, dsn)
	}
	return sqlx.Open(sqlite.DriverName, sqlite.DSN(db, store.DurabilityFull))
}

// openStore opens the Store over -db with cfg. A SQLite file must exist:
// the tool does not create databases except through migrate.
func openStore(ctx context.Context, db string, cfg store.Config) (*store.Store, func(), error) {
	if db != "" && !isPostgres(db) {
		if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, errors.New("the -db SQLite file: no such file (courier migrate creates it)")
		} else if err != nil {
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				err = pathErr.Err // without the path
			}
			return nil, nil, fmt.Errorf("the -db SQLite file: %w", err)
		}
	}
	d, err := openDB(db)
	if err != nil {
		return nil, nil, err
	}
	s, err := store.Open(ctx, d, cfg)
	if err != nil {
		d.Close()
		return nil, nil, dbError(err)
	}
	return s, func() { s.Close(); d.Close() }, nil
}

// dbError returns err, from the first use of the -db database, without
// -db in its message: pgx quotes a connection string it cannot parse,
// redacting a password only as best it can, so that error becomes one
// that does not quote it.
func dbError(err error) error {
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return errors.New("the -db database: not a PostgreSQL connection string pgx can parse (not shown: it may hold a password)")
	}
	return err
}

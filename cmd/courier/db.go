package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// dbFlag adds -db to fs.
func dbFlag(fs *flag.FlagSet) *string {
	return fs.String("db", "", "the database: a SQLite file path, or a PostgreSQL URL (postgres://…) or keyword/value string (host=… dbname=…), its password best left to $PGPASSWORD or ~/.pgpass")
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

// sqliteURI reports whether -db, naming no PostgreSQL database, reads as a
// SQLite URI or a go-sqlite3 DSN (file:app.db, app.db?_auth_pass=…) rather
// than a file path. The tool takes a path and sets the connection's
// parameters itself (sqlite.DSN escapes the path), so such a -db would name
// a file of that whole string, its parameters, a password among them, in
// the name: migrate would create it, empty, beside the application's.
func sqliteURI(db string) bool {
	return fileURI(db) || strings.Contains(db, "?")
}

// fileURI reports whether db is a SQLite URI: file:, in any case.
func fileURI(db string) bool {
	return len(db) >= len("file:") && strings.EqualFold(db[:len("file:")], "file:")
}

// otherURL matches the start of a URL (scheme://, the scheme allowed a :
// of its own, as jdbc:postgresql:// has): a -db so written that names no
// PostgreSQL database is another engine's, or a PostgreSQL URL with its
// scheme misspelt, not a SQLite file path.
var otherURL = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.:-]*://`)

// checkDB refuses a -db that names no database the tool opens: none, a
// SQLite URI or DSN (sqliteURI), or a URL of another scheme than
// PostgreSQL's, which as a SQLite path would name a file in a directory
// named after its scheme: migrate -print wrote SQLite's SQL for it, and
// the other commands said to create that directory.
func checkDB(db string) error {
	switch {
	case db == "":
		return usageFailure("-db is required")
	case !isPostgres(db) && otherURL.MatchString(db) && !fileURI(db): // a file: URI is sqliteURI's
		return usageFailure("-db is a URL of a scheme courier does not take (not shown: it may hold a password): a PostgreSQL URL starts postgres:// or postgresql://, and a SQLite file is named by its path (./ before a relative one that holds ://)")
	case !isPostgres(db) && sqliteURI(db):
		return usageFailure("-db is a SQLite file path, not a file: URI or a DSN with ?parameters (not shown: it may hold a password); courier sets the connection's parameters itself")
	case isPostgres(db) && cutPassword(db):
		return usageFailure("-db is a PostgreSQL URL with an @ after its host, as when its password holds a /, ? or # (not shown): percent-encode them in the password (%2F, %3F, %23, and an @ as %40)")
	}
	return nil
}

// cutPassword reports whether the PostgreSQL URL db holds an @ in its
// path, after its host: a password holding a / not percent-encoded ends
// the host there, and the rest of it becomes the database name, which
// pgx's connection errors quote.
func cutPassword(db string) bool {
	_, rest, ok := strings.Cut(db, "://")
	if !ok {
		return false // a keyword/value string
	}
	end := strings.IndexAny(rest, "/?#") // of the host
	if end < 0 || rest[end] != '/' {
		return false
	}
	path := rest[end:]
	if q := strings.IndexAny(path, "?#"); q >= 0 {
		path = path[:q]
	}
	return strings.Contains(path, "@")
}

// openDB opens the database -db names, without checking courier's tables,
// for migrate: a SQLite file with sqlite.DSN's settings, which turn a new
// file, or one migrate makes courier's, to WAL. No error of its,
// openStore's or dbError's quotes -db, which may hold a password.
func openDB(db string) (*sqlx.DB, error) {
	return openPool(db, true)
}

// openPool is openDB's and openStore's: its SQLite connections set the
// file's journal mode (WAL) only when setWAL is true, migrate's;
// openStore's leave it as they find it (see withoutJournalMode).
func openPool(db string, setWAL bool) (*sqlx.DB, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	if dsn, ok := postgresDSN(db); ok {
		// pgx parses the string at each connection, and the store says
		// only that it did not parse, whatever the reason: parsed here
		// first, a file it names that cannot be read is named.
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, dbError(err)
		}
		if cfg.ConnectTimeout == 0 {
			dsn = withConnectTimeout(dsn)
		}
		return sqlx.Open(postgres.DriverName, dsn)
	}
	if err := checkSQLitePath(db); err != nil {
		return nil, err
	}
	dsn := sqlite.DSN(db, store.DurabilityFull)
	if !setWAL {
		dsn = withoutJournalMode(dsn)
	}
	return sqlx.Open(sqlite.DriverName, dsn)
}

// withoutJournalMode returns the go-sqlite3 DSN dsn, sqlite.DSN's, without
// its journal mode, so that its connections leave the file's as they find
// it: turning a file to WAL rewrites its header. Every command but migrate
// opens a file courier migrated, in WAL mode already (the Store's writer,
// opened once store.Open found the file courier's, sets it too), and
// leaves any other file, which store.Open refuses, byte for byte as it
// was. sqlite.DSN escapes the path: its first ? starts the parameters.
func withoutJournalMode(dsn string) string {
	name, params, _ := strings.Cut(dsn, "?")
	v, _ := url.ParseQuery(params) // sqlite.DSN's own encoding
	v.Del("_journal_mode")
	return name + "?" + v.Encode()
}

// checkSQLitePath refuses a -db SQLite path that cannot name a database
// file, saying what is wrong and what to do: SQLite creates the file but
// not its directory, and opens no directory as a database, and its own
// error for each is "unable to open database file". (store/sqlite's
// driver says as much, naming the path; the tool says it first, without
// the path, as it quotes no -db.)
func checkSQLitePath(db string) error {
	if fi, err := os.Stat(db); err == nil && fi.IsDir() {
		return errors.New("-db is a directory, not a SQLite file: name a file in it")
	}
	switch fi, err := os.Stat(filepath.Dir(db)); {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("the -db SQLite file's directory does not exist: create it first (SQLite, and so courier migrate, creates the file, not its directory)")
	case errors.Is(err, syscall.ENOTDIR) || (err == nil && !fi.IsDir()):
		return errors.New("the -db SQLite file's directory is not a directory: a file stands in its path")
	}
	return nil
}

// connectTimeout is how long, in seconds, the tool waits for a PostgreSQL
// server to take a connection when neither -db nor $PGCONNECT_TIMEOUT says
// (the connection is tried twice: a command gives up after 10 seconds, as
// TestAServerThatNeverAnswersIsGivenUpOn measures): pgx waits for ever by
// default, and a server that takes the TCP connection and never
// answers (stopped mid-failover, behind a firewall that swallows packets)
// would hold health, run from cron or a monitor, until it was killed.
const connectTimeout = "5"

// withConnectTimeout returns the PostgreSQL connection string dsn with
// connect_timeout set to connectTimeout seconds, as a URL's query
// parameter or a keyword/value pair.
func withConnectTimeout(dsn string) string {
	if !keywordValue.MatchString(dsn) {
		sep := "?"
		if hasQuery(dsn) {
			sep = "&"
		}
		return dsn + sep + "connect_timeout=" + connectTimeout
	}
	return dsn + " connect_timeout=" + connectTimeout
}

// hasQuery reports whether the PostgreSQL URL dsn has a query. Its
// userinfo is not looked in: pgx, as libpq, ends the userinfo at the
// first @ before any /, so a password may hold a ? that starts no query,
// and a parameter added after it would end the database name instead.
func hasQuery(dsn string) bool {
	_, rest, _ := strings.Cut(dsn, "://")
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		rest = rest[i+1:]
	}
	return strings.Contains(rest, "?")
}

// openStore opens the Store over -db with cfg. A SQLite file must exist:
// the tool does not create databases except through migrate.
func openStore(ctx context.Context, db string, cfg store.Config) (*store.Store, func(), error) {
	d, err := openPool(db, false) // -db checked; no connection made yet, so no file created
	if err != nil {
		return nil, nil, err
	}
	if err := sqliteFileExists(db); err != nil {
		d.Close()
		return nil, nil, err
	}
	s, err := store.Open(ctx, d, cfg)
	if err != nil {
		d.Close()
		return nil, nil, dbError(err)
	}
	return s, func() { s.Close(); d.Close() }, nil
}

// sqliteFileExists refuses a -db SQLite file that is not there (or
// cannot be looked at), before its first connection would create it
// empty; a PostgreSQL -db passes.
func sqliteFileExists(db string) error {
	if isPostgres(db) {
		return nil
	}
	if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
		return errors.New("the -db SQLite file: no such file (courier migrate creates it)")
	} else if err != nil {
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // without the path
		}
		return fmt.Errorf("the -db SQLite file: %w", err)
	}
	return nil
}

// dbError returns err, from the first use of the -db database, without
// -db in its message: pgx quotes a connection string it cannot parse,
// redacting a password only as best it can, so that error becomes one
// that does not quote it, and names no more than a file the string names
// that could not be read (a certificate or key, a service file), by its
// path. A string that does not parse is a usage error: the same command
// line would fail again.
func dbError(err error) error {
	var parseErr *pgconn.ParseConfigError
	if !errors.As(err, &parseErr) {
		return err
	}
	if pathErr := (*fs.PathError)(nil); errors.As(parseErr.Unwrap(), &pathErr) {
		return fmt.Errorf("the -db database: a file its connection string names: %w", pathErr)
	}
	return usageFailure("the -db database: not a PostgreSQL connection string pgx can parse (not shown: it may hold a password)")
}

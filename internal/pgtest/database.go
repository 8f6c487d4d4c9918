package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The statements run on the admin connection. Identifiers are quoted with
// pgx.Identifier before they are substituted for %s.
const (
	// createDatabaseSQL copies template0, which nobody connects to or
	// changes: the copy is empty even on a shared server whose template1
	// holds objects or has a session open, which would make the copy fail.
	createDatabaseSQL = `CREATE DATABASE %s TEMPLATE template0`
	// createDatabaseICUSQL is createDatabaseSQL with a locale's collation
	// (PostgreSQL 15 or later, built with ICU), as most installations
	// have: courier's tests then see the collation its users' databases
	// sort and compare text by, rather than the server's byte order.
	createDatabaseICUSQL = createDatabaseSQL + ` LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'`
	serverVersionSQL     = `SELECT current_setting('server_version_num')::int`
	// dropDatabaseForceSQL needs PostgreSQL 13 or later. FORCE terminates the
	// database's backends and keeps new ones out while it drops.
	dropDatabaseForceSQL = `DROP DATABASE IF EXISTS %s WITH (FORCE)`
	// Before PostgreSQL 13, keep new backends out, terminate the database's
	// backends, then drop.
	disallowConnectionsSQL = `ALTER DATABASE %s WITH ALLOW_CONNECTIONS false`
	terminateBackendsSQL   = `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid()`
	dropDatabaseSQL = `DROP DATABASE IF EXISTS %s`
)

// undefinedDatabase is the SQLSTATE of errors about a database that does not
// exist.
const undefinedDatabase = "3D000"

// databasePrefix starts the name of every database pgtest creates, so that
// leftovers on a shared server are easy to recognise.
const databasePrefix = "courier_"

// createDatabase creates an empty database with a unique name on the server
// at adminURL and returns its name and URL.
func createDatabase(ctx context.Context, adminURL string) (name, dbURL string, err error) {
	name = newDatabaseName()
	dbURL, err = databaseURL(adminURL, name)
	if err != nil {
		return "", "", err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", "", fmt.Errorf("connecting to create a database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, fmt.Sprintf(createDatabaseICUSQL, ident)); err == nil {
		return name, dbURL, nil
	}
	// An older server, or one without ICU: the server's default collation.
	if _, err := conn.Exec(ctx, fmt.Sprintf(createDatabaseSQL, ident)); err != nil {
		return "", "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return name, dbURL, nil
}

// newDatabaseName returns a unique name for a database pgtest creates.
func newDatabaseName() string {
	return databasePrefix + strings.ToLower(rand.Text())
}

// dropDatabase drops the database name, and any connections to it, from the
// server at adminURL.
func dropDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to drop database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var version int
	if err := conn.QueryRow(ctx, serverVersionSQL).Scan(&version); err != nil {
		return fmt.Errorf("dropping database %s: reading server version: %w", name, err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	if version >= 130000 {
		_, err = conn.Exec(ctx, fmt.Sprintf(dropDatabaseForceSQL, ident))
	} else {
		err = dropDatabaseOld(ctx, conn, name, ident)
	}
	if err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// dropDatabaseOld drops the database name, quoted as ident, from a server
// older than PostgreSQL 13, which has no DROP DATABASE ... WITH (FORCE).
func dropDatabaseOld(ctx context.Context, conn *pgx.Conn, name, ident string) error {
	if _, err := conn.Exec(ctx, fmt.Sprintf(disallowConnectionsSQL, ident)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == undefinedDatabase {
			return nil // already gone
		}
		return err
	}
	if _, err := conn.Exec(ctx, terminateBackendsSQL, name); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, fmt.Sprintf(dropDatabaseSQL, ident))
	return err
}

// databaseURL returns adminURL with its database replaced by name.
func databaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		// url.Error quotes the URL, which may hold a password.
		return "", fmt.Errorf("%s is not a URL", envURL)
	}
	u.Path, u.RawPath = "/"+name, ""
	if q := u.Query(); q.Has("dbname") {
		q.Del("dbname")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// checkURL reports whether adminURL, from COURIER_PG_URL, is a PostgreSQL URL
// that databaseURL can derive database URLs from.
func checkURL(adminURL string) error {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("%s must be a postgres:// URL", envURL)
	}
	return nil
}

// ping reports whether the server at connURL accepts a connection.
func ping(ctx context.Context, connURL string) error {
	conn, err := pgconn.Connect(ctx, connURL)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

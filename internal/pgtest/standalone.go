package pgtest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Start starts a throwaway PostgreSQL server for a program that is not a
// test (such as internal/bench), the way the tests get theirs: initdb and
// postgres from COURIER_PG_BIN, PATH or /usr/lib/postgresql/*/bin, a new
// temporary directory, a free port of 127.0.0.1, the "postgres" OS user
// when running as root, and settings tuned for speed over durability
// (fsync=off, synchronous_commit=off). It ignores COURIER_PG_URL: the
// caller decides whether to use an existing server instead.
//
// stop shuts the server down and removes its directory; it is safe to
// call more than once. Start does not touch the server the tests of this
// process share.
func Start(ctx context.Context) (adminURL string, stop func(), err error) {
	bins, err := findBinaries(os.Getenv(envBin), fallbackBinGlob)
	if err != nil {
		return "", nil, err
	}
	srv, err := startServer(ctx, bins)
	if err != nil {
		return "", nil, err
	}
	stopped := false
	return srv.url, func() {
		if !stopped {
			stopped = true
			_ = srv.close()
		}
	}, nil
}

// NewDatabase creates an empty database on the server at adminURL and
// returns its URL (for the pgx stdlib driver) and a drop function that
// removes it, with any connections left to it.
func NewDatabase(ctx context.Context, adminURL string) (dbURL string, drop func(context.Context) error, err error) {
	name, dbURL, err := createDatabase(ctx, adminURL)
	if err != nil {
		return "", nil, err
	}
	return dbURL, func(ctx context.Context) error { return dropDatabase(ctx, adminURL, name) }, nil
}

// Acquire returns the PostgreSQL server a program that is not a test
// measures on: the one at COURIER_PG_URL, checked by creating and dropping
// a database on it, or else a throwaway one from Start. about describes
// the server for a report: its version and where it came from. stop
// releases what Acquire started; it is nil when err is not.
func Acquire(ctx context.Context) (adminURL, about string, stop func(), err error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if adminURL = os.Getenv(envURL); adminURL != "" {
		_, drop, err := NewDatabase(ctx, adminURL)
		if err == nil {
			err = drop(ctx)
		}
		if err != nil {
			return "", "", nil, fmt.Errorf("%s unusable: %w", envURL, err)
		}
		return adminURL, serverVersion(ctx, adminURL) + ", " + envURL + ", as configured", func() {}, nil
	}
	adminURL, stop, err = Start(ctx)
	if err != nil {
		return "", "", nil, fmt.Errorf("no %s and no throwaway server: %w", envURL, err)
	}
	about = serverVersion(ctx, adminURL) + ", throwaway server (internal/pgtest: " + strings.Join(serverSettings[1:], ", ") + ")"
	return adminURL, about, stop, nil
}

// serverVersion returns "PostgreSQL <version>" of the server at adminURL.
func serverVersion(ctx context.Context, adminURL string) string {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "PostgreSQL ?"
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "PostgreSQL ?"
	}
	return "PostgreSQL " + v
}

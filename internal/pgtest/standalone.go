package pgtest

import (
	"context"
	"os"
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

// Package pgtest gives tests a fresh, empty PostgreSQL database each.
//
// A package whose tests need PostgreSQL stops the shared server from its
// TestMain and asks for a database in each test:
//
//	func TestMain(m *testing.M) { testmain.Main(m) } // internal/testmain: pgtest.Run, then goleak
//
//	func TestEnqueue(t *testing.T) {
//		t.Parallel()
//		db := sqlx.MustOpen("pgx", pgtest.URL(t))
//		t.Cleanup(func() { db.Close() })
//		…
//	}
//
// The server comes from the environment:
//
//   - COURIER_PG_URL, when set, is the admin URL (postgres://…) of an existing
//     server; each test gets its own database there, dropped afterwards.
//   - Otherwise the first test to ask starts a throwaway server with the
//     initdb and postgres programs found in COURIER_PG_BIN, on PATH or in
//     /usr/lib/postgresql/*/bin, in that order. All tests of the process
//     share it and Main stops it. Running as root, the server runs as the
//     "postgres" OS user, since PostgreSQL refuses to run as root. Only
//     Unix systems start one: on Windows, COURIER_PG_URL is needed.
//
// When no server can be had, tests asking for one are skipped with the
// reason, or fail with it when COURIER_PG_REQUIRE is 1 or true (as in CI).
//
// PgBouncer puts a PgBouncer of a test's own, in transaction mode, in front
// of its database; without the program (COURIER_PGBOUNCER, PATH or
// /usr/sbin) the test is skipped, or fails when COURIER_PGBOUNCER_REQUIRE
// is set.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Environment variables read by the package.
const (
	envURL     = "COURIER_PG_URL"     // admin URL of an existing server
	envRequire = "COURIER_PG_REQUIRE" // fail rather than skip without a server
	envBin     = "COURIER_PG_BIN"     // directory holding initdb and postgres
)

const (
	// startTimeout bounds acquiring the server: initdb and startup of a
	// throwaway one, or the first connection to COURIER_PG_URL.
	startTimeout = 60 * time.Second
	// opTimeout bounds creating or dropping one database.
	opTimeout = 30 * time.Second
)

// errStopped is reported to tests that ask for a database after Main has
// stopped the server.
var errStopped = errors.New("the throwaway server has been stopped by pgtest.Run")

// harness is the PostgreSQL server shared by the tests of this process. It is
// acquired once, on first use, and stopped by Main. The mutex plays the part
// of a sync.Once that Available can look into without triggering it.
var harness struct {
	mu       sync.Mutex
	acquired bool    // whether acquire has run, successfully or not
	adminURL string  // valid when err is nil
	server   *server // nil when COURIER_PG_URL names the server
	err      error   // why there is no server
	// templates are the Templates' databases, dropped by stop.
	templates []template
}

// template names a Template's database on a server.
type template struct{ adminURL, name string }

// Run runs the package's tests and stops the throwaway server afterwards,
// returning the exit code, for a TestMain (internal/testmain.Main,
// couriertest.Main). Without it, or when the test process dies before it
// returns (a panic, go test's -timeout), the server's temporary directory
// is left behind until a throwaway server is next started, by any
// process, in the same temporary directory: that start removes it.
// The server is killed when the test process exits only on Linux and
// FreeBSD: elsewhere it keeps running.
func Run(m interface{ Run() int }) int {
	code := m.Run()
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// URL returns the connection URL (postgres://…) of a fresh, empty database
// created for t and dropped, with any connections left to it, when t's cleanup
// runs. The URL suits the pgx stdlib driver: sql.Open("pgx", url).
//
// URL skips t when no PostgreSQL is available, or fails it when
// COURIER_PG_REQUIRE is set. It is safe to call from parallel tests.
func URL(t testing.TB) string {
	t.Helper()
	adminURL := Server(t)

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	name, dbURL, err := createDatabase(ctx, adminURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dropWithCleanup(t, adminURL, name)
	return dbURL
}

// dropWithCleanup drops the database name, with any connections left to
// it, from the server at adminURL when t's cleanup runs.
func dropWithCleanup(t testing.TB, adminURL, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := dropDatabase(ctx, adminURL, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
}

// Server returns the admin URL of the server, for tests that create
// databases, roles or processes of their own; they must clean up after
// themselves, as the server is shared by all tests of the process. Server
// skips or fails t like URL when no PostgreSQL is available.
func Server(t testing.TB) (adminURL string) {
	t.Helper()
	adminURL, err := acquire()
	if err != nil {
		unavailable(t, err)
	}
	return adminURL
}

// Available reports whether a server is available and, if not, why. Before
// the first test has asked for one it reports whether one can be had
// (COURIER_PG_URL is well formed, or the programs and OS user needed for a
// throwaway server are there) without starting or contacting it.
func Available() (ok bool, reason string) {
	harness.mu.Lock()
	defer harness.mu.Unlock()
	err := harness.err
	if !harness.acquired {
		err = preflight()
	}
	if err != nil {
		return false, err.Error()
	}
	return true, ""
}

// acquire returns the admin URL of the shared server, starting it on the
// first call.
func acquire() (string, error) {
	harness.mu.Lock()
	defer harness.mu.Unlock()
	if !harness.acquired {
		harness.acquired = true
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		harness.adminURL, harness.server, harness.err = open(ctx)
	}
	return harness.adminURL, harness.err
}

// open connects to the server named by COURIER_PG_URL or, without one, starts
// a throwaway server.
func open(ctx context.Context) (string, *server, error) {
	if adminURL := os.Getenv(envURL); adminURL != "" {
		if err := checkURL(adminURL); err != nil {
			return "", nil, err
		}
		if err := ping(ctx, adminURL); err != nil {
			return "", nil, fmt.Errorf("%s: %w", envURL, err)
		}
		return adminURL, nil, nil
	}
	bins, err := findBinaries(os.Getenv(envBin), fallbackBinGlob)
	if err != nil {
		return "", nil, err
	}
	srv, err := startServer(ctx, bins)
	if err != nil {
		return "", nil, err
	}
	return srv.url, srv, nil
}

// preflight reports why open would fail, as far as it can tell without
// starting or contacting a server.
func preflight() error {
	if adminURL := os.Getenv(envURL); adminURL != "" {
		return checkURL(adminURL)
	}
	if _, err := findBinaries(os.Getenv(envBin), fallbackBinGlob); err != nil {
		return err
	}
	_, err := serverCredential()
	return err
}

// stop stops the throwaway server, if one was started, and makes later
// requests for a server fail.
func stop() error {
	harness.mu.Lock()
	defer harness.mu.Unlock()
	srv, templates := harness.server, harness.templates
	harness.acquired, harness.adminURL, harness.server, harness.err = true, "", nil, errStopped
	harness.templates = nil
	if srv != nil {
		return srv.close() // and its databases with it
	}
	var errs []error
	for _, tp := range templates { // on the server at COURIER_PG_URL, shared
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		errs = append(errs, dropDatabase(ctx, tp.adminURL, tp.name))
		cancel()
	}
	return errors.Join(errs...)
}

// unavailable skips t because there is no server, or fails it when
// COURIER_PG_REQUIRE asks for one.
func unavailable(t testing.TB, err error) {
	t.Helper()
	missing(t, "PostgreSQL", envRequire, err)
}

// missing skips t because what it needs (what) cannot be had, err says
// why, or fails it when the environment variable require is 1 or true.
func missing(t testing.TB, what, require string, err error) {
	t.Helper()
	v := os.Getenv(require)
	if v == "" {
		t.Skipf("pgtest: no %s available, skipping: %v (set %s=1 to fail instead)", what, err, require)
	}
	required, perr := strconv.ParseBool(v)
	if perr != nil {
		t.Fatalf("pgtest: %s=%q is not a boolean; and no %s available: %v", require, v, what, err)
	}
	if !required {
		t.Skipf("pgtest: no %s available, skipping: %v", what, err)
	}
	t.Fatalf("pgtest: no %s available and %s=%s: %v", what, require, v, err)
}

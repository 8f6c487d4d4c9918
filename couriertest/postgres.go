package couriertest

import (
	"os"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// Main runs a package's tests and then stops the throwaway PostgreSQL
// server PostgresURL and PostgresStore started, if any. m is the
// *testing.M of TestMain, or anything that runs the tests the same way.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { couriertest.Main(m) }
//
// Without it, or when the test binary dies before Main returns (a panic,
// go test's -timeout), the server's directory, its data directory and log
// (tens of MiB, a courier-pgtest-* directory in the system's temporary
// directory), stays behind until the next test run on that machine that
// starts a throwaway server: that start removes it. On systems other than
// Linux and FreeBSD, which cannot have the server stopped when the test
// binary exits, the server also keeps running.
//
// The server is a process of its own, not a goroutine of the test binary:
// a goroutine leak check (goleak) runs inside the m given to Main, after
// the tests, and finds none of the kit's.
//
//	type leakChecked struct{ *testing.M }
//
//	func (m leakChecked) Run() int {
//		if code := m.M.Run(); code != 0 {
//			return code
//		}
//		if err := goleak.Find(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			return 1
//		}
//		return 0
//	}
//
//	func TestMain(m *testing.M) { couriertest.Main(leakChecked{m}) }
func Main(m interface{ Run() int }) { os.Exit(pgtest.Run(m)) }

// PostgresURL returns the URL (postgres://…, for the driver named
// postgres.DriverName) of a fresh, empty database made for t and dropped
// when t ends. The server is COURIER_PG_URL's (an admin URL) when that is
// set; otherwise the first call starts a throwaway server from the
// PostgreSQL programs (initdb, postgres) on PATH or in
// /usr/lib/postgresql/*/bin, shared by the process's tests (as the
// postgres OS user when run as root), on Unix systems: on Windows the
// server is COURIER_PG_URL's only. Without a server t is skipped, or fails
// when COURIER_PG_REQUIRE is 1.
//
// A test whose application holds a connection of its own to the database
// (a pgxpool, whose pgx.Tx package postgres enqueues in) opens it and the
// Store on this URL, sqlx.Open(postgres.DriverName, url), store.Migrate and
// store.Open: PostgresStore's database has no URL to give it.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return pgtest.URL(t)
}

// PostgresStore returns a Store over a fresh PostgreSQL database
// (PostgresURL) with courier's tables migrated and a pool sized for a
// worker's default concurrency; it is closed when t ends.
func PostgresStore(t testing.TB, cfg store.Config) *store.Store {
	t.Helper()
	return PostgresStores(t, 1, cfg)[0]
}

// PostgresStores returns n Stores over one fresh PostgreSQL database, as
// n processes sharing it have: each with a pool of its own, sized as
// PostgresStore's. The tables are migrated once; the Stores are closed
// when t ends. Tests of several workers competing for one outbox use it.
// An n below 1 fails t.
func PostgresStores(t testing.TB, n int, cfg store.Config) []*store.Store {
	t.Helper()
	if n < 1 {
		t.Fatalf("couriertest: PostgresStores of %d Stores; want 1 or more", n)
	}
	url := PostgresURL(t)
	out := make([]*store.Store, n)
	for i := range out {
		db, err := sqlx.Open(postgres.DriverName, url)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(32)
		db.SetMaxIdleConns(32)
		t.Cleanup(func() { db.Close() })
		if i == 0 {
			if err := store.Migrate(t.Context(), db); err != nil {
				t.Fatal(err)
			}
		}
		if out[i], err = store.Open(t.Context(), db, cfg); err != nil {
			t.Fatal(err)
		}
		s := out[i]
		t.Cleanup(func() { s.Close() })
	}
	return out
}

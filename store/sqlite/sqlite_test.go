package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/damage"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/sqlite"
)

// openSQLite returns a fresh SQLite file database for one test.
func openSQLite(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(filepath.Join(t.TempDir(), "courier.db"), store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConformance runs the store conformance suite on SQLite.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) }, nil)
}

// TestOpenWriter: a Store from Open writes through one
// connection of its own. Concurrent writers queue for it and all commit
// (none fails with a busy error), and reading through DB() goes on while a
// write transaction is open.
func TestOpenWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const writers = 64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			tx, err := s.Begin(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer tx.Rollback()
			k := protocol.InboxKey{Sender: "s", Key: fmt.Sprintf("k%02d", i), PayloadSHA256: strings.Repeat("0", 64)}
			if _, err := protocol.InboxFor(s).Record(ctx, tx, k); err != nil {
				errs <- err
				return
			}
			if err := protocol.InboxFor(s).Complete(ctx, tx, k, []byte("ack")); err != nil {
				errs <- err
				return
			}
			errs <- tx.Commit()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("writer: %v", err)
		}
	}

	held, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback()
	var n int
	if err := s.DB().GetContext(ctx, &n, "SELECT count(*) FROM courier_inbox WHERE status = 'completed'"); err != nil {
		t.Fatalf("read while the writer is held: %v", err)
	}
	if n != writers {
		t.Errorf("%d completed inbox records, want %d", n, writers)
	}
}

// TestMigrationsForTeamsWithTheirOwnTool: the files of Migrations and
// MigrateTx over a *sql.Tx (see storetest.Migrations).
func TestMigrationsForTeamsWithTheirOwnTool(t *testing.T) {
	t.Parallel()
	storetest.Migrations(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) }, storetest.MigrationKit{
		Files:     sqlite.Migrations(),
		MigrateTx: sqlite.MigrateTx,
		SchemaQuery: `SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master
			WHERE name LIKE 'courier%' ORDER BY type, name`,
	})
}

// TestDSNEscapesPath shows the finding "the SQLite path is not escaped in
// the DSN" fixed: a file name holding what a file: URI reads as a query
// (?), a fragment (#) or an escape (%), spaces or any other character
// opens and creates the file of exactly that name, and changes none of
// the options (q?mode=ro.db opens read-write).
func TestDSNEscapesPath(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"we#ird.db", "q?x.db", "q?mode=ro.db", "a&_journal_mode=DELETE.db", "100%.db", "%41%2F.db",
		"with space.db", " leading.db", "ünïcødé-数据-😀.db",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			s, err := sqlite.Open(ctx, path, store.Config{})
			if err != nil {
				t.Fatalf("Open(%q): %v", path, err)
			}
			e := enqueueOne(t, s, "n-1")
			var mode string
			if err := s.DB().GetContext(ctx, &mode, "PRAGMA journal_mode"); err != nil || mode != "wal" {
				t.Errorf("journal_mode %q (%v), want wal: the name changed the options", mode, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var files []string
			for _, f := range entries {
				files = append(files, f.Name())
			}
			if !slices.Equal(files, []string{name}) {
				t.Fatalf("the directory holds %q, want exactly %q", files, name)
			}
			s, err = sqlite.Open(ctx, path, store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if d, err := s.Outbox.Get(ctx, e.ID); err != nil || d.NotificationID != "n-1" {
				t.Fatalf("reopened, delivery %d is %+v (%v)", e.ID, d, err)
			}
		})
	}
}

// enqueueOne enqueues a delivery in a transaction of its own.
func enqueueOne(t *testing.T, s *store.Store, id string) store.Enqueued {
	t.Helper()
	ctx := t.Context()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAnAckIsDurableByDefault: a Store from Open commits with
// synchronous=FULL (2) by default, on its writer and on every connection
// of DB(), so what a receiver acknowledged survives a crash of the
// machine; DurabilityRelaxed gives NORMAL (1).
func TestAnAckIsDurableByDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  store.Config
		want int
	}{
		{"Default", store.Config{}, 2},
		{"Full", store.Config{Durability: store.DurabilityFull}, 2},
		{"Relaxed", store.Config{Durability: store.DurabilityRelaxed}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()

			tx, err := s.Begin(ctx) // the writer
			if err != nil {
				t.Fatal(err)
			}
			var got int
			if err := tx.GetContext(ctx, &got, "PRAGMA synchronous"); err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
			if got != tt.want {
				t.Errorf("writer: synchronous = %d, want %d", got, tt.want)
			}
			// Two connections of DB() held at once: two distinct ones.
			for i := range 2 {
				c, err := s.DB().Connx(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if err := c.GetContext(ctx, &got, "PRAGMA synchronous"); err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("DB() connection %d: synchronous = %d, want %d", i, got, tt.want)
				}
			}
		})
	}
}

// TestWriteThroughDBWhileTheWriterIsHeldFailsFast shows the finding
// "writing through s.DB() inside a receiver's function blocks for the busy
// timeout, then answers 500" fixed. A stand-in receiver runs the
// application's function in a transaction on the writer and marks the
// context it passes, as courier's receivers do; a write through DB() from
// that context (Exec, a prepared statement, a write transaction) fails at
// once with code write_outside_transaction, whose message says to write
// through the transaction, while reads through DB() and writes through the
// transaction go on. Unmarked, DB() writes as ever.
func TestWriteThroughDBWhileTheWriterIsHeldFailsFast(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE effects (what TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}

	type app func(ctx context.Context, tx *sqlx.Tx) error
	receiver := func(fn app) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx, err := s.Begin(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer tx.Rollback()
			if err := fn(writerctx.WithHeld(r.Context()), tx); err != nil {
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, "%s\n%s", courier.CodeOf(err), err)
				return
			}
			if err := tx.Commit(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		})
	}
	call := func(t *testing.T, fn app) (int, string) {
		t.Helper()
		srv := httptest.NewServer(receiver(fn))
		defer srv.Close()
		resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(body)
	}

	refused := map[string]app{
		"Exec": func(ctx context.Context, _ *sqlx.Tx) error {
			_, err := s.DB().ExecContext(ctx, "INSERT INTO effects (what) VALUES ('exec')")
			return err
		},
		"PreparedStatement": func(ctx context.Context, _ *sqlx.Tx) error {
			st, err := s.DB().PrepareContext(ctx, "INSERT INTO effects (what) VALUES ('prepared')")
			if err != nil {
				return err
			}
			defer st.Close()
			_, err = st.ExecContext(ctx)
			return err
		},
		"WriteReturningRows": func(ctx context.Context, _ *sqlx.Tx) error {
			var what string
			return s.DB().GetContext(ctx, &what, "INSERT INTO effects (what) VALUES ('returning') RETURNING what")
		},
		"Transaction": func(ctx context.Context, _ *sqlx.Tx) error {
			tx, err := s.DB().BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			_, err = tx.ExecContext(ctx, "INSERT INTO effects (what) VALUES ('transaction')")
			return err
		},
	}
	for name, fn := range refused {
		t.Run(name, func(t *testing.T) {
			status, body := call(t, fn)
			code, msg, _ := strings.Cut(body, "\n")
			if status != http.StatusInternalServerError || courier.Code(code) != courier.CodeWriteOutsideTransaction {
				t.Fatalf("answered %d %q, want 500 with code write_outside_transaction", status, body)
			}
			if !strings.Contains(msg, "write through the transaction") {
				t.Errorf("the error %q does not say to write through the transaction", msg)
			}
		})
	}

	status, body := call(t, func(ctx context.Context, tx *sqlx.Tx) error {
		var n int
		if err := s.DB().GetContext(ctx, &n, "SELECT count(*) FROM effects"); err != nil {
			return fmt.Errorf("read through DB(): %w", err)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO effects (what) VALUES ('through the transaction')")
		return err
	})
	if status != http.StatusOK {
		t.Fatalf("reading through DB() and writing through the transaction answered %d %q", status, body)
	}
	if _, err := s.DB().ExecContext(ctx, "INSERT INTO effects (what) VALUES ('unmarked')"); err != nil {
		t.Fatalf("a write through DB() from an unmarked context: %v", err)
	}
	var got []string
	if err := s.DB().SelectContext(ctx, &got, "SELECT what FROM effects ORDER BY what"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"through the transaction", "unmarked"}) {
		t.Fatalf("effects %q, want only the transaction's and the unmarked write", got)
	}
}

// TestSchemaAlteredStopsTheNextClaim: on SQLite the claim compares the
// schema cookie (PRAGMA schema_version) with the one it last saw, so the
// very next claim after another process alters courier's tables refuses
// with schema_altered and leases nothing.
func TestSchemaAlteredStopsTheNextClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := storeWithOne(t, "n")
	other, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(ctx, "ALTER TABLE courier_outbox ADD COLUMN surprise INTEGER"); err != nil {
		t.Fatal(err)
	}
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
	if courier.CodeOf(err) != courier.CodeSchemaAltered || len(c) != 0 {
		t.Fatalf("Claim after the schema was altered = %d rows, %v; want none, schema_altered", len(c), err)
	}
	// A change to a table that is not courier's runs the full guard
	// again, which passes.
	if _, err := other.ExecContext(ctx, "ALTER TABLE courier_outbox DROP COLUMN surprise"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, "CREATE TABLE app_orders (id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute}); err != nil || len(c) != 1 {
		t.Fatalf("Claim after an application's own migration = %d rows, %v; want the delivery", len(c), err)
	}
}

// TestCheckFindsADamagedFile: Check runs SQLite's quick_check, which reads
// the whole file: a damaged b-tree page makes it report blocked with code
// database_corrupt, not fail. It failed (database_unavailable: database
// disk image is malformed) when SQLite listed fewer problems than its
// limit, 100: it went on to read the damaged table for its constraints.
func TestCheckFindsADamagedFile(t *testing.T) {
	t.Parallel()
	for _, pad := range []int{10, 2000} {
		t.Run(fmt.Sprintf("payloads of %d bytes", pad), func(t *testing.T) {
			t.Parallel()
			checkFindsADamagedFile(t, pad)
		})
	}
}

func checkFindsADamagedFile(t *testing.T, pad int) {
	ctx := t.Context()
	s, path := storeHolding(t, 200, []byte(`{"pad":"`+strings.Repeat("x", pad)+`"}`))
	if h, err := s.Outbox.Check(ctx, 0); err != nil || h.Status != store.HealthOK {
		t.Fatalf("Check of a sound file = %+v, %v", h, err)
	}
	damage.Tables(t, s, path, "courier_outbox")

	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Outbox.Check(ctx, 0)
	if err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeDatabaseCorrupt {
		t.Fatalf("Check of the damaged file = %s/%s, %v; want blocked/database_corrupt", h.Status, h.Code, err)
	}
}

// TestCheckFindsTheFileRemovedOrReplaced: a database file removed (or
// replaced) under an open Store leaves SQLite writing to the unlinked
// file, in WAL mode without an error, and all of it is lost when the
// Store closes: Check said ok. It compares the file with the one the
// Store opened, and reports blocked database_corrupt.
func TestCheckFindsTheFileRemovedOrReplaced(t *testing.T) {
	t.Parallel()
	for _, replace := range []bool{false, true} {
		t.Run(map[bool]string{false: "removed", true: "replaced"}[replace], func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "courier.db")
			s, err := sqlite.Open(ctx, path, store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if h, err := s.Outbox.Check(ctx, 0); err != nil || h.Status != store.HealthOK {
				t.Fatalf("Check of the file the Store opened = %s/%s, %v", h.Status, h.Code, err)
			}
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
			if replace {
				if err := os.WriteFile(path, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h, err := s.Outbox.Check(ctx, 0)
			if err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeDatabaseCorrupt {
				t.Fatalf("Check with the file %s = %s/%s, %v; want blocked/database_corrupt", t.Name(), h.Status, h.Code, err)
			}
		})
	}
}

// TestAnInMemoryDatabaseIsRefused: each connection of a pool opened on
// ":memory:" is a database of its own, and a shared in-memory database
// vanishes with its last connection: a Store there would lose committed
// rows as the pool opened and closed connections. Open and store.Open
// refuse one, with code config_invalid. (Open takes any other path for a
// file's name.)
func TestAnInMemoryDatabaseIsRefused(t *testing.T) {
	t.Parallel()
	if s, err := sqlite.Open(t.Context(), ":memory:", store.Config{}); err == nil {
		s.Close()
		t.Error(`Open(":memory:") served an in-memory database`)
	} else if !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf(`Open(":memory:") = %v, want config_invalid`, err)
	}
	for _, path := range []string{":memory:", "file::memory:?cache=shared", "file:courier?mode=memory&cache=shared"} {
		db, err := sqlx.Open(sqlite.DriverName, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(t.Context(), db); err != nil {
			t.Fatalf("Migrate(%q): %v", path, err)
		}
		if s, err := store.Open(t.Context(), db, store.Config{}); err == nil {
			s.Close()
			t.Errorf("store.Open(%q) served an in-memory database", path)
		} else if !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("store.Open(%q) = %v, want config_invalid", path, err)
		}
		db.Close()
	}
}

// TestOpenSaysWhyItCannotCreateTheFile: SQLite creates the database file,
// not its directory, and cannot open a directory as one. Open's error for
// either was go-sqlite3's "unable to open database file" under "store:
// migrate", which left the reader to guess at the path: it now names the
// path and what to do, still with code database_unavailable (see
// TestMigrateAndOpenOnAFailedFileAreDatabaseUnavailable).
func TestOpenSaysWhyItCannotCreateTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"a missing directory", filepath.Join(dir, "missing", "app.db"), "directory " + filepath.Join(dir, "missing") + " does not exist"},
		{"a directory", dir, dir + " is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), tc.path, store.Config{})
			if err == nil {
				s.Close()
				t.Fatalf("Open(%q) opened a Store", tc.path)
			}
			if !errors.Is(err, courier.CodeDatabaseUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open(%q) = %v, want database_unavailable saying %q", tc.path, err, tc.want)
			}
		})
	}
}

// TestAPoolOfDriverNameSaysWhyItCannotCreateTheFile: a pool the
// application opened itself with DriverName (see the package doc), given
// to store.Migrate or store.Open, failed on a missing directory or a
// directory with go-sqlite3's bare "unable to open database file", which
// only sqlite.Open explained: the driver names the path and what to do,
// for whichever DSN form names the file, still with code
// database_unavailable.
func TestAPoolOfDriverNameSaysWhyItCannotCreateTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "no such dir%", "app.db") // a space and a % for the URI forms
	for _, tc := range []struct {
		name, dsn, want string
	}{
		{"sqlite.DSN of a file in a missing directory", sqlite.DSN(missing, store.DurabilityFull), "directory " + filepath.Dir(missing) + " does not exist"},
		{"a file: URI", "file:" + strings.NewReplacer("%", "%25", " ", "%20").Replace(missing) + "?_busy_timeout=100", "directory " + filepath.Dir(missing) + " does not exist"},
		{"a path with parameters", missing + "?_busy_timeout=100", "directory " + filepath.Dir(missing) + " does not exist"},
		{"a bare path", missing, "directory " + filepath.Dir(missing) + " does not exist"},
		{"sqlite.DSN of a directory", sqlite.DSN(dir, store.DurabilityFull), dir + " is a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, err := sqlx.Open(sqlite.DriverName, tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for what, err := range map[string]error{"store.Migrate": store.Migrate(t.Context(), db), "store.Open": openErr(t, db)} {
				if !errors.Is(err, courier.CodeDatabaseUnavailable) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s = %v, want database_unavailable saying %q", what, err, tc.want)
				}
			}
		})
	}
}

// openErr returns store.Open's error on db, closing a Store it opened.
func openErr(t *testing.T, db *sqlx.DB) error {
	t.Helper()
	s, err := store.Open(t.Context(), db, store.Config{})
	if err == nil {
		s.Close()
		return errors.New("store.Open opened a Store")
	}
	return err
}

// TestOperatorWritesRefusedByTheDatabase: a trigger's RAISE(ABORT) that
// refuses an operator's write is internal_error where the operator's
// input did not shape the rows (see storetest.RefusedWrites).
func TestOperatorWritesRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	storetest.RefusedWrites(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) }, func(t *testing.T, db *sqlx.DB, table string) {
		t.Helper()
		for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
			if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER refuse_`+strings.ToLower(op)+` BEFORE `+op+` ON `+table+`
				BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// storeWithOne opens a Store on a new file, closed as the test ends, with
// one delivery enqueued, id, and returns it and the file's path.
func storeWithOne(t *testing.T, id string) (*store.Store, string) {
	t.Helper()
	s, path := storeAt(t)
	if _, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: id, Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// storeHolding opens a Store on a new file, closed as the test ends,
// with n deliveries of payload enqueued in one transaction, and returns
// it and the file's path.
func storeHolding(t *testing.T, n int, payload []byte) (*store.Store, string) {
	t.Helper()
	s, path := storeAt(t)
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://r.example/h", Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// storeAt opens a Store on a new file, closed as the test ends, and
// returns it and the file's path.
func storeAt(t *testing.T) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := sqlite.Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// TestAnUnpinTheDatabaseSkipsIsInternal: see storetest.UnpinSkipped.
func TestAnUnpinTheDatabaseSkipsIsInternal(t *testing.T) {
	t.Parallel()
	storetest.UnpinSkipped(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) }, func(t *testing.T, db *sqlx.DB) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), `CREATE TRIGGER keep_pins BEFORE DELETE ON courier_contracts BEGIN SELECT RAISE(IGNORE); END`); err != nil {
			t.Fatal(err)
		}
	})
}

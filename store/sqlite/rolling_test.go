package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/sqlite"
)

// oldEnqueue is the previous release's enqueue: an INSERT that names only
// the columns its schema had.
const oldEnqueue = `INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, status,
	max_attempts, next_attempt_at, deadline, created_at, updated_at)
VALUES (?, 'https://r.example/h', X'7b7d', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'none', 'pending',
	10, 0, 9000000000000000, 0, 0)`

// TestTheLatestMigrationBesideThePreviousReleasesWorkload: a deploy on one
// SQLite file, shared by the application and the CLI. The previous
// release's schema holds 200,000 deliveries, and an old process has an
// enqueue's transaction open (it holds the write lock) when the new
// release's Migrate starts: Migrate waits for it (the busy timeout) rather
// than failing. The migration (13) moves every payload, the in-flight
// enqueue's too, into a table of their own: it copies them and rewrites
// the outbox's rows in place without them, inside the write lock (its
// time is reported), never the outbox whole into new pages. It removes a
// column the previous release writes, and says that release must not run
// on it: an old process's enqueue after it is refused (its claims are
// refused schema_too_new, see testNewerSchemaAnOlderCourierMustNotRun),
// and the new release claims and settles what the old processes wrote.
func TestTheLatestMigrationBesideThePreviousReleasesWorkload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	db := openFile(t, path)
	applyFirst(t, db, migrationCount(t)-4) // the release's: 13; 14 and 15, an index each; 16, a column
	if _, err := db.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < 200000)
		INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, status,
			max_attempts, attempts, next_attempt_at, deadline, created_at, updated_at, ack_sha256)
		SELECT 'old-' || n, 'https://r.example/h', X'7b7d', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'none', 'succeeded',
			10, 1, 0, 9000000000000000, 0, 0, '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'
		FROM i`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, oldEnqueue, "before"); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.GetContext(ctx, &pages, "PRAGMA page_count"); err != nil {
		t.Fatal(err)
	}

	open, err := db.BeginTxx(ctx, nil) // _txlock=immediate: it holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.ExecContext(ctx, oldEnqueue, "in-flight"); err != nil {
		t.Fatal(err)
	}
	migrated := make(chan error, 1)
	began := time.Now()
	go func() { migrated <- store.Migrate(ctx, openFile(t, path)) }()
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate after an old process's enqueue: %v", err)
	}
	t.Logf("Migrate on 200,000 deliveries, with the enqueue it waited for: %v", time.Since(began))
	var after int
	if err := db.GetContext(ctx, &after, "PRAGMA page_count"); err != nil {
		t.Fatal(err)
	}
	// The payloads' table is 2 bytes of payload and a few of record a row
	// here, a twentieth of the outbox, and the indexes 14 and 15 build
	// (the status, the endpoint, with the id) about a twentieth and a
	// tenth; a rebuild of the outbox (a copy, then a drop) doubles the
	// file.
	if after > pages+pages/4 {
		t.Fatalf("the migration grew the file from %d pages to %d: it rewrote the outbox into new pages inside the write lock", pages, after)
	}
	if _, err := db.ExecContext(ctx, oldEnqueue, "after"); err == nil || !strings.Contains(err.Error(), "payload") {
		t.Fatalf("an old process's enqueue on the new schema = %v, want it refused: the payload column is gone", err)
	}

	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.TakesOverThePreviousRelease(t, s)
}

// TestMigrateBesideANewerCouriersMigrate: during a rolling deploy, a
// process of the release being replaced restarts and migrates on start
// (sqlite.Open) while the next release's Migrate holds the write lock with
// its migration applied, not yet committed. On the schema before the
// older release's, the older Open has a migration to apply: it waits for
// the lock, finds nothing it can apply once it has it and serves on the
// newer schema; it failed with schema_too_new. (On the older release's
// own schema it has nothing to do and takes no lock:
// TestMigrateAndOpenOfACurrentFileWhileAnotherProcessWrites.)
func TestMigrateBesideANewerCouriersMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	db := openFile(t, path)
	applyFirst(t, db, migrationCount(t)-1)
	newer, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Rollback()
	if err := sqlite.MigrateTx(ctx, newer); err != nil {
		t.Fatal(err)
	}
	if _, err := newer.ExecContext(ctx, `ALTER TABLE courier_outbox ADD COLUMN newer_column TEXT;
		CREATE TABLE courier_newer (id INTEGER PRIMARY KEY);
		INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		s   *store.Store
		err error
	}
	older := make(chan opened, 1)
	go func() {
		s, err := sqlite.Open(ctx, path, store.Config{})
		older <- opened{s, err}
	}()
	if err := newer.Commit(); err != nil {
		t.Fatal(err)
	}
	o := <-older
	if o.err != nil {
		t.Fatalf("the older sqlite.Open beside the newer Migrate = %v, want it to serve", o.err)
	}
	o.s.Close()
}

package postgres_test

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/postgres"
)

// applyAllBut applies the exported migration files but the last n, each
// in a transaction of its own: the schema the previous release left.
func applyAllBut(t *testing.T, db *sqlx.DB, n int) {
	t.Helper()
	files := postgres.Migrations()
	names, err := fs.Glob(files, "*.sql")
	if err != nil || n > len(names) {
		t.Fatalf("all but %d of %d migrations: %v", n, len(names), err)
	}
	for _, name := range names[:len(names)-n] {
		text, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(t.Context(), string(text)); err != nil { // one statement list, one implicit transaction
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// oldEnqueue is the previous release's enqueue: an INSERT that names only
// the columns its schema had.
const oldEnqueue = `INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, status,
	max_attempts, next_attempt_at, deadline, created_at, updated_at)
VALUES ($1, 'https://r.example/h', '\x7b7d', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'none', 'pending',
	10, 0, 9000000000000000, 0, 0)`

// waitForLockWait returns once a session of db waits for a lock, or fails
// the test when ctx ends first.
func waitForLockWait(t *testing.T, ctx context.Context, db *sqlx.DB, what string) {
	t.Helper()
	for {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, what); err != nil {
			t.Fatalf("waiting for %q to wait for a lock: %v", what, err)
		}
		if n > 0 {
			return
		}
	}
}

// TestTheLatestMigrationBesideThePreviousReleasesWorkload: a rolling
// deploy on PostgreSQL. The previous release's schema holds 200,000
// deliveries; one of its processes has an enqueue in an application
// transaction that stays open. The new release's Migrate queued for the
// lock its ALTER TABLE takes behind that transaction, and every enqueue
// and claim of the other processes queued behind Migrate, for as long as
// the transaction stayed open: the outbox stopped. Migrate waits for its
// locks a moment at a time now, stepping aside between tries, so the
// others go on; it applies once the transaction ends, rewrites no table,
// and the rows of the old shape, committed before and during it, are
// claimed and settled by the new release.
func TestTheLatestMigrationBesideThePreviousReleasesWorkload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openPostgres(t)
	applyAllBut(t, db, 4) // the release's: 13 adds a column (its ALTER TABLE waits below), 14 and 15 an index each, 16 a column
	if _, err := db.ExecContext(ctx, `INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, status,
			max_attempts, attempts, next_attempt_at, deadline, created_at, updated_at, ack_sha256)
		SELECT 'old-' || i, 'https://r.example/h', '\x7b7d', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'none', 'succeeded',
			10, 1, 0, 9000000000000000, 0, 0, '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a'
		FROM generate_series(1, 200000) AS i;
		ANALYZE courier_outbox`); err != nil {
		t.Fatal(err)
	}
	var file int64
	if err := db.GetContext(ctx, &file, "SELECT relfilenode FROM pg_class WHERE relname = 'courier_outbox'"); err != nil {
		t.Fatal(err)
	}

	// An old process's application transaction, open across the migration.
	open, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if _, err := open.ExecContext(ctx, oldEnqueue, "in-flight"); err != nil {
		t.Fatal(err)
	}

	migrated := make(chan error, 1)
	began := time.Now()
	go func() { migrated <- store.Migrate(ctx, db) }()
	waitForLockWait(t, ctx, db, "ALTER TABLE courier_outbox")

	// Another old process enqueues meanwhile: it must not queue behind
	// Migrate for as long as the open transaction lasts.
	other, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.ExecContext(ctx, "SET LOCAL statement_timeout = '20s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.ExecContext(ctx, oldEnqueue, "beside-the-migration"); err != nil {
		t.Fatalf("an old process's enqueue while Migrate waits for the outbox: %v (it queued behind Migrate)", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := open.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-migrated; err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	t.Logf("Migrate beside a transaction held open: %v in all", time.Since(began))

	var after int64
	if err := db.GetContext(ctx, &after, "SELECT relfilenode FROM pg_class WHERE relname = 'courier_outbox'"); err != nil {
		t.Fatal(err)
	}
	if after != file {
		t.Fatalf("the migration rewrote courier_outbox (relfilenode %d, then %d): it held every process off for a copy of the table", file, after)
	}

	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.TakesOverThePreviousRelease(t, s)
}

// TestTheLatestMigrationsLockOnALargeOutbox measures how long the latest
// release's migrations (13 to 16, which ship together and apply in one
// transaction) hold courier_outbox, on the previous release's schema
// with 200,000 deliveries and nothing else running: the time every
// process's enqueues and claims wait during a rolling deploy. Measured on
// the last migration alone, it left out the column and CHECK that take
// the lock. It reports the time (tests do not judge speed) and requires
// what bounds it: no table rewritten, and so no time that grows with more
// than one read of it for each migration.
func TestTheLatestMigrationsLockOnALargeOutbox(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openPostgres(t)
	applyAllBut(t, db, 4) // the release's: 13, 14, 15 and 16
	if _, err := db.ExecContext(ctx, `INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, status,
			max_attempts, next_attempt_at, deadline, created_at, updated_at)
		SELECT 'old-' || i, 'https://r.example/h', '\x7b7d', '44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', 'none', 'pending',
			10, i, 9000000000000000, 0, 0
		FROM generate_series(1, 200000) AS i;
		ANALYZE courier_outbox`); err != nil {
		t.Fatal(err)
	}
	file := func() int64 {
		t.Helper()
		var n int64
		if err := db.GetContext(ctx, &n, "SELECT relfilenode FROM pg_class WHERE relname = 'courier_outbox'"); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := file()
	began := time.Now()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	after := file()
	t.Logf("the latest release's migrations on 200,000 deliveries: %v with courier_outbox locked; table rewritten: %v", took, after != before)
	if after != before {
		t.Fatalf("the latest release's migrations rewrote courier_outbox")
	}
}

// newerMigration is what the next courier's migration might be: it only
// adds, and records its version.
const newerMigration = `ALTER TABLE courier_outbox ADD COLUMN newer_column TEXT;
CREATE TABLE courier_newer (id INTEGER PRIMARY KEY);
INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`

// TestMigrateBesideANewerCouriersMigrate: during a rolling deploy, a
// process of the release being replaced restarts and migrates on start
// while the next release's Migrate holds the schema lock with its
// migration applied, not yet committed. On the schema the older release
// migrated, the older Migrate has nothing to do and returns at once: it
// waited for the lock, up to a second at a time, as long as the other
// held it. On the schema before it, the older Migrate waits for the lock,
// then finds the newer schema, nothing it can apply, and returns; it
// failed with schema_too_new. Either way the older Open serves on the
// newer schema.
func TestMigrateBesideANewerCouriersMigrate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		behind int // migrations of the older release not yet applied
	}{
		{"on the older release's schema", 0},
		{"on the schema before it", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a hang fails, it does not block
			defer cancel()
			db := openPostgres(t)
			applyAllBut(t, db, tc.behind)
			newer, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer newer.Rollback()
			if err := postgres.MigrateTx(ctx, newer); err != nil { // takes the schema lock, as the newer Migrate does
				t.Fatal(err)
			}
			if _, err := newer.ExecContext(ctx, newerMigration); err != nil {
				t.Fatal(err)
			}
			older := make(chan error, 1)
			go func() { older <- store.Migrate(ctx, db) }()
			if tc.behind > 0 {
				waitForLockWait(t, ctx, db, "pg_advisory_xact_lock")
			} else if err := <-older; err != nil { // while the newer holds the lock
				t.Fatalf("the older Migrate beside the newer one, on the older release's schema = %v, want nothing to do", err)
			}
			if err := newer.Commit(); err != nil {
				t.Fatal(err)
			}
			if tc.behind > 0 {
				if err := <-older; err != nil {
					t.Fatalf("the older Migrate beside the newer one, on the schema before it = %v, want nothing to do", err)
				}
			}
			s, err := store.Open(ctx, db, store.Config{})
			if err != nil {
				t.Fatalf("the older Open after both = %v, want it to serve", err)
			}
			s.Close()
		})
	}
}

package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// newerMigration is what the next courier's migration might be: it only
// adds (a column at the end of courier_outbox, a table, an index) and
// records its version, one past this courier's.
const newerMigration = `ALTER TABLE courier_outbox ADD COLUMN newer_column TEXT;
CREATE TABLE courier_newer (id INTEGER PRIMARY KEY);
CREATE INDEX courier_outbox_newer ON courier_outbox (newer_column) WHERE newer_column IS NOT NULL;
INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`

// testRollingDeployOnAnAdditiveNewerSchema: a rolling deploy. The next
// courier migrates while this one's processes run, and one of them
// restarts (Migrate on start, then Open) before the rollout ends. The
// newer migration only added, so this courier keeps serving on it:
// enqueues, claims of rows written before and after, settles, the inbox;
// Migrate has nothing to do and Open accepts the schema. They refused it
// with schema_too_new: the processes of the release being replaced
// stopped delivering, a restart of one failed, and rolling back to it was
// impossible.
func testRollingDeployOnAnAdditiveNewerSchema(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	before := b.enqueue(t, delivery("before"))
	leased := b.enqueue(t, delivery("leased"))
	held := b.claim(t, "old", 1, time.Hour)
	if len(held) != 1 || held[0].DeliveryID != before.ID {
		t.Fatalf("claimed %v before the newer migration, want %d", held, before.ID)
	}
	if _, err := b.db.ExecContext(b.ctx, newerMigration); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute) // past any engine's SchemaRecheck

	// The process that keeps running.
	if err := b.complete(held[0].Lease, digest("ack")); err != nil {
		t.Fatalf("settling a lease taken before the newer migration: %v", err)
	}
	after := b.enqueue(t, delivery("after"))
	c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: "old", Limit: 10, Lease: time.Minute})
	if err != nil || len(c) != 2 || c[0].DeliveryID != leased.ID || c[1].DeliveryID != after.ID {
		t.Fatalf("claim on the newer schema = %v, %v; want deliveries %d and %d", c, err, leased.ID, after.ID)
	}
	for _, d := range c {
		if err := b.complete(d.Lease, digest("ack")); err != nil {
			t.Fatal(err)
		}
	}
	b.processed(t, "on-the-newer-schema")

	// The process that restarts.
	if err := store.Migrate(b.ctx, b.db); err != nil {
		t.Fatalf("Migrate on an additive newer schema = %v, want nothing to do", err)
	}
	s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now})
	if err != nil {
		t.Fatalf("Open on an additive newer schema = %v, want it to serve", err)
	}
	if h, err := s.Outbox.Health(b.ctx); err != nil || h.Counts[courier.StatusSucceeded] != 3 {
		t.Fatalf("Health after the restart = %+v, %v; want 3 succeeded", h, err)
	}
	var version int
	if err := b.db.GetContext(b.ctx, &version, "SELECT MAX(version) FROM courier_schema"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := b.db.GetContext(b.ctx, &rows, "SELECT COUNT(*) FROM courier_schema WHERE version > 0"); err != nil || rows != version {
		t.Fatalf("courier_schema holds %d versions up to %d (%v): the older Migrate recorded something", rows, version, err)
	}
}

// testNewerSchemaAnOlderCourierMustNotRun: the next courier's migration
// that this one could not run on (it changes what a column means, or
// drops one) says so with a row of its own in courier_schema, the negated
// count of migrations a courier must know to run on it. Open, Migrate and
// the claims of a running Store refuse it with schema_too_new. A newer
// version whose tables lack a column this courier uses is
// schema_altered, whatever the rows say.
func testNewerSchemaAnOlderCourierMustNotRun(t *testing.T, open OpenFunc) {
	t.Run("Declared", func(t *testing.T) {
		t.Parallel()
		b := setup(t, open, store.Config{})
		b.enqueue(t, delivery("n1"))
		if _, err := b.db.ExecContext(b.ctx, newerMigration+`;
			INSERT INTO courier_schema (version, applied_at) SELECT -MAX(version), 1 FROM courier_schema`); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: "old", Limit: 10, Lease: time.Minute})
		if !errors.Is(err, courier.CodeSchemaTooNew) || len(c) != 0 {
			t.Fatalf("claim on a newer schema this courier must not run on = %d leased, %v; want none, schema_too_new", len(c), err)
		}
		if err := store.Migrate(b.ctx, b.db); !errors.Is(err, courier.CodeSchemaTooNew) {
			t.Fatalf("Migrate = %v, want schema_too_new", err)
		}
		if _, err := openStore(t, b.ctx, b.db, store.Config{}); !errors.Is(err, courier.CodeSchemaTooNew) {
			t.Fatalf("Open = %v, want schema_too_new", err)
		}
	})
	t.Run("DeclaredWithoutDDL", func(t *testing.T) {
		// A newer migration that changes what rows mean with a data
		// change alone (no table, column or index) and says so: claims
		// of a Store that has claimed on this schema already stop too.
		t.Parallel()
		b := setup(t, open, store.Config{})
		b.enqueue(t, delivery("n1"))
		b.enqueue(t, delivery("n2"))
		if c := b.claim(t, "old", 1, time.Hour); len(c) != 1 {
			t.Fatalf("claimed %d before the newer migration, want 1", len(c))
		}
		if _, err := b.db.ExecContext(b.ctx, `UPDATE courier_outbox SET priority = priority;
			INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema;
			INSERT INTO courier_schema (version, applied_at) SELECT -MAX(version), 1 FROM courier_schema`); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
		c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: "old", Limit: 10, Lease: time.Minute})
		if !errors.Is(err, courier.CodeSchemaTooNew) || len(c) != 0 {
			t.Fatalf("claim on a newer schema this courier must not run on = %d leased, %v; want none, schema_too_new", len(c), err)
		}
	})
	t.Run("ColumnGone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, open, store.Config{})
		if _, err := b.db.ExecContext(b.ctx, `ALTER TABLE courier_attempts DROP COLUMN remote_code;
			INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`); err != nil {
			t.Fatal(err)
		}
		if _, err := openStore(t, b.ctx, b.db, store.Config{}); !errors.Is(err, courier.CodeSchemaAltered) {
			t.Fatalf("Open on a newer schema without a column this courier uses = %v, want schema_altered", err)
		}
	})
	t.Run("ColumnInserted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, open, store.Config{})
		// Not a column added (ALTER TABLE appends): one of courier's in
		// another place, where a newer courier would not have put it.
		if _, err := b.db.ExecContext(b.ctx, `ALTER TABLE courier_contracts RENAME COLUMN pinned_at TO pinned_at_old;
			ALTER TABLE courier_contracts ADD COLUMN pinned_at BIGINT;
			INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`); err != nil {
			t.Fatal(err)
		}
		if _, err := openStore(t, b.ctx, b.db, store.Config{}); !errors.Is(err, courier.CodeSchemaAltered) {
			t.Fatalf("Open on a newer schema with a column out of place = %v, want schema_altered", err)
		}
	})
}

// TakesOverThePreviousRelease fails t unless s, the new release's Store on
// a database the previous release's processes enqueued into with its own
// columns (deliveries "in-flight" and one more, both pending), finds
// "in-flight" when it is enqueued again with the same settings, and
// claims and settles both.
func TakesOverThePreviousRelease(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := t.Context()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "in-flight", Endpoint: "https://r.example/h",
		Payload: []byte("{}"), Profile: ack.ProfileNone, MaxAttempts: 10})
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil || !again.Existed {
		t.Fatalf("the new release enqueueing an old process's delivery again = %+v, %v; want it found", again, err)
	}
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "new", Limit: 10, Lease: time.Minute})
	if err != nil || len(c) != 2 {
		t.Fatalf("claim of the old processes' enqueues = %d, %v; want 2", len(c), err)
	}
	for _, d := range c {
		res, err := protocol.For(s).Settle(ctx, protocol.Outcome{Lease: d.Lease, Result: protocol.Succeeded, AckSHA256: d.PayloadSHA256})
		if err != nil || res[0].Err != nil {
			t.Fatalf("settling %s: %v, %v", d.NotificationID, err, res)
		}
	}
}

package postgres_test

import (
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
)

// TestRedriveRefusedByTheDatabaseIsInternal: a CHECK of the database's
// own that refuses a Redrive's or a Cancel's write (SQLSTATE 23514) is
// internal_error: the parameters were fine. It was invalid_argument, and
// the admin API answered 400 and the CLI exited 2, telling the operator
// to fix input that was not at fault.
func TestRedriveRefusedByTheDatabaseIsInternal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s, failed := oneFailedDelivery(t, "n-1")
	if _, err := db.ExecContext(ctx, `ALTER TABLE courier_outbox ADD CONSTRAINT refuse_retries
		CHECK (status IN ('failed', 'succeeded') OR attempts = 0) NOT VALID`); err != nil {
		t.Fatal(err)
	}
	n, err := s.Outbox.Redrive(ctx, store.RedriveParams{ID: failed})
	if courier.CodeOf(err) != courier.CodeInternal || n != 0 {
		t.Errorf("Redrive refused by a CHECK = %d, %v; want internal_error", n, err)
	}
	if err := s.Outbox.Cancel(ctx, failed); courier.CodeOf(err) != courier.CodeInternal {
		t.Errorf("Cancel refused by a CHECK = %v; want internal_error", err)
	}
	// An enqueue's own row is its caller's: refused, it stays invalid_argument.
	if _, err := db.ExecContext(ctx, `ALTER TABLE courier_outbox ADD CONSTRAINT refuse_enqueues CHECK (notification_id <> 'n-2') NOT VALID`); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-2", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)}); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("Enqueue refused by a CHECK = %v; want invalid_argument", err)
	}
}

// TestRedriveRefusedByATriggerIsInternal: a trigger of the database's own
// that refuses a Redrive's or a Cancel's write (RAISE EXCEPTION, SQLSTATE
// P0001) is internal_error, as a CHECK's refusal is, and as a trigger's
// RAISE(ABORT) is on SQLite. It was database_unavailable: the admin API
// answered 503 and the operator was told the database failed, when it
// answered, by a rule of its own, what it will answer again.
func TestRedriveRefusedByATriggerIsInternal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s, failed := oneFailedDelivery(t, "n-1", "n-2")
	if _, err := db.ExecContext(ctx, `CREATE FUNCTION refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'the database refuses the write'; END $$;
		CREATE TRIGGER refuse_write BEFORE UPDATE OR DELETE ON courier_outbox FOR EACH ROW EXECUTE FUNCTION refuse_write()`); err != nil {
		t.Fatal(err)
	}
	n, err := s.Outbox.Redrive(ctx, store.RedriveParams{ID: failed})
	if courier.CodeOf(err) != courier.CodeInternal || n != 0 {
		t.Errorf("Redrive refused by a trigger = %d, %v; want internal_error", n, err)
	}
	pending, err := s.Outbox.Lookup(ctx, "n-2", "https://r.example/hooks")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Outbox.Cancel(ctx, pending.ID); courier.CodeOf(err) != courier.CodeInternal {
		t.Errorf("Cancel refused by a trigger = %v; want internal_error", err)
	}
}

// TestOperatorWritesRefusedByTheDatabase: a trigger's RAISE EXCEPTION
// that refuses an operator's write is internal_error where the
// operator's input did not shape the rows, as it is for Redrive and
// Cancel (see storetest.RefusedWrites).
func TestOperatorWritesRefusedByTheDatabase(t *testing.T) {
	t.Parallel()
	storetest.RefusedWrites(t, openPostgres, func(t *testing.T, db *sqlx.DB, table string) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), `CREATE FUNCTION refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'the database refuses the write'; END $$;
			CREATE TRIGGER refuse_write BEFORE INSERT OR UPDATE OR DELETE ON `+table+` FOR EACH ROW EXECUTE FUNCTION refuse_write()`); err != nil {
			t.Fatal(err)
		}
	})
}

// oneFailedDelivery migrates a fresh database, opens a Store on it,
// enqueues a delivery for each id, and claims and fails the first: it
// returns the database, the Store and the failed delivery's id.
func oneFailedDelivery(t *testing.T, ids ...string) (*sqlx.DB, *store.Store, int64) {
	t.Helper()
	ctx := t.Context()
	db := openPostgres(t)
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	p := protocol.For(s)
	claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "test", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	if _, err := p.Settle(ctx, protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 400}); err != nil {
		t.Fatal(err)
	}
	return db, s, claimed[0].DeliveryID
}

// TestAnUnpinTheDatabaseSkipsIsInternal: see storetest.UnpinSkipped.
func TestAnUnpinTheDatabaseSkipsIsInternal(t *testing.T) {
	t.Parallel()
	storetest.UnpinSkipped(t, openPostgres, func(t *testing.T, db *sqlx.DB) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), `CREATE FUNCTION keep_pins() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
			CREATE TRIGGER keep_pins BEFORE DELETE ON courier_contracts FOR EACH ROW EXECUTE FUNCTION keep_pins()`); err != nil {
			t.Fatal(err)
		}
	})
}

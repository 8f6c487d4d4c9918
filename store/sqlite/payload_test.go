package sqlite_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestClaimsAndSettlesLeaveTheirPayloadUnwritten: SQLite writes a row
// whole when an UPDATE changes its size, overflow pages too, and every
// claim and settle changes a delivery's size (its status, lease token and
// times). With the payload in the delivery's row, each claim and each
// settle of a 1 MiB delivery appended the whole payload to the -wal file
// again, holding the one writer (every enqueue and receiver) while it
// did. Kept in a table of its own, it is written once, by the enqueue.
func TestClaimsAndSettlesLeaveTheirPayloadUnwritten(t *testing.T) {
	const size = 1 << 20
	ctx := t.Context()
	s, path, walSize := walStore(t)
	payload := `{"pad":"` + strings.Repeat("x", size) + `"}`
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "big", Endpoint: "https://r.example/h", Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	other, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// written runs op on a -wal file emptied first, and returns how much
	// op appended to it.
	written := func(op func()) int64 {
		t.Helper()
		if _, err := other.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			t.Fatal(err)
		}
		if n := walSize(); n != 0 {
			t.Fatalf("the -wal file holds %d bytes after a TRUNCATE checkpoint, want 0", n)
		}
		op()
		return walSize()
	}
	out := protocol.For(s)
	for round := 1; round <= 3; round++ {
		var got []protocol.Claimed
		claimed := written(func() {
			got, err = out.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
			if err != nil || len(got) != 1 || string(got[0].Payload) != payload {
				t.Fatalf("round %d: claimed %d (%v), want the delivery, its payload whole", round, len(got), err)
			}
		})
		settled := written(func() {
			r, err := out.Settle(ctx, protocol.Outcome{Lease: got[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503})
			if err != nil || r[0].Err != nil {
				t.Fatalf("round %d: settle = %v, %v", round, r, err)
			}
		})
		t.Logf("round %d: the claim appended %d bytes to the -wal file, the settle %d", round, claimed, settled)
		if claimed > size/4 || settled > size/4 {
			t.Fatalf("round %d: a claim appended %d bytes to the -wal file and a settle %d, for a payload of %d: they wrote it again", round, claimed, settled, size)
		}
	}
}

// TestAPrunedDeliveryTakesItsPayload: a delivery's payload, in a table of
// its own, goes with the delivery when a prune deletes it; the payloads
// of the deliveries left stay.
func TestAPrunedDeliveryTakesItsPayload(t *testing.T) {
	ctx := t.Context()
	clock := fakeclock.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "courier.db"), store.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, due := range map[string]time.Time{"sent": clock.Now(), "waiting": clock.Now().Add(3 * time.Hour)} {
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: id, Endpoint: "https://r.example/h", Payload: []byte(`{}`), NotBefore: due}); err != nil {
			t.Fatal(err)
		}
	}
	out := protocol.For(s)
	c, err := out.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(c) != 1 || c[0].NotificationID != "sent" {
		t.Fatalf("claimed %v, %v; want the delivery sent", c, err)
	}
	if r, err := out.Settle(ctx, protocol.Outcome{Lease: c[0].Lease, Result: protocol.Succeeded, AckSHA256: c[0].PayloadSHA256}); err != nil || r[0].Err != nil {
		t.Fatalf("settle = %v, %v", r, err)
	}
	clock.Advance(time.Hour)
	if n, err := s.Outbox.Prune(ctx, store.PruneParams{OlderThan: time.Minute}); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the delivery sent", n, err)
	}
	var payloads []int64
	if err := s.DB().SelectContext(ctx, &payloads, "SELECT p.id FROM courier_outbox_payload AS p LEFT JOIN courier_outbox AS o ON o.id = p.id WHERE o.id IS NULL OR o.notification_id <> 'waiting'"); err != nil {
		t.Fatal(err)
	}
	if len(payloads) != 0 {
		t.Fatalf("payloads %v are left without their delivery, or the one waiting lost its payload", payloads)
	}
	if d, err := s.Outbox.Lookup(ctx, "waiting", "https://r.example/h"); err != nil || string(d.Payload) != `{}` {
		t.Fatalf("the delivery left = %+v, %v; want its payload", d, err)
	}
}

// TestTheSchemaGuardKnowsWhereSQLiteKeepsThePayload: on SQLite, courier's
// tables are courier_outbox without a payload and courier_outbox_payload
// beside it (migration 13); Open refuses either altered.
func TestTheSchemaGuardKnowsWhereSQLiteKeepsThePayload(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		alter, want string
	}{
		{"ALTER TABLE courier_outbox ADD COLUMN payload BLOB", "table courier_outbox: column payload is not courier's"},
		{"DROP TABLE courier_outbox_payload", "table courier_outbox_payload is missing"},
		{"ALTER TABLE courier_outbox_payload ADD COLUMN size INTEGER", "table courier_outbox_payload: column size is not courier's"},
	} {
		t.Run(tt.alter, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db := openFile(t, filepath.Join(t.TempDir(), "courier.db"))
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, tt.alter); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(ctx, db, store.Config{})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, courier.CodeSchemaAltered) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open = %v, want schema_altered: %s", err, tt.want)
			}
		})
	}
}

// TestAnEnqueueWhosePayloadFailsLeavesNothing: a delivery and its payload
// are two statements on SQLite, and a failed statement leaves SQLite's
// transaction going. An enqueue whose payload could not be written left
// the delivery's row in the caller's transaction, so an enqueue made again
// there found it (Existed) with no payload, and the delivery, committed,
// was quarantined at its claim, never sent. The two are written under a
// savepoint: the failure undoes both, and the enqueue made again writes
// the delivery whole.
func TestAnEnqueueWhosePayloadFailsLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := storeAt(t)
	// A payload write refused while refuse_payloads holds a row.
	for _, stmt := range []string{
		"CREATE TABLE refuse_payloads (x INTEGER)",
		`CREATE TRIGGER refuse_payload BEFORE INSERT ON courier_outbox_payload
		 WHEN EXISTS (SELECT 1 FROM refuse_payloads) BEGIN SELECT RAISE(ABORT, 'payload refused'); END`,
	} {
		if _, err := s.DB().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	p := store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/h", Payload: []byte(`{"id":"n-1"}`)}
	if _, err := tx.ExecContext(ctx, "INSERT INTO refuse_payloads VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.Enqueue(ctx, tx, p); err == nil {
		t.Fatal("Enqueue with its payload refused succeeded")
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM refuse_payloads"); err != nil {
		t.Fatal(err)
	}
	e, err := s.Outbox.Enqueue(ctx, tx, p)
	if err != nil || e.Existed {
		t.Fatalf("Enqueue made again = %+v, %v; want the delivery written anew, not Existed (the failed one left nothing)", e, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(c) != 1 || string(c[0].Payload) != string(p.Payload) {
		t.Fatalf("claim = %d deliveries, %v; want n-1 with its payload", len(c), err)
	}
}

// TestANewerSchemaWithoutAnIndexThisCourierNamesIsRefused: on a newer
// courier's schema the guard compared the columns alone, leaving the
// indexes and triggers to the newer courier "to keep or replace". But
// SQLite's queries name indexes (INDEXED BY: a claim's
// courier_outbox_leases, a listing's courier_outbox_listed), and a
// statement naming one that is gone fails to prepare: this courier opened
// on such a schema and then failed the calls that name it, with no word
// of the schema. A newer courier keeps what an earlier one relies on, as
// it keeps its columns; one that did not is refused at Open
// (schema_altered, naming what is missing), as on this courier's own
// schema.
func TestANewerSchemaWithoutAnIndexThisCourierNamesIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := openFile(t, path)
	if _, err := db.ExecContext(ctx, `DROP INDEX courier_outbox_listed;
		CREATE INDEX courier_outbox_listed_newer ON courier_outbox (status, priority);
		INSERT INTO courier_schema (version, applied_at) SELECT MAX(version) + 1, 1 FROM courier_schema`); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(ctx, db, store.Config{})
	if err == nil {
		_, listErr := s.Outbox.List(ctx, store.ListParams{Status: courier.StatusFailed})
		s.Close()
		t.Fatalf("Open on a newer schema without courier_outbox_listed = nil, and a listing by status then = %v; want Open to refuse it, schema_altered", listErr)
	}
	if want := "table courier_outbox: index courier_outbox_listed is missing"; !errors.Is(err, courier.CodeSchemaAltered) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open = %v, want schema_altered: %s", err, want)
	}
}

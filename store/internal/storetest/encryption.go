package storetest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/store"
)

func payloadKey(t *testing.T, id string, fill byte) store.PayloadKey {
	t.Helper()
	k, err := store.NewPayloadKey(id, bytes.Repeat([]byte{fill}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testEncryption(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	reopen := func(enc *store.Encryption) *bundle { t.Helper(); return b.reopened(t, enc) }
	storedPayload := func(id int64) (payload []byte, keyID string) {
		t.Helper()
		row := b.db.QueryRowxContext(b.ctx, b.db.Rebind("SELECT p.payload, o.payload_key_id FROM courier_outbox AS o JOIN "+payloadTable(b.store)+" AS p ON p.id = o.id WHERE o.id = ?"), id)
		if err := row.Scan(&payload, &keyID); err != nil {
			t.Fatal(err)
		}
		return payload, keyID
	}

	first := b.enqueue(t, delivery("e-1"))
	raw, keyID := storedPayload(first.ID)
	if keyID != "k1" || bytes.Contains(raw, []byte("e-1")) || len(raw) <= len(delivery("e-1").Payload) {
		t.Fatalf("stored payload %q under key %q is not sealed", raw, keyID)
	}
	if d := b.get(t, first.ID); !bytes.Equal(d.Payload, delivery("e-1").Payload) || d.PayloadKeyID != "k1" {
		t.Fatalf("Get = %q under %q", d.Payload, d.PayloadKeyID)
	}

	// Rotation: k2 seals new rows, k1 still opens old ones.
	rotated := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k1, k2}})
	second := rotated.enqueue(t, delivery("e-2"))
	if _, keyID := storedPayload(second.ID); keyID != "k2" {
		t.Fatalf("new row sealed with %q, want k2", keyID)
	}
	claimed := rotated.claim(t, "w", 10, time.Minute)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want both rows", len(claimed))
	}
	for _, c := range claimed {
		if !bytes.Equal(c.Payload, delivery(c.NotificationID).Payload) {
			t.Fatalf("claimed payload %q", c.Payload)
		}
		if err := rotated.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}

	// k1 retired: a row it sealed cannot be opened and is quarantined; a
	// sealed payload moved to another row does not open either.
	old := b.enqueue(t, delivery("e-3"))
	var ids []int64
	for i := range 2 {
		ids = append(ids, rotated.enqueue(t, delivery(fmt.Sprintf("e-%d", 4+i))).ID)
	}
	moved, _ := storedPayload(ids[0])
	b.alterPayload(t, ids[1], moved)
	retired := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k2}})
	claimed = retired.claim(t, "w", 10, time.Minute)
	var got []int64
	for _, c := range claimed {
		got = append(got, c.DeliveryID)
	}
	if !slices.Equal(got, []int64{ids[0]}) {
		t.Fatalf("claimed %v, want only %d", got, ids[0])
	}
	for _, id := range []int64{old.ID, ids[1]} {
		if d := retired.get(t, id); d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodePayloadUnreadable || d.Payload != nil {
			t.Fatalf("row %d is %s/%s, want quarantined/payload_unreadable", id, d.Status, d.LastErrorCode)
		}
	}

	// Keys never print, by fmt, JSON or slog.
	enc := store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}
	asJSON, err := json.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "key", k1, "encryption", enc, "ptr", &enc)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "key", k1, "encryption", enc, "ptr", &enc)
	for _, s := range []string{fmt.Sprint(k1), fmt.Sprintf("%v %+v %#v", k1, k1, k1), fmt.Sprint(enc), fmt.Sprintf("%+v %#v", &enc, &enc), string(asJSON), logged.String()} {
		if bytes.Contains([]byte(s), bytes.Repeat([]byte{1}, 4)) || strings.Contains(s, strings.Repeat("01", 16)) || strings.Contains(s, "AQEBAQEB") {
			t.Fatalf("key material printed: %q", s)
		}
	}
}

// testEncryptedDigestIsNotGuessable shows the finding "encryption at rest
// leaks guessable payloads" fixed: with encryption on, the digest stored
// beside a sealed payload (and shown by Get, hence admin) is keyed. It is
// neither the payload's SHA-256 nor that of any guess from a dictionary
// that recovers a plaintext row's payload at once, and two rows with one
// payload store two digests. The digest still guards the row: one
// rewritten to the plaintext's SHA-256 is quarantined at claim. After a
// rotation rows sealed under the old key still verify and open, and
// enqueueing the same delivery again is still a no-op, compared under the
// row's own key.
func testEncryptedDigestIsNotGuessable(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	reopen := func(enc *store.Encryption) *bundle { t.Helper(); return b.reopened(t, enc) }
	storedDigest := func(id int64) string {
		t.Helper()
		var digest string
		if err := b.db.GetContext(b.ctx, &digest, b.db.Rebind("SELECT payload_sha256 FROM courier_outbox WHERE id = ?"), id); err != nil {
			t.Fatal(err)
		}
		return digest
	}
	// A payload anyone can guess: an amount in cents. The dictionary holds
	// the SHA-256 of every amount up to 1,000.00, computed once for all
	// the guesses below.
	amount := func(cents int) []byte {
		return append(strconv.AppendInt([]byte(`{"amount_cents":`), int64(cents), 10), '}')
	}
	dictionary := make(map[string]int, 100_000)
	for cents := range 100_000 {
		sum := sha256.Sum256(amount(cents))
		dictionary[hex.EncodeToString(sum[:])] = cents
	}
	guess := func(digest string) (int, bool) {
		cents, ok := dictionary[digest]
		return cents, ok
	}
	const secret = 42_017
	withAmount := func(id string) store.EnqueueParams {
		p := delivery(id)
		p.Payload = amount(secret)
		return p
	}

	// The attack works on a row stored without encryption.
	plainStore := reopen(nil)
	plain := plainStore.enqueue(t, withAmount("plain"))
	if cents, ok := guess(storedDigest(plain.ID)); !ok || cents != secret {
		t.Fatalf("the dictionary does not recover a plaintext row's payload (got %d, %v): the test proves nothing", cents, ok)
	}

	sealed := []store.Enqueued{b.enqueue(t, withAmount("sealed-1")), b.enqueue(t, withAmount("sealed-2"))}
	digests := []string{storedDigest(sealed[0].ID), storedDigest(sealed[1].ID)}
	for i, d := range digests {
		if cents, ok := guess(d); ok {
			t.Fatalf("sealed row %d: its stored digest is the SHA-256 of the guess %d", i, cents)
		}
		if got := b.get(t, sealed[i].ID).PayloadSHA256; got != d {
			t.Fatalf("Get shows digest %q, the row stores %q", got, d)
		}
	}
	if digests[0] == digests[1] {
		t.Fatal("two rows with one payload store one digest")
	}

	// Tampering: a sealed row's digest rewritten to the plaintext's SHA-256.
	tampered := b.enqueue(t, withAmount("tampered"))
	sum := sha256.Sum256(amount(secret))
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET payload_sha256 = ? WHERE id = ?"), hex.EncodeToString(sum[:]), tampered.ID); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, withAmount("retired")) // sealed under k1, which is retired below

	// Rotation: k2 seals new rows; k1's rows still verify and open, and
	// enqueueing one of them again is a no-op.
	rotated := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k1, k2}})
	again := withAmount("sealed-1")
	tx := rotated.begin(t)
	e, err := rotated.store.Outbox.Enqueue(b.ctx, tx, again)
	if err != nil || !e.Existed || e.ID != sealed[0].ID {
		tx.Rollback()
		t.Fatalf("the same enqueue after a rotation = %+v, %v; want the existing row %d", e, err, sealed[0].ID)
	}
	other := withAmount("sealed-1")
	other.Payload = amount(secret + 1)
	if _, err := rotated.store.Outbox.Enqueue(b.ctx, tx, other); !errors.Is(err, courier.CodeIdempotencyCollision) {
		tx.Rollback()
		t.Fatalf("another payload under the same identity after a rotation = %v, want CodeIdempotencyCollision", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	fresh := rotated.enqueue(t, withAmount("fresh"))
	if d := storedDigest(fresh.ID); d == digests[0] || d == digests[1] {
		t.Fatal("a row sealed under k2 stores a digest of a k1 row")
	}

	// courier's Ack is computed from the notification id and the payload's
	// digest: what a succeeded row stores of it is keyed too when sealed.
	ackDigest := func(id string, payload []byte) string { return ack.Digest(ack.New(id, payload).Marshal()) }
	guessAck := func(id, digest string) (int, bool) {
		for cents := range 100_000 {
			if ackDigest(id, amount(cents)) == digest {
				return cents, true
			}
		}
		return 0, false
	}
	claimed := map[string]bool{}
	ids := map[string]int64{}
	for _, c := range rotated.claim(t, "w", 10, time.Minute) {
		claimed[c.NotificationID], ids[c.NotificationID] = true, c.DeliveryID
		if !bytes.Equal(c.Payload, amount(secret)) {
			t.Fatalf("%s: claimed payload %q", c.NotificationID, c.Payload)
		}
		if c.PayloadSHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: the worker is handed digest %q, not the payload's SHA-256", c.NotificationID, c.PayloadSHA256)
		}
		switch c.NotificationID {
		case "retired":
			if _, err := rotated.proto().Release(b.ctx, c.Lease); err != nil {
				t.Fatal(err)
			}
		case "plain", "sealed-1":
			if err := rotated.complete(c.Lease, ackDigest(c.NotificationID, c.Payload)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := rotated.get(t, ids["plain"]).AckSHA256; d != ackDigest("plain", amount(secret)) {
		t.Fatalf("a plaintext row stores Ack digest %q, want the Ack's SHA-256", d)
	} else if cents, ok := guessAck("plain", d); !ok || cents != secret {
		t.Fatalf("the dictionary does not recover a plaintext row's payload from its Ack digest (got %d, %v): the test proves nothing", cents, ok)
	}
	if d := rotated.get(t, ids["sealed-1"]).AckSHA256; d == "" || !wire.IsDigest(d) {
		t.Fatalf("a sealed row stores Ack digest %q, want a keyed digest", d)
	} else if cents, ok := guessAck("sealed-1", d); ok {
		t.Fatalf("a sealed row's Ack digest is the SHA-256 of the Ack of the guess %d", cents)
	}
	for _, id := range []string{"sealed-1", "sealed-2", "fresh", "plain", "retired"} {
		if !claimed[id] {
			t.Errorf("%s was not claimed", id)
		}
	}
	if claimed["tampered"] {
		t.Error("the row with a rewritten digest was claimed")
	}
	if d := rotated.get(t, tampered.ID); d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodeIntegrity {
		t.Fatalf("the row with a rewritten digest is %s/%s, want quarantined/integrity_mismatch", d.Status, d.LastErrorCode)
	}

	// With k1 retired, its row's payload can no longer be compared: the
	// same enqueue again is refused as a collision that says why.
	after := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k2}})
	tx = after.begin(t)
	defer tx.Rollback()
	_, err = after.store.Outbox.Enqueue(b.ctx, tx, withAmount("retired"))
	if !errors.Is(err, courier.CodeIdempotencyCollision) || !strings.Contains(err.Error(), "k1") {
		t.Fatalf("the same enqueue of a row whose key is retired = %v, want an idempotency collision naming key k1", err)
	}
}

// testSealedAckDigestsDoNotMatch: the deliveries of one notification to
// several endpoints, sealed, with the same payload and so the same Ack,
// store different Ack digests: equal digests would show which rows carry
// the same payload, which the keyed payload digests hide.
func testSealedAckDigestsDoNotMatch(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}}})
	for _, endpoint := range []string{"https://a.example/h", "https://b.example/h"} {
		b.enqueue(t, at(endpoint, "n-1"))
	}
	seen := map[string]string{}
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if err := b.complete(c.Lease, ack.Digest(ack.New(c.NotificationID, c.Payload).Marshal())); err != nil {
			t.Fatal(err)
		}
		seen[c.Endpoint] = b.get(t, c.DeliveryID).AckSHA256
	}
	a, bb := seen["https://a.example/h"], seen["https://b.example/h"]
	if len(seen) != 2 || !wire.IsDigest(a) || !wire.IsDigest(bb) || a == bb {
		t.Fatalf("the two sealed deliveries store Ack digests %q and %q, want two different keyed digests", a, bb)
	}
}

// testQuarantinedIsCancelled: a row sealed under k1, claimed by a process
// whose Keys lack k1 (a rotation rolled out in the wrong order), is
// quarantined payload_unreadable. Without an ordering key nothing could
// clear it, and Health stayed blocked for good: Cancel settles it
// (suppressed, cancelled), Health is ok again, and Prune removes it.
func testQuarantinedIsCancelled(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	e := b.enqueue(t, delivery("n-1")) // no ordering key
	s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: &store.Encryption{Current: "k2", Keys: []store.PayloadKey{k2}}})
	if err != nil {
		t.Fatal(err)
	}
	behind := &bundle{db: b.db, store: s, clock: b.clock, ctx: b.ctx}
	if got := behind.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %d, want 0", len(got))
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodePayloadUnreadable {
		t.Fatalf("row is %s/%s, want quarantined/payload_unreadable", d.Status, d.LastErrorCode)
	}
	if h := health(t, b); h.Status != store.HealthBlocked {
		t.Fatalf("health with a quarantined row: %s, want blocked", h.Status)
	}
	if err := b.store.Outbox.Cancel(b.ctx, e.ID); err != nil {
		t.Fatalf("Cancel of a quarantined row: %v", err)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled row is %s/%s, want suppressed/cancelled", d.Status, d.LastErrorCode)
	}
	if h := health(t, b); h.Status != store.HealthOK {
		t.Fatalf("health once it is cancelled: %s %s, want ok", h.Status, h.Code)
	}
	b.clock.Advance(48 * time.Hour)
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Hour}); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the cancelled row removed", n, err)
	}
}

// testEncryptionIsCopiedAtOpen: the Store keeps its own copy of
// Config.Encryption. Changing the caller's afterwards (a Current that is
// not among the Keys, which Open refuses) changed the Store's and made
// every Enqueue panic.
func testEncryptionIsCopiedAtOpen(t *testing.T, open OpenFunc) {
	enc := &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}}
	b := setup(t, open, store.Config{Encryption: enc})
	enc.Current, enc.Keys[0] = "k2", payloadKey(t, "k2", 2)
	e := b.enqueue(t, delivery("n-1"))
	if d := b.get(t, e.ID); d.PayloadKeyID != "k1" || string(d.Payload) != string(delivery("n-1").Payload) {
		t.Fatalf("delivery sealed under %q (payload %q), want k1, the key the Store was opened with", d.PayloadKeyID, d.Payload)
	}
}

// testInboxUnderEncryption: with Encryption on, an inbox record stores
// neither the body's plain digest nor an answer that holds it (courier's
// Ack does), and two records of one body show nothing in common; yet a
// redelivery is still told from a collision, and answered byte for byte,
// under the key the record was kept with, whichever key is Current. A
// record kept before encryption was turned on is read as it was stored;
// one whose key is gone is refused payload_unreadable, not taken for a
// collision, with nothing written.
func testInboxUnderEncryption(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	plain := setup(t, open, store.Config{})
	reopen := func(enc *store.Encryption) protocol.Inbox {
		s, err := openStore(t, plain.ctx, plain.db, store.Config{Now: plain.clock.Now, Encryption: enc})
		if err != nil {
			t.Fatal(err)
		}
		return protocol.InboxFor(s)
	}
	body := []byte(`{"id":"n-1","status":"done"}`)
	key := func(id string) protocol.InboxKey {
		return protocol.InboxKey{Sender: "sender-a", Key: id, PayloadSHA256: ack.Digest(body)}
	}
	answer := func(id string) []byte { return ack.New(id, body).Marshal() }
	inTx := func(fn func(tx *sqlx.Tx) error) {
		t.Helper()
		tx := plain.begin(t)
		if err := fn(tx); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	replays := func(in protocol.Inbox, id string) {
		t.Helper()
		tx := plain.begin(t)
		defer tx.Rollback()
		r, err := in.Record(plain.ctx, tx, key(id))
		if err != nil || r.Fresh || r.InProgress || !bytes.Equal(r.Ack, answer(id)) {
			t.Fatalf("redelivery of %s = %+v, %v, want its answer", id, r, err)
		}
		other := key(id)
		other.PayloadSHA256 = ack.Digest([]byte("another body"))
		if _, err := in.Record(plain.ctx, tx, other); !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Fatalf("another body under %s = %v, want a collision", id, err)
		}
	}

	// Kept before encryption: stored as received.
	inTx(func(tx *sqlx.Tx) error {
		_, err := protocol.InboxFor(plain.store).RecordCompleted(plain.ctx, tx, key("before"), answer("before"))
		return err
	})

	// Under k1, by each way a receiver records.
	sealed := reopen(&store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}})
	inTx(func(tx *sqlx.Tx) error {
		if _, err := sealed.Record(plain.ctx, tx, key("two-step")); err != nil {
			return err
		}
		return sealed.Complete(plain.ctx, tx, key("two-step"), answer("two-step"))
	})
	inTx(func(tx *sqlx.Tx) error {
		_, err := sealed.RecordCompleted(plain.ctx, tx, key("one-step"), answer("one-step"))
		return err
	})
	_, claim, err := sealed.Claim(plain.ctx, key("claimed"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inTx(func(tx *sqlx.Tx) error { return sealed.CompleteClaim(plain.ctx, tx, claim, answer("claimed")) })

	type row struct {
		Key    string `db:"dedupe_key"`
		Digest string `db:"payload_sha256"`
		KeyID  string `db:"payload_key_id"`
		Ack    []byte `db:"ack"`
	}
	var rows []row
	if err := plain.db.SelectContext(plain.ctx, &rows, "SELECT dedupe_key, payload_sha256, payload_key_id, ack FROM courier_inbox ORDER BY dedupe_key"); err != nil {
		t.Fatal(err)
	}
	digests := map[string]bool{}
	for _, r := range rows {
		if r.Key == "before" {
			if r.KeyID != "" || r.Digest != ack.Digest(body) || !bytes.Equal(r.Ack, answer("before")) {
				t.Fatalf("the record kept before encryption was rewritten: %+v", r)
			}
			continue
		}
		if r.KeyID != "k1" || r.Digest == ack.Digest(body) || !wire.IsDigest(r.Digest) ||
			bytes.Contains(r.Ack, []byte(ack.Digest(body))) || bytes.Contains(r.Ack, []byte(r.Key)) {
			t.Fatalf("record %s stores digest %q under %q and answer %q: not keyed and sealed", r.Key, r.Digest, r.KeyID, r.Ack)
		}
		digests[r.Digest] = true
	}
	if len(rows) != 4 || len(digests) != 3 {
		t.Fatalf("%d records with %d distinct digests, want 4 and the 3 sealed ones distinct", len(rows), len(digests))
	}
	for _, id := range []string{"before", "two-step", "one-step", "claimed"} {
		replays(sealed, id)
	}

	// Rotated: k2 is Current, k1 still reads what it kept. A claim left
	// processing under k1 and taken over is completed under k2.
	_, stale, err := sealed.Claim(plain.ctx, key("taken-over"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	plain.clock.Advance(2 * time.Minute)
	rotated := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k1, k2}})
	r, taken, err := rotated.Claim(plain.ctx, key("taken-over"), time.Minute)
	if err != nil || !r.Fresh {
		t.Fatalf("taking over a stale claim kept under k1 = %+v, %v", r, err)
	}
	inTx(func(tx *sqlx.Tx) error { return rotated.CompleteClaim(plain.ctx, tx, taken, answer("taken-over")) })
	tx := plain.begin(t)
	if err := sealed.CompleteClaim(plain.ctx, tx, stale, answer("taken-over")); !errors.Is(err, courier.CodeLeaseLost) {
		t.Fatalf("completing the claim taken over = %v, want lease_lost", err)
	}
	tx.Rollback()
	for _, id := range []string{"before", "two-step", "one-step", "claimed", "taken-over"} {
		replays(rotated, id)
	}

	// k1 retired: its records are refused, not taken for collisions; k2's
	// and the plain one still answer.
	retired := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k2}})
	replays(retired, "taken-over")
	replays(retired, "before")
	tx = plain.begin(t)
	defer tx.Rollback()
	if _, err := retired.Record(plain.ctx, tx, key("two-step")); courier.CodeOf(err) != courier.CodePayloadUnreadable || !strings.Contains(err.Error(), "payload key k1") {
		t.Fatalf("redelivery of a record kept under a retired key = %v, want payload_unreadable naming key k1", err)
	}
}

// testInboxRecordUnderOtherBytesOfItsKeyIsUnreadable: a receiver whose
// Keys hold the id its records were kept under over other bytes (a key
// generated again under an id in use) cannot compare a body with a
// completed record: a redelivery was taken for a collision, a 409 its
// sender fails for good. It is refused payload_unreadable (503), as for a
// key that is gone, by every way a receiver records and whatever body
// comes, since the record's answer does not open. Under the right key the
// record still answers its body and takes another for a collision. A
// record still processing stores no answer to tell by: a body compared
// with it under the wrong key is a collision, as the Encryption doc says.
func testInboxRecordUnderOtherBytesOfItsKeyIsUnreadable(t *testing.T, open OpenFunc) {
	k1, regenerated := payloadKey(t, "k1", 1), payloadKey(t, "k1", 9)
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	right := protocol.InboxFor(b.store)
	s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{regenerated}}})
	if err != nil {
		t.Fatal(err)
	}
	wrong := protocol.InboxFor(s)
	body, other := []byte(`{"id":"n-1"}`), []byte(`{"id":"n-1","other":true}`)
	key := func(id string, body []byte) protocol.InboxKey {
		return protocol.InboxKey{Sender: "sender-a", Key: id, PayloadSHA256: ack.Digest(body)}
	}
	answer := ack.New("done", body).Marshal()

	tx := b.begin(t)
	if _, err := right.RecordCompleted(b.ctx, tx, key("done", body), answer); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r, _, err := right.Claim(b.ctx, key("processing", body), time.Minute); err != nil || !r.Fresh {
		t.Fatalf("Claim = %+v, %v", r, err)
	}

	for _, k := range []protocol.InboxKey{key("done", body), key("done", other)} {
		if _, _, err := wrong.Claim(b.ctx, k, time.Minute); courier.CodeOf(err) != courier.CodePayloadUnreadable {
			t.Fatalf("Claim of %s under k1 over other bytes = %v (code %s), want payload_unreadable", k.PayloadSHA256, err, courier.CodeOf(err))
		}
	}
	tx = b.begin(t)
	defer tx.Rollback()
	for _, k := range []protocol.InboxKey{key("done", body), key("done", other)} {
		if _, err := wrong.Record(b.ctx, tx, k); courier.CodeOf(err) != courier.CodePayloadUnreadable || !strings.Contains(err.Error(), "payload key k1") {
			t.Fatalf("Record of %s under k1 over other bytes = %v (code %s), want payload_unreadable naming key k1", k.PayloadSHA256, err, courier.CodeOf(err))
		}
		if _, err := wrong.RecordCompleted(b.ctx, tx, k, answer); courier.CodeOf(err) != courier.CodePayloadUnreadable {
			t.Fatalf("RecordCompleted of %s under k1 over other bytes = %v (code %s), want payload_unreadable", k.PayloadSHA256, err, courier.CodeOf(err))
		}
	}
	if r, err := right.Record(b.ctx, tx, key("done", body)); err != nil || !bytes.Equal(r.Ack, answer) {
		t.Fatalf("redelivery under the right key = %+v, %v; want its answer", r, err)
	}
	if _, err := right.Record(b.ctx, tx, key("done", other)); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("another body under the right key = %v, want a collision", err)
	}
	if _, err := wrong.Record(b.ctx, tx, key("processing", body)); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("a body compared with a record still processing under k1 over other bytes = %v, want a collision", err)
	}
}

// testUnreadableQuarantineIsRedriven: a process whose Keys hold k1 over
// other bytes, or lack k1, quarantines every row sealed under k1 it
// claims payload_unreadable, though the rows are intact, and Redrive did
// not take them back: only Cancel was left. Once the keys are fixed,
// Redrive sends them again as it sends failed ones: with a fresh budget,
// the head that held its ordering key first. A row redriven while its key
// is still wrong is quarantined again at its next claim; a row whose
// digest was altered (integrity_mismatch) stays quarantined.
func testUnreadableQuarantineIsRedriven(t *testing.T, open OpenFunc) {
	k1 := payloadKey(t, "k1", 1)
	b := setup(t, open, store.Config{MaxAttempts: 3, Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	reopen := func(keys ...store.PayloadKey) *bundle {
		t.Helper()
		s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: &store.Encryption{Current: keys[0].ID(), Keys: keys}})
		if err != nil {
			t.Fatal(err)
		}
		return &bundle{db: b.db, store: s, clock: b.clock, ctx: b.ctx}
	}
	regenerated, missing := reopen(payloadKey(t, "k1", 9)), reopen(payloadKey(t, "k2", 2))
	status := func(id int64, st courier.Status, code courier.Code) {
		t.Helper()
		if d := b.get(t, id); d.Status != st || d.LastErrorCode != code {
			t.Fatalf("delivery %s is %s/%s, want %s/%s", d.NotificationID, d.Status, d.LastErrorCode, st, code)
		}
	}

	altered := b.enqueue(t, delivery("altered"))
	b.quarantineAltered(t, altered.ID)
	status(altered.ID, courier.StatusQuarantined, courier.CodeIntegrity)

	head, behind, free := b.enqueue(t, keyed("head", "o")), b.enqueue(t, keyed("behind", "o")), b.enqueue(t, delivery("free"))
	if got := regenerated.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("under k1 over other bytes claimed %v, want none", ids(got))
	}
	status(head.ID, courier.StatusQuarantined, courier.CodePayloadUnreadable)
	status(free.ID, courier.StatusQuarantined, courier.CodePayloadUnreadable)
	if blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 10); err != nil || len(blocked) != 1 || blocked[0].Head != head.ID {
		t.Fatalf("BlockedKeys = %+v, %v; want o held by head", blocked, err)
	}

	// Redriven while the key is still wrong (here missing): quarantined again.
	if n, err := missing.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: free.ID}); err != nil || n != 1 {
		t.Fatalf("Redrive of a row quarantined payload_unreadable = %d, %v; want 1", n, err)
	}
	status(free.ID, courier.StatusPending, "")
	if got := missing.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("without k1 claimed %v, want none", ids(got))
	}
	status(free.ID, courier.StatusQuarantined, courier.CodePayloadUnreadable)

	// The keys fixed: Redrive takes both back, never the altered row.
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: altered.ID}); err != nil || n != 0 {
		t.Fatalf("Redrive of the altered row = %d, %v; want 0", n, err)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{}); err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v; want the 2 rows quarantined payload_unreadable", n, err)
	}
	status(altered.ID, courier.StatusQuarantined, courier.CodeIntegrity)
	for _, id := range []int64{head.ID, free.ID} {
		if d := b.get(t, id); d.Status != courier.StatusPending || d.MaxAttempts != d.Attempts+3 {
			t.Fatalf("redriven %s is %s with %d of %d attempts made, want pending with 3 more", d.NotificationID, d.Status, d.Attempts, d.MaxAttempts)
		}
	}
	c := b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"head", "free"}) {
		t.Fatalf("after the redrive claimed %v, want head and free (behind waits for head)", got)
	}
	for _, d := range c {
		if !bytes.Equal(d.Payload, delivery(d.NotificationID).Payload) {
			t.Fatalf("%s claimed with payload %q", d.NotificationID, d.Payload)
		}
		if err := b.complete(d.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"behind"}) {
		t.Fatalf("once head succeeded claimed %v, want behind", got)
	}
	status(behind.ID, courier.StatusLeased, "")
}

// testRepublishAfterItsKeyIsDroppedIsACollision: the Encryption doc says
// to keep a retired key for as long as any stored delivery sealed under
// it exists, delivered or not. Publishing an event again whose delivery
// succeeded under a key since dropped cannot compare its payload: the
// publish fails as an idempotency collision naming the key, the row as it
// was. With the key back in Keys (no longer Current) the same publish
// finds the row, Existed; once Prune has deleted it, a publish without
// the key writes the delivery anew.
func testRepublishAfterItsKeyIsDroppedIsACollision(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	if _, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", "https://a.example/h", "key-1", "*")); err != nil {
		t.Fatal(err)
	}
	event := store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":1}`)}
	publish := func(keys ...store.PayloadKey) ([]store.Published, error) {
		t.Helper()
		s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: &store.Encryption{Current: "k2", Keys: keys}})
		if err != nil {
			t.Fatal(err)
		}
		tx := b.begin(t)
		defer tx.Rollback()
		p, err := s.Outbox.Publish(b.ctx, tx, event)
		if err == nil {
			err = tx.Commit()
		}
		return p, err
	}
	tx := b.begin(t)
	first, err := b.store.Outbox.Publish(b.ctx, tx, event)
	if err != nil || len(first) != 1 {
		tx.Rollback()
		t.Fatalf("Publish = %+v, %v", first, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if err := b.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}

	p, err := publish(k2)
	if !errors.Is(err, courier.CodeIdempotencyCollision) || !strings.Contains(err.Error(), "k1") {
		t.Fatalf("publish again of a delivery that succeeded under k1, dropped since = %+v, %v; want a collision naming k1", p, err)
	}
	if d := b.get(t, first[0].ID); d.Status != courier.StatusSucceeded || d.PayloadKeyID != "k1" {
		t.Fatalf("the delivered row is %s under %q, want succeeded under k1", d.Status, d.PayloadKeyID)
	}
	if p, err := publish(k1, k2); err != nil || len(p) != 1 || !p[0].Existed || p[0].ID != first[0].ID {
		t.Fatalf("publish again with k1 back in Keys = %+v, %v; want the delivered row, Existed", p, err)
	}

	b.clock.Advance(2 * time.Hour)
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Hour}); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the delivered row deleted", n, err)
	}
	p, err = publish(k2)
	if err != nil || len(p) != 1 || p[0].Existed {
		t.Fatalf("publish again once the row was pruned = %+v, %v; want a new delivery", p, err)
	}
	if d := b.get(t, p[0].ID); d.PayloadKeyID != "k2" {
		t.Fatalf("the new delivery is sealed under %q, want k2", d.PayloadKeyID)
	}
}

// testEncryptionLifecycle follows an operator through turning encryption
// on over plaintext rows, a rotation rolled out to one process before the
// other, and a retirement.
func testEncryptionLifecycle(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	plain := setup(t, open, store.Config{})
	reopen := func(enc *store.Encryption) *bundle { t.Helper(); return plain.reopened(t, enc) }
	check := func(b *bundle) store.Health {
		t.Helper()
		h, err := b.store.Outbox.Check(b.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	oldPlain := plain.enqueue(t, delivery("plain-1"))
	plain.enqueue(t, keyed("plain-k", "o"))

	on := reopen(&store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}})
	if h := check(on); len(h.Invalid) != 0 {
		t.Fatalf("Check once encryption is on over plaintext rows: invalid %v", h.Invalid)
	}
	if e, err := inCommitted(t, on, func(tx *sqlx.Tx) (store.Enqueued, error) {
		return on.store.Outbox.Enqueue(on.ctx, tx, delivery("plain-1"))
	}); err != nil || !e.Existed || e.ID != oldPlain.ID {
		t.Fatalf("the same enqueue of a plaintext row with encryption on = %+v, %v", e, err)
	}
	sealed := on.enqueue(t, delivery("sealed-1"))
	got := map[string]bool{}
	for _, c := range on.claim(t, "w", 10, time.Minute) {
		got[c.NotificationID] = true
		if !bytes.Equal(c.Payload, delivery(c.NotificationID).Payload) {
			t.Fatalf("%s: claimed %q", c.NotificationID, c.Payload)
		}
		if err := on.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 3 {
		t.Fatalf("claimed %v, want the two plaintext rows and the sealed one", got)
	}

	// Rotation rolled out to one process: "ahead" makes k2 Current while
	// "behind" still knows k1 alone.
	ahead := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k1, k2}})
	behind := on
	r2 := ahead.enqueue(t, delivery("sealed-2"))
	if c := behind.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("behind claimed %v", ids(c))
	}
	if d := ahead.get(t, r2.ID); d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodePayloadUnreadable || d.PayloadKeyID != "k2" {
		t.Fatalf("row sealed under k2 claimed by a process without it: %s/%s under %q", d.Status, d.LastErrorCode, d.PayloadKeyID)
	}
	if h := health(t, ahead); h.Status != store.HealthBlocked {
		t.Fatalf("health with an unreadable quarantine: %s", h.Status)
	}
	behind = reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k1, k2}})
	if n, err := behind.store.Outbox.Redrive(behind.ctx, store.RedriveParams{}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	c := behind.claim(t, "w", 10, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != r2.ID || !bytes.Equal(c[0].Payload, delivery("sealed-2").Payload) {
		t.Fatalf("after the redrive claimed %v", ids(c))
	}
	if err := behind.complete(c[0].Lease, "a"); err != nil {
		t.Fatal(err)
	}

	// k1 retired while a row it sealed is still pending: Check says so
	// before any claim quarantines it.
	pending := on.enqueue(t, delivery("sealed-3"))
	retired := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k2}})
	if h := check(retired); !slices.Contains(h.Invalid, pending.ID) {
		t.Fatalf("Check without k1: invalid %v, want %d among them", h.Invalid, pending.ID)
	}
	if d := retired.get(t, sealed.ID); d.Payload != nil || d.PayloadKeyID != "k1" {
		t.Fatalf("Get of a succeeded row under a retired key = %q under %q", d.Payload, d.PayloadKeyID)
	}

	// Prune takes the finished sealed rows, whatever their keys.
	plain.clock.Advance(2 * time.Hour)
	if n, err := retired.store.Outbox.Prune(retired.ctx, store.PruneParams{OlderThan: time.Hour}); err != nil || n != 4 {
		t.Fatalf("Prune = %d, %v; want the 4 succeeded rows", n, err)
	}
}

// testEnqueueAgainUnderOtherBytesOfItsKey: a process whose Keys hold the
// id a delivery was sealed under over other bytes (a key generated again
// under an id in use) cannot compare a payload with the row. The same
// enqueue again was refused as a plain idempotency collision, "same
// identity, different content", which it is not, and which names no key:
// the operator looks for a bug in the application rather than in the
// keys. It is refused as for a key that is gone, naming the key.
func testEnqueueAgainUnderOtherBytesOfItsKey(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}}})
	e := b.enqueue(t, delivery("n-1"))
	s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 9)}}})
	if err != nil {
		t.Fatal(err)
	}
	tx := b.begin(t)
	defer tx.Rollback()
	_, err = s.Outbox.Enqueue(b.ctx, tx, delivery("n-1"))
	if !errors.Is(err, courier.CodeIdempotencyCollision) || !strings.Contains(err.Error(), "k1") {
		t.Fatalf("the same enqueue under k1 over other bytes = %v; want a collision naming key k1", err)
	}
	if d := b.get(t, e.ID); d.Status != courier.StatusPending || !bytes.Equal(d.Payload, delivery("n-1").Payload) {
		t.Fatalf("the row is %s with %q, want pending as it was", d.Status, d.Payload)
	}
	// Under the right key another payload is a collision that names none.
	other := delivery("n-1")
	other.Payload = []byte(`{"notification_id":"n-1","other":true}`)
	if _, err := b.store.Outbox.Enqueue(b.ctx, tx, other); !errors.Is(err, courier.CodeIdempotencyCollision) || strings.Contains(err.Error(), "k1") {
		t.Fatalf("another payload under the right key = %v; want a plain collision", err)
	}
}

// testKeysInUse: KeysInUse counts, by key id, the deliveries and the inbox
// records kept under each payload key, whatever their status, and none
// kept as sent; a retired key counts rows until Prune deletes them.
func testKeysInUse(t *testing.T, open OpenFunc) {
	k1, k2 := payloadKey(t, "k1", 1), payloadKey(t, "k2", 2)
	plain := setup(t, open, store.Config{})
	reopen := func(enc *store.Encryption) *bundle { t.Helper(); return plain.reopened(t, enc) }
	inUse := func(b *bundle, want map[string]int) {
		t.Helper()
		got, err := b.store.KeysInUse(b.ctx)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("KeysInUse = %v, %v; want %v", got, err, want)
		}
	}
	plain.enqueue(t, delivery("plain"))
	plain.processed(t, "plain")
	inUse(plain, map[string]int{})

	under1 := reopen(&store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}})
	done := under1.enqueue(t, delivery("k1-done"))
	under1.enqueue(t, delivery("k1-pending"))
	under1.processed(t, "k1-record")
	for _, c := range under1.claim(t, "w", 10, time.Minute) {
		if c.DeliveryID != done.ID {
			if _, err := under1.proto().Release(under1.ctx, c.Lease); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := under1.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	under2 := reopen(&store.Encryption{Current: "k2", Keys: []store.PayloadKey{k1, k2}})
	under2.enqueue(t, delivery("k2-pending"))
	inUse(under2, map[string]int{"k1": 3, "k2": 1})

	// Prune deletes the finished delivery and the record kept under k1:
	// only its pending delivery still needs it.
	under2.clock.Advance(48 * time.Hour)
	if _, err := under2.store.Outbox.Prune(under2.ctx, store.PruneParams{OlderThan: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := under2.store.Inbox.Prune(under2.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	inUse(under2, map[string]int{"k1": 1, "k2": 1})
}

// reopened returns another Store over b's database and clock, with
// encryption enc: another process sharing the database.
func (b *bundle) reopened(t *testing.T, enc *store.Encryption) *bundle {
	t.Helper()
	s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{db: b.db, store: s, clock: b.clock, ctx: b.ctx}
}

// testSealedPayloadIsBoundToItsSigningKey: the worker signs a delivery
// with the signing configuration its row names (key_id), and a receiver
// shared by several senders' subscriptions (one URL, an account per
// key) files what it receives under the key that signed it. With write
// access to the database but no payload key, changing a sealed row's
// key_id to another subscriber's sent its payload, opened, to that
// subscriber: the associated data bound the notification id and the
// endpoint only. A row so changed does not open: it is quarantined
// payload_unreadable, never sent, and Get and Check show it unreadable.
// A row sealed before the key id was bound still opens as it was sealed.
func testSealedPayloadIsBoundToItsSigningKey(t *testing.T, open OpenFunc) {
	secret := bytes.Repeat([]byte{1}, 32)
	k1, err := store.NewPayloadKey("k1", secret)
	if err != nil {
		t.Fatal(err)
	}
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	signedBy := func(id, keyID string) store.EnqueueParams {
		p := delivery(id)
		p.KeyID = keyID
		return p
	}
	acme := b.enqueue(t, signedBy("acme-1", "acme"))
	b.enqueue(t, signedBy("globex-1", "globex"))
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET key_id = ? WHERE id = ?"), "globex", acme.ID); err != nil {
		t.Fatal(err)
	}
	// Sealed as courier sealed before it bound the key id: the
	// notification id and the endpoint alone.
	legacy := b.enqueue(t, signedBy("legacy-1", "acme"))
	block, err := aes.NewCipher(secret)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	nonce := bytes.Repeat([]byte{7}, aead.NonceSize())
	v1 := aead.Seal(bytes.Clone(nonce), nonce, delivery("legacy-1").Payload,
		[]byte("courier.outbox.payload.v1\x00legacy-1\x00"+delivery("legacy-1").Endpoint))
	b.alterPayload(t, legacy.ID, v1)

	if d := b.get(t, acme.ID); d.Payload != nil {
		t.Errorf("Get of the row whose key_id was changed opens it: %q", d.Payload)
	}
	if h, err := b.store.Outbox.Check(b.ctx, 0); err != nil || !slices.Equal(h.Invalid, []int64{acme.ID}) {
		t.Errorf("Check = invalid %v, %v; want only the row whose key_id was changed, %d", h.Invalid, err, acme.ID)
	}
	claimed := map[string]protocol.Claimed{}
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		claimed[c.NotificationID] = c
	}
	if c, ok := claimed["acme-1"]; ok {
		t.Fatalf("acme's sealed payload was claimed to be signed with key %q: %q", c.KeyID, c.Payload)
	}
	if d := b.get(t, acme.ID); d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodePayloadUnreadable {
		t.Fatalf("the row whose key_id was changed is %s/%s, want quarantined/payload_unreadable", d.Status, d.LastErrorCode)
	}
	for _, id := range []string{"globex-1", "legacy-1"} {
		if c, ok := claimed[id]; !ok || !bytes.Equal(c.Payload, delivery(id).Payload) {
			t.Fatalf("%s claimed %v with %q, want its payload", id, ok, c.Payload)
		}
	}

	// A delivery brought up to date with its subscription's new signing
	// key (a publish again) is sealed again for that key, and opens.
	r := setupRepublish(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}}, false)
	r.update(t, rotateKey)
	r.publish(t)
	if c := r.claim(t, "w", 10, time.Minute); len(c) != 1 || c[0].KeyID != "key-2" || !bytes.Equal(c[0].Payload, r.event.Payload) {
		t.Fatalf("after the subscription's key rotated claimed %v, want its delivery under key-2 with its payload", ids(c))
	}
}

// testAnAttemptSettledAfterItsRowWasSealedAgainKeepsNoPlainAck: a publish
// again brings a leased delivery up to date in place (its subscription's
// key changed), its payload sealed again under the Current key, while the
// attempt in flight settles under what it was claimed with. Claimed while
// the row was stored as sent (encryption being rolled out), that
// attempt's success stored the Ack's plain digest beside the now sealed
// payload: courier's Ack is computed from the notification id and the
// payload's digest, so a dictionary of payloads recovers the payload from
// it. The Ack of an attempt claimed under another payload key than the
// row holds now is kept as "", as for a sealed row whose key is gone.
func testAnAttemptSettledAfterItsRowWasSealedAgainKeepsNoPlainAck(t *testing.T, open OpenFunc) {
	r := setupRepublish(t, open, store.Config{}, false)
	c := r.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].Sealed != "" {
		t.Fatalf("claimed %v, want the delivery stored as sent", ids(c))
	}
	sealed := r.reopened(t, &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}})
	r.update(t, rotateKey)
	if p, err := inCommitted(t, sealed, func(tx *sqlx.Tx) ([]store.Published, error) {
		return sealed.store.Outbox.Publish(sealed.ctx, tx, r.event)
	}); err != nil || len(p) != 1 || p[0].Existed {
		t.Fatalf("publish again under encryption = %+v, %v; want the delivery brought up to date", p, err)
	}
	if d := sealed.get(t, r.first.ID); d.Status != courier.StatusLeased || d.PayloadKeyID != "k1" {
		t.Fatalf("after the publish again the delivery is %s under %q, want leased and sealed under k1", d.Status, d.PayloadKeyID)
	}
	plain := ack.Digest(ack.New(c[0].NotificationID, c[0].Payload).Marshal())
	if err := r.complete(c[0].Lease, plain); err != nil {
		t.Fatal(err)
	}
	if d := sealed.get(t, r.first.ID); d.Status != courier.StatusSucceeded || d.AckSHA256 != "" {
		t.Fatalf("the sealed delivery succeeded as %s with Ack digest %q (the Ack's own: %v), want succeeded with none kept",
			d.Status, d.AckSHA256, d.AckSHA256 == plain)
	}
}

// testHealthSaysPayloadUnreadable: deliveries quarantined because their
// payload cannot be opened (a payload key missing or wrong) made Health
// blocked with integrity_mismatch, the code of a row whose digest no
// longer matches, which Redrive leaves; the operator who reads it, in
// courier health or an alert, was sent after tampering while the rows
// wait, intact, for their key and a Redrive. Health says
// payload_unreadable while those are all that is quarantined, and
// integrity_mismatch once a row was altered.
func testHealthSaysPayloadUnreadable(t *testing.T, open OpenFunc) {
	k1 := payloadKey(t, "k1", 1)
	b := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}}})
	s, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: &store.Encryption{Current: "k2", Keys: []store.PayloadKey{payloadKey(t, "k2", 2)}}})
	if err != nil {
		t.Fatal(err)
	}
	missing := &bundle{db: b.db, store: s, clock: b.clock, ctx: b.ctx}
	b.enqueue(t, delivery("sealed-1"))
	b.enqueue(t, delivery("sealed-2"))
	if got := missing.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("without k1 claimed %v, want none", ids(got))
	}
	want := func(code courier.Code, quarantined int) {
		t.Helper()
		if h := health(t, b); h.Status != store.HealthBlocked || h.Code != code || h.Counts[courier.StatusQuarantined] != quarantined {
			t.Fatalf("Health = %s/%s with %d quarantined, want blocked/%s with %d", h.Status, h.Code, h.Counts[courier.StatusQuarantined], code, quarantined)
		}
	}
	want(courier.CodePayloadUnreadable, 2)

	altered := b.enqueue(t, delivery("altered"))
	b.quarantineAltered(t, altered.ID)
	want(courier.CodeIntegrity, 3)

	// The altered row cancelled and the key back: the unreadable rows are
	// what Health says, then nothing once they are redriven.
	if err := b.store.Outbox.Cancel(b.ctx, altered.ID); err != nil {
		t.Fatal(err)
	}
	want(courier.CodePayloadUnreadable, 2)
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{}); err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v; want the 2 rows quarantined payload_unreadable", n, err)
	}
	if h := health(t, b); h.Status != store.HealthOK {
		t.Fatalf("after the redrive Health = %s/%s, want ok", h.Status, h.Code)
	}
}

// quarantineAltered alters the stored digest of delivery id, as tampering
// with its row would, and has a claim find it: the row is quarantined
// (integrity_mismatch) and nothing is claimed.
func (b *bundle) quarantineAltered(t *testing.T, id int64) {
	t.Helper()
	sum := sha256.Sum256([]byte("another payload"))
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET payload_sha256 = ? WHERE id = ?"), hex.EncodeToString(sum[:]), id); err != nil {
		t.Fatal(err)
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v, want the altered row quarantined", ids(got))
	}
}

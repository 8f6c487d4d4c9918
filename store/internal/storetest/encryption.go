package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
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
	reopen := func(enc *store.Encryption) *bundle {
		s, err := store.Open(b.ctx, b.db, store.Config{Now: b.clock.Now, Encryption: enc})
		if err != nil {
			t.Fatal(err)
		}
		return &bundle{db: b.db, store: s, clock: b.clock, ctx: b.ctx}
	}
	storedPayload := func(id int64) (payload []byte, keyID string) {
		t.Helper()
		row := b.db.QueryRowxContext(b.ctx, b.db.Rebind("SELECT payload, payload_key_id FROM courier_outbox WHERE id = ?"), id)
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
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET payload = ? WHERE id = ?"), moved, ids[1]); err != nil {
		t.Fatal(err)
	}
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

	// Keys never print.
	for _, s := range []string{fmt.Sprint(k1), fmt.Sprintf("%v %+v %#v", k1, k1, k1), fmt.Sprint(store.Encryption{Current: "k1", Keys: []store.PayloadKey{k1}})} {
		if bytes.Contains([]byte(s), bytes.Repeat([]byte{1}, 4)) || strings.Contains(s, strings.Repeat("01", 16)) || strings.Contains(s, "AQEBAQEB") {
			t.Fatalf("key material printed: %q", s)
		}
	}
}

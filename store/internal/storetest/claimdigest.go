package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/store"
)

// testClaimGivesThePayloadsDigest: a claimed delivery's PayloadSHA256 is
// its payload's own SHA-256 in lower-case hex, the form a receiver's Ack
// binds, whether its row is plain (the stored digest, which the payload
// was just matched against, in whatever case it was stored) or sealed
// (whose row keeps a keyed digest instead).
func testClaimGivesThePayloadsDigest(t *testing.T, open OpenFunc) {
	plain := setup(t, open, store.Config{})
	plain.enqueue(t, delivery("d-lower"))
	upper := plain.enqueue(t, delivery("d-upper"))
	if _, err := plain.db.ExecContext(plain.ctx, plain.db.Rebind("UPDATE courier_outbox SET payload_sha256 = upper(payload_sha256) WHERE id = ?"), upper.ID); err != nil {
		t.Fatal(err)
	}
	sealed := setup(t, open, store.Config{Encryption: &store.Encryption{Current: "k1", Keys: []store.PayloadKey{payloadKey(t, "k1", 1)}}})
	sealed.enqueue(t, delivery("d-sealed"))
	for name, b := range map[string]*bundle{"plain": plain, "sealed": sealed} {
		got := b.claim(t, "w", 10, time.Minute)
		if want := map[string]int{"plain": 2, "sealed": 1}[name]; len(got) != want {
			t.Fatalf("%s: claimed %d, want %d", name, len(got), want)
		}
		for _, c := range got {
			if want := ack.Digest(c.Payload); c.PayloadSHA256 != want {
				t.Errorf("%s: claimed %s with digest %s, want its payload's %s", name, c.NotificationID, c.PayloadSHA256, want)
			}
			if c.PayloadSHA256 != strings.ToLower(c.PayloadSHA256) {
				t.Errorf("%s: claimed %s with digest %s, not lower-case", name, c.NotificationID, c.PayloadSHA256)
			}
		}
	}
}

package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// UpgradeFromMigration8 checks a database an earlier courier migrated to
// version 8 and filled with rows in every state (the engines'
// testdata/upgrade_v8.sql), since migrated to this version, through the
// Store open returns for it with cfg: Check finds every row valid; every
// delivery is claimed and settled once, the failed ones after a Redrive
// (the blocked key's head among them); a failed delivery's enqueue made
// again finds it before the Redrive and after it; every delivery's
// attempts read; the old inbox record still dedupes with its answer, and
// the old replay record still refuses its nonce. The Store's clock stands
// past every lease and retry the dump holds.
func UpgradeFromMigration8(t *testing.T, open func(cfg store.Config) (*store.Store, error)) {
	t.Helper()
	now := time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC)
	s, err := open(store.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.Outbox.Check(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Invalid) != 0 {
		t.Errorf("Check: %+v", h.Invalid)
	}
	w := protocol.For(s)
	seen := map[string]int{}
	drain := func() {
		for range 20 {
			cl, err := w.Claim(t.Context(), protocol.ClaimParams{Owner: "new", Limit: 10, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(cl) == 0 {
				return
			}
			for _, c := range cl {
				seen[c.NotificationID]++
				st, err := w.Settle(t.Context(), protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded, HTTPStatus: 200})
				if err != nil || st[0].Err != nil {
					t.Fatalf("settle %s: %v %v", c.NotificationID, err, st[0].Err)
				}
			}
		}
	}
	// The failed delivery's enqueue made again, as it was first made (the
	// Store's budget, 8): found before the Redrive, and after it, which
	// raised the old row's budget to 9 and kept the 8 it was enqueued with.
	again := func(when string) {
		t.Helper()
		tx, err := s.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		e, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "n-failed", Endpoint: "https://a.example/hook", Payload: []byte(`{"id":"n-failed"}`)})
		if err != nil || !e.Existed || e.ID != 2 {
			t.Errorf("n-failed enqueued again %s = %+v, %v; want delivery 2, Existed", when, e, err)
		}
	}
	drain()
	again("before its Redrive")
	if _, err := s.Outbox.Redrive(t.Context(), store.RedriveParams{}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Outbox.Get(t.Context(), 2); err != nil || d.MaxAttempts != 9 {
		t.Fatalf("n-failed redriven: budget %d, %v; want 9", d.MaxAttempts, err)
	}
	again("after its Redrive")
	drain()
	again("once sent")
	for _, id := range []string{"n-failed", "n-retry", "k1-1", "k1-2", "k2-1", "k2-2", "d-1", "d-2", "e-1", "e-2", "n-pending", "k3-1", "k3-2", "ev1:1"} {
		if seen[id] != 1 {
			t.Errorf("%s claimed %d times, want once", id, seen[id])
		}
	}
	for id := int64(1); id <= 17; id++ {
		if _, err := s.Outbox.Attempts(t.Context(), id); err != nil {
			t.Errorf("attempts of %d: %v", id, err)
		}
	}
	sum := sha256.Sum256([]byte(`{"n":1}`))
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err := protocol.InboxFor(s).Record(t.Context(), tx, protocol.InboxKey{Sender: "sender-a", Key: "msg-1", PayloadSHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		t.Fatal(err)
	}
	if r.Fresh || string(r.Ack) != `{"status":"ok"}` {
		t.Errorf("old inbox record: fresh %v, ack %s", r.Fresh, r.Ack)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	fresh, err := s.Replay.Remember(t.Context(), "key-1", "nonce-1", now.Add(time.Hour))
	if err != nil || fresh {
		t.Errorf("old replay record: fresh %v, %v", fresh, err)
	}
}

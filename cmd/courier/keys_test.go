package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestKeysGuideARetirement follows an operator retiring a payload key with
// the tool, on both engines: courier keys lists the retired key while a
// delivery or an inbox record is kept under it; courier prune takes the
// finished ones, but not a delivery still to be sent, which keeps its key
// listed until it is delivered and pruned in turn. Only then is the key
// no longer listed, and may leave every process's Encryption.Keys.
func TestKeysGuideARetirement(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, open := e.db(t)
			oldKey, err := store.NewPayloadKey("k-old", bytes.Repeat([]byte{1}, 32))
			if err != nil {
				t.Fatal(err)
			}
			newKey, err := store.NewPayloadKey("k-new", bytes.Repeat([]byte{2}, 32))
			if err != nil {
				t.Fatal(err)
			}
			// Before the rotation, a day and a minute ago: a delivery that
			// succeeds, one still pending, and an inbox record.
			dayAgo := func() time.Time { return time.Now().Add(-24*time.Hour - time.Minute) }
			before := open(store.Config{Now: dayAgo, Encryption: &store.Encryption{Current: "k-old", Keys: []store.PayloadKey{oldKey}}})
			enqueue(t, before, "old-done", "https://r.example/hooks")
			deliver(t, before)
			enqueue(t, before, "old-pending", "https://r.example/hooks")
			tx, err := before.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			key := protocol.InboxKey{Sender: "sender", Key: "n-1", PayloadSHA256: "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"}
			if _, err := protocol.InboxFor(before).RecordCompleted(ctx, tx, key, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			// The rotation: k-new Current, k-old still held.
			after := open(store.Config{Encryption: &store.Encryption{Current: "k-new", Keys: []store.PayloadKey{oldKey, newKey}}})
			enqueue(t, after, "new-pending", "https://r.example/hooks")

			if out := mustRun(t, exitOK, "keys", "-db", db); out != "k-new: 1\nk-old: 3\n" {
				t.Fatalf("keys after the rotation: %q, want k-new: 1 and k-old: 3", out)
			}
			mustRun(t, exitOK, "prune", "-db", db, "-older-than", "1us", "-inbox-older-than", "24h")
			if out := mustRun(t, exitOK, "keys", "-db", db); out != "k-new: 1\nk-old: 1\n" {
				t.Fatalf("keys after a prune: %q, want k-old kept by its pending delivery", out)
			}
			// The pending deliveries go (the one under k-old opened with
			// it), and a prune takes them.
			if n := deliver(t, after); n != 2 {
				t.Fatalf("delivered %d, want both pending deliveries", n)
			}
			mustRun(t, exitOK, "prune", "-db", db, "-older-than", "1us", "-inbox-older-than", "24h")
			if out := mustRun(t, exitOK, "keys", "-db", db); out != "no rows are kept under a payload key\n" {
				t.Fatalf("keys once everything is delivered and pruned: %q", out)
			}
		})
	}
}

// deliver claims every due delivery of s, checks its payload opened, and
// settles it succeeded; it returns how many it delivered.
func deliver(t *testing.T, s *store.Store) int {
	t.Helper()
	p := protocol.For(s)
	claimed, err := p.Claim(t.Context(), protocol.ClaimParams{Owner: "test", Limit: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if string(c.Payload) != `{}` {
			t.Fatalf("%s claimed with payload %q", c.NotificationID, c.Payload)
		}
		if _, err := p.Settle(t.Context(), protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded}); err != nil {
			t.Fatal(err)
		}
	}
	return len(claimed)
}

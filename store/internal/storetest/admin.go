package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

func testAdmin(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var ids []int64
	for i := range 25 {
		ids = append(ids, b.enqueue(t, delivery(fmt.Sprintf("a-%d", i))).ID)
		b.clock.Advance(time.Second)
	}
	// Keyset pages, newest first, over more rows than a page.
	var seen []int64
	page := store.Page{}
	for first := true; first || page.NextBefore != 0; first = false {
		var err error
		page, err = b.store.Outbox.List(b.ctx, store.ListParams{Status: courier.StatusPending, Limit: 10, Before: page.NextBefore})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			seen = append(seen, d.ID)
		}
	}
	if len(seen) != 25 || seen[0] != ids[24] || seen[24] != ids[0] {
		t.Fatalf("pages gave %d rows from %d to %d", len(seen), seen[0], seen[len(seen)-1])
	}
	// Filters.
	if p, _ := b.store.Outbox.List(b.ctx, store.ListParams{Status: courier.StatusFailed}); len(p.Deliveries) != 0 {
		t.Fatalf("failed filter matched %d", len(p.Deliveries))
	}
	if p, _ := b.store.Outbox.List(b.ctx, store.ListParams{Until: b.clock.Now().Add(-20 * time.Second)}); len(p.Deliveries) != 5 {
		t.Fatalf("time filter matched %d, want 5", len(p.Deliveries))
	}
	// Cancel: pending only.
	if err := b.store.Outbox.Cancel(b.ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if d := b.get(t, ids[0]); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled row is %s/%s", d.Status, d.LastErrorCode)
	}
	if err := b.store.Outbox.Cancel(b.ctx, ids[0]); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("second Cancel = %v", err)
	}
	// Redrive by an endpoint no delivery could have is invalid_argument on
	// both engines (PostgreSQL would fail on a NUL or invalid UTF-8).
	for _, endpoint := range []string{"relative/h", delivery("x").Endpoint + nul, delivery("x").Endpoint + notUTF8} {
		if _, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: endpoint}); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Redrive(%q) = %v, want invalid_argument", endpoint, err)
		}
	}
	// Prune removes exactly what is past its age, in bounded batches.
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if err := b.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(48 * time.Hour)
	for _, c := range b.claim(t, "w", 5, time.Minute) {
		if err := b.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: 4})
	if err != nil || n != 11 { // 10 succeeded + 1 cancelled, two days old
		t.Fatalf("Prune = %d, %v, want 11", n, err)
	}
	if h := health(t, b); h.Counts[courier.StatusSucceeded] != 5 || h.Counts[courier.StatusPending] != 9 {
		t.Fatalf("after Prune: %+v", h.Counts)
	}
	n, err = b.store.Outbox.PruneAttempts(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: 3})
	if err != nil || n != 10 {
		t.Fatalf("PruneAttempts = %d, %v, want the 10 old attempts", n, err)
	}
}

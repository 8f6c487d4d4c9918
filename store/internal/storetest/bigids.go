package storetest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// bumpOutboxIDs makes the outbox's next id above 2^31, as a long-lived
// outbox reaches (ids are never reused; prune does not reset them).
func bumpOutboxIDs(t *testing.T, b *bundle, next int64) {
	t.Helper()
	var q string
	if strings.Contains(b.db.DriverName(), "sqlite") {
		q = "UPDATE sqlite_sequence SET seq = ? WHERE name = 'courier_outbox'"
	} else {
		q = "SELECT setval(pg_get_serial_sequence('courier_outbox', 'id'), $1)"
	}
	if _, err := b.db.ExecContext(b.ctx, q, next-1); err != nil {
		t.Fatalf("bump ids: %v", err)
	}
}

// testListAndRedriveAbove32BitIDs: delivery ids are 64-bit on both
// engines (AUTOINCREMENT, BIGINT identity). Paging Outbox.List past an id
// above 2^31-1 (Before = NextBefore) and Redrive of one delivery by such
// an id work the same on both engines.
func testListAndRedriveAbove32BitIDs(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("first"))
	bumpOutboxIDs(t, b, 3_000_000_000)
	a := b.enqueue(t, delivery("a"))
	c := b.enqueue(t, delivery("c"))
	if a.ID < 1<<31 || c.ID < 1<<31 {
		t.Fatalf("ids %d, %d: want them above 2^31", a.ID, c.ID)
	}

	page, err := b.store.Outbox.List(b.ctx, store.ListParams{Limit: 1})
	if err != nil || len(page.Deliveries) != 1 || page.NextBefore != c.ID {
		t.Fatalf("List first page = %+v, %v; want delivery %d and NextBefore %d", page, err, c.ID, c.ID)
	}
	page, err = b.store.Outbox.List(b.ctx, store.ListParams{Limit: 1, Before: page.NextBefore})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].ID != a.ID {
		t.Errorf("List second page (Before %d) = %+v, %v; want delivery %d", c.ID, page, err, a.ID)
	}

	claimed := b.claim(t, "w", 10, time.Minute)
	for _, cl := range claimed {
		if cl.DeliveryID == a.ID {
			if err := b.fail(cl.Lease, courier.CodeReceiverRejected, 400); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := b.get(t, a.ID); d.Status != courier.StatusFailed {
		t.Fatalf("delivery a is %s, want failed", d.Status)
	}
	n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: a.ID})
	if err != nil || n != 1 {
		t.Errorf("Redrive(ID %d) = %d, %v; want 1, nil", a.ID, n, err)
	}
}

// testClaimWithA64BitEndpointCap: ClaimParams.EndpointCap is an int the
// store bounds only below (client.Config.EndpointConcurrency is bounded by
// Concurrency, which has no upper bound): a cap above 2^31-1 claims on
// both engines.
func testClaimWithA64BitEndpointCap(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("a"))
	c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, EndpointCap: 1 << 31})
	if err != nil || len(c) != 1 {
		t.Errorf("Claim with EndpointCap 2^31 = %d claimed, %v; want 1, nil", len(c), err)
	}
}

// testListShowsTheLargestID: a delivery may have the largest id either
// engine gives (2^63-1: the last of a BIGINT identity, the last rowid
// AUTOINCREMENT hands out). List's first page shows it, ListParams.ID
// finds it, and a page before it reads below it.
func testListShowsTheLargestID(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	below := b.enqueue(t, delivery("below"))
	bumpOutboxIDs(t, b, math.MaxInt64)
	last := b.enqueue(t, delivery("last"))
	if last.ID != math.MaxInt64 {
		t.Fatalf("id %d: want 2^63-1", last.ID)
	}
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{Limit: 1})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].ID != last.ID {
		t.Errorf("List first page = %+v, %v; want delivery %d", page, err, last.ID)
	}
	page, err = b.store.Outbox.List(b.ctx, store.ListParams{ID: last.ID})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].ID != last.ID {
		t.Errorf("List(ID %d) = %+v, %v; want the delivery", last.ID, page, err)
	}
	page, err = b.store.Outbox.List(b.ctx, store.ListParams{Before: last.ID})
	if err != nil || len(page.Deliveries) != 1 || page.Deliveries[0].ID != below.ID {
		t.Errorf("List(Before %d) = %+v, %v; want delivery %d only", last.ID, page, err, below.ID)
	}
}

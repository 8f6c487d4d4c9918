package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// testListPagesThroughChanges pages Outbox.List (every delivery, then
// only pending ones) while, between pages, a delivery is enqueued, one is
// claimed and settled, one is cancelled and finished ones are pruned.
// Every delivery left unchanged throughout is listed exactly once, none is
// listed twice, each page is newest first, and the paging ends.
func testListPagesThroughChanges(t *testing.T, open OpenFunc) {
	for _, status := range []courier.Status{"", courier.StatusPending} {
		t.Run(fmt.Sprintf("status=%q", status), func(t *testing.T) {
			b := setup(t, open, store.Config{})
			changed := map[int64]bool{}
			var ids []int64
			for i := range 40 {
				e := b.enqueue(t, delivery(fmt.Sprintf("n-%d", i)))
				ids = append(ids, e.ID)
				if i%5 == 0 { // finished long ago: pruned while paging
					if err := b.store.Outbox.Cancel(b.ctx, e.ID); err != nil {
						t.Fatal(err)
					}
					changed[e.ID] = true
				}
			}
			b.clock.Advance(48 * time.Hour)

			seen := map[int64]bool{}
			before, pages := int64(0), 0
			for first := true; first || before != 0; first = false {
				if pages++; pages > 100 {
					t.Fatal("paging did not end")
				}
				page, err := b.store.Outbox.List(b.ctx, store.ListParams{Status: status, Before: before, Limit: 3})
				if err != nil {
					t.Fatalf("List(Before %d): %v", before, err)
				}
				for i, d := range page.Deliveries {
					if seen[d.ID] {
						t.Errorf("delivery %d listed twice", d.ID)
					}
					seen[d.ID] = true
					if i > 0 && d.ID >= page.Deliveries[i-1].ID {
						t.Errorf("page %v is not newest first", page.Deliveries)
					}
					if before != 0 && d.ID >= before {
						t.Errorf("delivery %d listed on the page below %d", d.ID, before)
					}
				}
				before = page.NextBefore

				// Changes between pages: an insert, a claim settled, a
				// cancel (of a delivery not listed yet on odd pages, of
				// one already listed on even ones) and a prune.
				b.enqueue(t, delivery(fmt.Sprintf("new-%d", pages)))
				for _, c := range b.claim(t, "w", 1, time.Minute) {
					changed[c.DeliveryID] = true
					if err := b.complete(c.Lease, ""); err != nil {
						t.Fatal(err)
					}
				}
				for _, id := range ids {
					if !changed[id] && seen[id] == (pages%2 == 0) {
						changed[id] = true
						if err := b.store.Outbox.Cancel(b.ctx, id); err != nil {
							t.Fatal(err)
						}
						break
					}
				}
				if pages == 2 {
					if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n == 0 {
						t.Fatalf("Prune = %d, %v; want the deliveries cancelled before", n, err)
					}
				}
			}
			for _, id := range ids {
				if !changed[id] && !seen[id] {
					t.Errorf("delivery %d, unchanged throughout, was never listed", id)
				}
			}
		})
	}
}

// testListRefusesBadPaging: Outbox.List refuses a Limit out of 1..1000 and
// a negative Before (no delivery id is below it) as CodeInvalidArgument;
// BlockedKeys refuses a limit out of 1..1000 alike. Limit 1000 and 0 (the
// default) are accepted.
func testListRefusesBadPaging(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("a"))
	for _, p := range []store.ListParams{{Limit: -1}, {Limit: 1001}, {Before: -1}, {Before: -1 << 63}} {
		if _, err := b.store.Outbox.List(b.ctx, p); !errors.Is(err, courier.CodeInvalidArgument) {
			t.Errorf("List(%+v) = %v; want %s", p, err, courier.CodeInvalidArgument)
		}
	}
	for _, p := range []store.ListParams{{}, {Limit: 1000}, {Before: 1 << 62}} {
		if page, err := b.store.Outbox.List(b.ctx, p); err != nil || len(page.Deliveries) != 1 {
			t.Errorf("List(%+v) = %+v, %v; want the one delivery", p, page, err)
		}
	}
	for _, limit := range []int{0, -1, 1001} {
		if _, err := b.store.Endpoints.BlockedKeys(b.ctx, "", limit); !errors.Is(err, courier.CodeInvalidArgument) {
			t.Errorf("BlockedKeys(limit %d) = %v; want %s", limit, err, courier.CodeInvalidArgument)
		}
	}
}

package storetest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// testLimitsAtTheirBounds: every bound store.Limits documents is taken
// and read back as set (MaxInFlight 100,000, Rate 0.000001 and 1,000,000,
// Burst 1,000,000), a Burst left zero is Rate rounded up and at least 1,
// and one step past each bound is refused with invalid_argument naming
// the field.
func testLimitsAtTheirBounds(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, tc := range []struct {
		set, want store.Limits
	}{
		{store.Limits{MaxInFlight: 100_000}, store.Limits{MaxInFlight: 100_000}},
		{store.Limits{MaxInFlight: 1}, store.Limits{MaxInFlight: 1}},
		{store.Limits{Rate: 0.000001}, store.Limits{Rate: 0.000001, Burst: 1}},
		{store.Limits{Rate: 1_000_000}, store.Limits{Rate: 1_000_000, Burst: 1_000_000}},
		{store.Limits{Rate: 1_000_000, Burst: 1_000_000}, store.Limits{Rate: 1_000_000, Burst: 1_000_000}},
		{store.Limits{Rate: 0.000001, Burst: 1_000_000}, store.Limits{Rate: 0.000001, Burst: 1_000_000}},
		{store.Limits{Rate: 2.000001}, store.Limits{Rate: 2.000001, Burst: 3}},
		{store.Limits{Rate: 0.5}, store.Limits{Rate: 0.5, Burst: 1}},
		{store.Limits{MaxInFlight: 100_000, Rate: 1_000_000, Burst: 1}, store.Limits{MaxInFlight: 100_000, Rate: 1_000_000, Burst: 1}},
	} {
		if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, tc.set); err != nil {
			t.Errorf("SetLimits(%+v): %v", tc.set, err)
			continue
		}
		eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint)
		if err != nil || eh.Limits != tc.want {
			t.Errorf("SetLimits(%+v), then Get: %+v, %v; want %+v", tc.set, eh.Limits, err, tc.want)
		}
	}
	for _, tc := range []struct {
		field  string
		limits store.Limits
	}{
		{"MaxInFlight", store.Limits{MaxInFlight: 100_001}},
		{"MaxInFlight", store.Limits{MaxInFlight: -1}},
		{"Rate", store.Limits{Rate: math.Nextafter(0.000001, 0)}},
		{"Rate", store.Limits{Rate: math.Nextafter(1_000_000, math.Inf(1))}},
		{"Rate", store.Limits{Rate: math.Inf(1)}},
		{"Burst", store.Limits{Rate: 1, Burst: 1_000_001}},
		{"Burst", store.Limits{Rate: 1, Burst: -1}},
	} {
		err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, tc.limits)
		if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "Limits."+tc.field) {
			t.Errorf("SetLimits(%+v) = %v; want invalid_argument naming Limits.%s", tc.limits, err, tc.field)
		}
	}
}

// testListPagesAtTheirBounds: a ListParams.Limit left zero pages by 100,
// as documented, with NextBefore set while more remain; Limit 1 and 1000,
// the bounds, page by themselves, and a page that holds the rest ends the
// paging (NextBefore 0). BlockedKeys takes its limit's bounds too.
func testListPagesAtTheirBounds(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	ps := make([]store.EnqueueParams, 101)
	for i := range ps {
		ps[i] = delivery(fmt.Sprintf("n-%d", i))
	}
	if _, err := inCommitted(t, b, func(tx *sqlx.Tx) ([]store.Enqueued, error) { return b.store.Outbox.EnqueueMany(b.ctx, tx, ps) }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit, want int
		more        bool
	}{{0, 100, true}, {1, 1, true}, {100, 100, true}, {101, 101, false}, {1000, 101, false}} {
		page, err := b.store.Outbox.List(b.ctx, store.ListParams{Limit: tc.limit})
		if err != nil {
			t.Fatalf("List(Limit %d): %v", tc.limit, err)
		}
		if len(page.Deliveries) != tc.want || (page.NextBefore != 0) != tc.more {
			t.Errorf("List(Limit %d) of 101: %d deliveries, NextBefore %d; want %d, more %v",
				tc.limit, len(page.Deliveries), page.NextBefore, tc.want, tc.more)
		}
		if tc.more && page.NextBefore != page.Deliveries[len(page.Deliveries)-1].ID {
			t.Errorf("List(Limit %d): NextBefore %d is not the page's last id", tc.limit, page.NextBefore)
		}
	}
	for _, limit := range []int{1, 1000} {
		if _, err := b.store.Endpoints.BlockedKeys(b.ctx, "", limit); err != nil {
			t.Errorf("BlockedKeys(limit %d): %v", limit, err)
		}
	}
	for _, limit := range []int{0, 1001} {
		if _, err := b.store.Endpoints.BlockedKeys(b.ctx, "", limit); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("BlockedKeys(limit %d) = %v, want invalid_argument", limit, err)
		}
	}
}

package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/scrape"
	"github.com/courier-go/courier/store"
)

// testAScrapeShowsWhatEndpointsListShows: a metrics scrape's read of the
// endpoints (internal/scrape, contrib/promcourier's gauges) counts the
// endpoints by state and the blocked keys as Endpoints.List shows them,
// and lists the endpoints List shows with series of their own (a breaker
// open, limits, deliveries in flight, blocked keys) in the same order,
// leaving out the disabled ones with none; past its limit it lists the
// first.
func testAScrapeShowsWhatEndpointsListShows(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for i := range 3 {
		if err := b.store.Endpoints.Disable(b.ctx, fmt.Sprintf("https://gone-%d.example/h", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := b.store.Endpoints.SetLimits(b.ctx, fmt.Sprintf("https://limited-%d.example/h", i), store.Limits{MaxInFlight: 2, Rate: 1.5}); err != nil {
			t.Fatal(err)
		}
	}
	// A disabled endpoint with limits has series; one failing, its
	// breaker open, too.
	if err := b.store.Endpoints.Disable(b.ctx, "https://limited-0.example/h"); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.Disable(b.ctx, "https://failing.example/h"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_endpoints SET state = 'open', open_until = ?, reason = 'timeout' WHERE endpoint = ?"),
		b.clock.Now().Add(time.Hour).UnixMicro(), "https://failing.example/h"); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, at("https://busy.example/h", "leased"))
	if len(b.claim(t, "w", 10, time.Minute)) != 1 {
		t.Fatal("the delivery to busy.example was not claimed")
	}
	head := at("https://held.example/h", "head")
	head.OrderingKey = "k"
	held := b.enqueue(t, head)
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_ordering_keys SET blocked_at = 1 WHERE head_id = ?"), held.ID); err != nil {
		t.Fatal(err)
	}

	all, err := b.store.Endpoints.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := scrape.Endpoints{States: map[string]int{}}
	for _, e := range all {
		if e.State != store.EndpointClosed {
			want.States[string(e.State)]++
		}
		want.BlockedKeys += e.BlockedKeys
		if e.State == store.EndpointOpen || e.State == store.EndpointHalfOpen || e.InFlight > 0 || e.Limits != (store.Limits{}) || e.BlockedKeys > 0 {
			want.Listed = append(want.Listed, scrape.Endpoint{URL: e.Endpoint, State: string(e.State), InFlight: e.InFlight,
				MaxInFlight: e.Limits.MaxInFlight, Rate: e.Limits.Rate, BlockedKeys: e.BlockedKeys})
		}
	}
	if len(want.Listed) != 5 || want.States["disabled"] != 4 || want.States["open"] != 1 || want.BlockedKeys != 1 {
		t.Fatalf("Endpoints.List shows %+v: the test's endpoints are not set up as it means", want)
	}
	got, err := scrape.For(b.store)(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !equalScrapes(got, want) {
		t.Errorf("scrape = %+v\nwant     %+v", got, want)
	}
	got, err = scrape.For(b.store)(b.ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want.Listed = want.Listed[:2]
	if !equalScrapes(got, want) {
		t.Errorf("scrape of 2 = %+v\nwant          %+v", got, want)
	}
}

func equalScrapes(a, b scrape.Endpoints) bool {
	return fmt.Sprint(a.States) == fmt.Sprint(b.States) && a.BlockedKeys == b.BlockedKeys && slices.Equal(a.Listed, b.Listed)
}

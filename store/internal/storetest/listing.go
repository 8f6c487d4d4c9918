package storetest

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/listing"
	"github.com/courier-go/courier/store"
)

// lists are the Admin's reads of b's endpoints and pins.
func (b *bundle) lists() listing.Lists[store.EndpointHealth, store.Contract] {
	return listing.For[store.EndpointHealth, store.Contract](b.store)
}

// listedEndpoints sets up endpoints of every kind Endpoints.List lists,
// one a second: e-00 to e-24, the even numbers only (their order is the
// same in any collation), limited (e-00, e-10, e-20), disabled, one open
// (e-06), one with a delivery in flight (e-14) and one holding a blocked
// ordering key (e-22).
func (b *bundle) listedEndpoints(t *testing.T) {
	t.Helper()
	for i := range 13 {
		url := fmt.Sprintf("https://e-%02d.example/h", 2*i)
		b.clock.Advance(time.Second)
		var err error
		switch {
		case i%5 == 0:
			err = b.store.Endpoints.SetLimits(b.ctx, url, store.Limits{MaxInFlight: 1 + i})
		case i == 7:
			b.enqueue(t, at(url, "leased"))
			if len(b.claim(t, "w", 10, time.Minute)) != 1 {
				t.Fatalf("the delivery to %s was not claimed", url)
			}
		case i == 11:
			head := at(url, "head")
			head.OrderingKey = "k"
			held := b.enqueue(t, head)
			_, err = b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_ordering_keys SET blocked_at = 1 WHERE head_id = ?"), held.ID)
		default:
			err = b.store.Endpoints.Disable(b.ctx, url)
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_endpoints SET state = 'open', open_until = ?, reason = 'timeout' WHERE endpoint = ?"),
				b.clock.Now().Add(time.Hour).UnixMicro(), url); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// walk pages through page, limit at a time from the first page, and
// returns what the pages listed, in order; between pages, it calls
// between with the URL of the page's cursor (the last one listed).
func walk[T any](t *testing.T, page func(after string, limit int) ([]T, bool, error), url func(T) string, limit int, between func(cursor string)) []T {
	t.Helper()
	var all []T
	after := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging did not end")
		}
		p, more, err := page(after, limit)
		if err != nil {
			t.Fatalf("page after %q: %v", after, err)
		}
		if len(p) > limit || more && len(p) != limit {
			t.Fatalf("page after %q: %d entries, more %t, for a limit of %d", after, len(p), more, limit)
		}
		all = append(all, p...)
		if !more {
			return all
		}
		after = url(p[len(p)-1])
		if between != nil {
			between(after)
		}
	}
}

// testTheAdminsPagesAreWhatListShows: the Admin's page of the endpoints
// (internal/listing), read from the database's indexes from a cursor on,
// lists what Endpoints.List lists, in its order, each once, whatever the
// page's size; and its ranking of the endpoints that most need an
// operator is List's in the ops page's order, counted as List counts
// them. The same of the contract pins and Contracts.List.
func testTheAdminsPagesAreWhatListShows(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.listedEndpoints(t)
	all, err := b.store.Endpoints.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 13 {
		t.Fatalf("Endpoints.List shows %d endpoints, want the test's 13", len(all))
	}
	lists := b.lists()
	endpointPage := func(after string, limit int) ([]store.EndpointHealth, bool, error) {
		return lists.EndpointPage(b.ctx, after, limit)
	}
	for _, limit := range []int{1, 4, 13, 100} {
		if got := walk(t, endpointPage, func(e store.EndpointHealth) string { return e.Endpoint }, limit, nil); !reflect.DeepEqual(got, all) {
			t.Errorf("pages of %d = %+v\nwant %+v", limit, got, all)
		}
	}

	pressing := func(e store.EndpointHealth) int {
		switch {
		case e.State == store.EndpointOpen || e.State == store.EndpointHalfOpen:
			return 0
		case e.BlockedKeys > 0:
			return 1
		case e.State == store.EndpointDisabled:
			return 2
		case e.ConsecutiveFailures > 0:
			return 3
		}
		return 4
	}
	ranked := slices.Clone(all)
	slices.SortFunc(ranked, func(a, b store.EndpointHealth) int {
		return cmp.Or(cmp.Compare(pressing(a), pressing(b)), b.UpdatedAt.Compare(a.UpdatedAt),
			cmp.Compare(b.InFlight, a.InFlight), strings.Compare(a.Endpoint, b.Endpoint))
	})
	states := map[string]int{}
	for _, e := range all {
		if e.State != store.EndpointClosed {
			states[string(e.State)]++
		}
	}
	for _, limit := range []int{5, 100} {
		top, count, gotStates, err := lists.EndpointTop(b.ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		if want := ranked[:min(limit, len(ranked))]; !reflect.DeepEqual(top, want) || count != len(all) || !reflect.DeepEqual(gotStates, states) {
			t.Errorf("top %d = %+v, %d, %v\nwant %+v, %d, %v", limit, top, count, gotStates, want, len(all), states)
		}
	}
	if got, err := lists.EndpointStates(b.ctx); err != nil || !reflect.DeepEqual(got, states) {
		t.Errorf("states = %v, %v; want %v", got, err, states)
	}
	if top := ranked[:2]; top[0].Endpoint != "https://e-06.example/h" || top[1].Endpoint != "https://e-22.example/h" {
		t.Errorf("the ops page's order puts %s and %s first, want the open endpoint, then the one holding a key", top[0].Endpoint, top[1].Endpoint)
	}

	for i := range 10 {
		b.clock.Advance(time.Second)
		if err := b.store.Contracts.Pin(b.ctx, fmt.Sprintf("https://e-%02d.example/c", 2*i), digestA); err != nil {
			t.Fatal(err)
		}
	}
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: "https://e-04.example/c", Payload: command(t, "change", "r1", digestA, 5, `{}`)})
	if err := b.store.Contracts.Pin(b.ctx, "https://e-08.example/c", digestB); err != nil { // holds nothing back
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if err := b.store.Contracts.Pin(b.ctx, "https://e-04.example/c", digestB); err != nil { // holds r1 back
		t.Fatal(err)
	}
	pins, err := b.store.Contracts.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	contractPage := func(after string, limit int) ([]store.Contract, bool, error) {
		return lists.ContractPage(b.ctx, after, limit)
	}
	for _, limit := range []int{1, 3, 10, 100} {
		if got := walk(t, contractPage, func(k store.Contract) string { return k.Endpoint }, limit, nil); !reflect.DeepEqual(got, pins) {
			t.Errorf("pages of %d pins = %+v\nwant %+v", limit, got, pins)
		}
	}
	slices.SortFunc(pins, func(a, b store.Contract) int {
		return cmp.Or(cmp.Compare(b.Mismatched, a.Mismatched), b.PinnedAt.Compare(a.PinnedAt), strings.Compare(a.Endpoint, b.Endpoint))
	})
	top, count, holding, err := lists.ContractTop(b.ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(top, pins[:3]) || count != 10 || holding != 1 || top[0].Endpoint != "https://e-04.example/c" || top[0].Mismatched != 1 {
		t.Errorf("top 3 pins = %+v, %d, %d\nwant %+v, 10, 1, e-04's first", top, count, holding, pins[:3])
	}
}

// testTheAdminsPagesHoldThroughChanges: endpoints come and go between
// the Admin's pages, its cursor's own too: every endpoint listed
// throughout is listed once, one added after the cursor is listed, one
// added before it or gone before its page is not, and none twice.
func testTheAdminsPagesHoldThroughChanges(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.listedEndpoints(t)
	lists := b.lists()
	endpointPage := func(after string, limit int) ([]store.EndpointHealth, bool, error) {
		return lists.EndpointPage(b.ctx, after, limit)
	}
	changed := false
	got := walk(t, endpointPage, func(e store.EndpointHealth) string { return e.Endpoint }, 4, func(cursor string) {
		if changed {
			return
		}
		changed = true
		if cursor != "https://e-06.example/h" {
			t.Fatalf("the first page's cursor is %s, want e-06", cursor)
		}
		for _, change := range []func() error{
			func() error { return b.store.Endpoints.Enable(b.ctx, cursor) },                    // the cursor's own
			func() error { return b.store.Endpoints.Enable(b.ctx, "https://e-16.example/h") },  // not listed yet
			func() error { return b.store.Endpoints.Disable(b.ctx, "https://e-01.example/h") }, // before the cursor
			func() error { return b.store.Endpoints.Disable(b.ctx, "https://e-17.example/h") }, // after it
		} {
			if err := change(); err != nil {
				t.Fatal(err)
			}
		}
	})
	var urls []string
	for _, e := range got {
		urls = append(urls, e.Endpoint)
	}
	var want []string
	for i := range 13 {
		if 2*i != 16 {
			want = append(want, fmt.Sprintf("https://e-%02d.example/h", 2*i))
		}
		if 2*i == 16 {
			want = append(want, "https://e-17.example/h")
		}
	}
	if !slices.Equal(urls, want) {
		t.Errorf("the pages listed %q\nwant %q", urls, want)
	}

	var pins []string
	for i := range 9 {
		pins = append(pins, fmt.Sprintf("https://e-%02d.example/c", 2*i))
		if err := b.store.Contracts.Pin(b.ctx, pins[i], digestA); err != nil {
			t.Fatal(err)
		}
	}
	contractPage := func(after string, limit int) ([]store.Contract, bool, error) {
		return lists.ContractPage(b.ctx, after, limit)
	}
	added := false
	gotPins := walk(t, contractPage, func(k store.Contract) string { return k.Endpoint }, 4, func(string) {
		if !added {
			added = true
			for _, url := range []string{"https://e-01.example/c", "https://e-09.example/c"} {
				if err := b.store.Contracts.Pin(b.ctx, url, digestA); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	urls = urls[:0]
	for _, k := range gotPins {
		urls = append(urls, k.Endpoint)
	}
	want = slices.Insert(slices.Clone(pins), 5, "https://e-09.example/c")
	if !slices.Equal(urls, want) {
		t.Errorf("the pages listed the pins %q\nwant %q", urls, want)
	}
}

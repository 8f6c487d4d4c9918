package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// manyDisabled disables n endpoints nobody looks after any more, as an
// outbox that has sent to many subscribers keeps them (410 Gone disables
// an endpoint until an operator acts), and returns their URLs.
func (b *adminBundle) manyDisabled(t *testing.T, n int) []string {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://gone-%03d.example/hooks?token=%d", i, i)
		if err := b.store.Endpoints.Disable(t.Context(), urls[i]); err != nil {
			t.Fatal(err)
		}
	}
	return urls
}

// opened fails deliveries to url until its breaker opens.
func (b *adminBundle) opened(t *testing.T, url string) {
	t.Helper()
	for i := 0; ; i++ {
		if h, err := b.store.Endpoints.Get(t.Context(), url); err != nil {
			t.Fatal(err)
		} else if h.State == store.EndpointOpen {
			return
		}
		b.enqueue(t, fmt.Sprintf("to-open-%d", i), url)
		b.failDue(t)
	}
}

// TestAdminOpsPageShowsTheWorstEndpoints: the ops page listed every
// endpoint with something to show, so an outbox keeping tens of thousands
// of disabled endpoints answered a page of tens of megabytes, the one
// failing now somewhere among them in URL order. It shows the opsEndpoints
// that most need an operator, those failing now first, and says how many
// there are in all, by state, and that the JSON API pages through them.
func TestAdminOpsPageShowsTheWorstEndpoints(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	b.manyDisabled(t, opsEndpoints+5)
	failing := "https://zz-failing.example/hooks" // last in URL order
	b.opened(t, failing)

	_, raw := b.do(t, "GET", "/", "", nil)
	page := string(raw)
	section := page[strings.Index(page, `<section id="endpoints">`):]
	section = section[:strings.Index(section, "</section>")]
	if rows := strings.Count(section, `<code class="ref">`); rows != opsEndpoints {
		t.Errorf("the page shows %d endpoints, want %d", rows, opsEndpoints)
	}
	if first := strings.Index(section, `<code class="ref">`); first < 0 || !strings.HasPrefix(section[first:], `<code class="ref">`+endpoint.Ref(failing)+`</code>`) {
		t.Errorf("the endpoint failing now is not first")
	}
	for _, want := range []string{
		fmt.Sprintf("%d endpoints to show: 1 open, 0 half open, %d disabled", opsEndpoints+6, opsEndpoints+5),
		fmt.Sprintf("Showing the %d that most need an operator", opsEndpoints),
		`href="./api/endpoints"`,
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the endpoints section lacks %q", want)
		}
	}
}

// TestAdminEndpointsPages: GET /api/endpoints answered every endpoint in
// one array. It answers a page of them by URL, limit at a time (100 by
// default, at most 1000), with next_after, the last one's ref, to pass as
// after for the next; the last page has none. Every endpoint comes once.
func TestAdminEndpointsPages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	urls := b.manyDisabled(t, 120)
	slices.Sort(urls)
	want := each(urls, endpoint.Ref)

	first := adminOK[endpointPageJSON](t, b, "GET", "/api/endpoints", "")
	if len(first.Endpoints) != 100 || first.NextAfter != first.Endpoints[99].Ref {
		t.Fatalf("the first page has %d endpoints, next_after %q, want 100 and the last one's ref", len(first.Endpoints), first.NextAfter)
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		p := "/api/endpoints?limit=50"
		if after != "" {
			p += "&after=" + after
		}
		page := adminOK[endpointPageJSON](t, b, "GET", p, "")
		for _, e := range page.Endpoints {
			if e.State != store.EndpointDisabled || e.Endpoint == "" {
				t.Fatalf("endpoint %+v", e)
			}
			got = append(got, e.Ref)
		}
		if after = page.NextAfter; after == "" {
			if pages != 2 {
				t.Errorf("%d pages of 50 for 120 endpoints, want 3", pages+1)
			}
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the pages gave %d refs, want the %d by URL, each once", len(got), len(want))
	}

	for _, tc := range []struct{ query, field, rule string }{
		{"limit=0", "limit", "range"},
		{"limit=1001", "limit", "range"},
		{"limit=x", "limit", "range"},
		{"after=" + strings.ToUpper(want[0]), "after", "ref"},
		{"limit=1&limit=2", "limit", "single"},
		{"after=" + want[0] + "&after=" + want[1], "after", "single"},
	} {
		resp, body := b.do(t, "GET", "/api/endpoints?"+tc.query, "", nil)
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != tc.field || p.Errors[0]["rule"] != tc.rule {
			t.Errorf("%s: errors %v, want %s %s", tc.query, p.Errors, tc.field, tc.rule)
		}
	}
}

// manyPins pins the contracts of n endpoints, as the first command
// enqueued for each does (pins stay), and returns their URLs.
func (b *adminBundle) manyPins(t *testing.T, n int) []string {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://source-%03d.example/commands?token=%d", i, i)
		if err := b.store.Contracts.Pin(t.Context(), urls[i], digestA); err != nil {
			t.Fatal(err)
		}
	}
	return urls
}

// TestAdminOpsPageShowsTheContractsHoldingDeliveriesBack: every endpoint
// a command was ever enqueued for keeps its pin, and the ops page listed
// each with two forms, so the page grew with every source endpoint ever
// known. It shows the opsContracts that most need an operator, those
// holding deliveries back first, and says how many there are in all.
func TestAdminOpsPageShowsTheContractsHoldingDeliveriesBack(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	b.manyPins(t, opsContracts+5)
	b.enqueueCommand(t, "r1", digestA)
	if err := b.store.Contracts.Pin(t.Context(), sourceHook, digestB); err != nil { // holds r1 back
		t.Fatal(err)
	}
	b.manyPins(t, 1) // pinned after it, unchanged

	_, raw := b.do(t, "GET", "/", "", nil)
	page := string(raw)
	section := page[strings.Index(page, `<section id="contracts">`):]
	section = section[:strings.Index(section, "</section>")]
	if rows := strings.Count(section, `<code class="ref">`); rows != opsContracts {
		t.Errorf("the page shows %d contracts, want %d", rows, opsContracts)
	}
	if first := strings.Index(section, `<code class="ref">`); first < 0 || !strings.HasPrefix(section[first:], `<code class="ref">`+refS+`</code>`) {
		t.Errorf("the contract holding deliveries back is not first")
	}
	for _, want := range []string{
		fmt.Sprintf("%d contracts pinned, 1 holding deliveries back.", opsContracts+6),
		fmt.Sprintf("Showing the %d that most need an operator", opsContracts),
		`href="./api/contracts"`,
	} {
		if !strings.Contains(section, want) {
			t.Errorf("the contracts section lacks %q", want)
		}
	}
}

// TestAdminContractsPages: GET /api/contracts answered every pin in one
// array; it pages them as GET /api/endpoints pages endpoints.
func TestAdminContractsPages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	urls := b.manyPins(t, 120)
	slices.Sort(urls)
	want := each(urls, endpoint.Ref)
	var got []string
	after := ""
	for {
		p := "/api/contracts?limit=50"
		if after != "" {
			p += "&after=" + after
		}
		page := adminOK[contractPageJSON](t, b, "GET", p, "")
		for _, k := range page.Contracts {
			got = append(got, k.Ref)
		}
		if after = page.NextAfter; after == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the pages gave %d refs, want the %d by URL, each once", len(got), len(want))
	}
	if first := adminOK[contractPageJSON](t, b, "GET", "/api/contracts", ""); len(first.Contracts) != 100 || first.NextAfter != first.Contracts[99].Ref {
		t.Fatalf("the first page has %d contracts, next_after %q, want 100 and the last one's ref", len(first.Contracts), first.NextAfter)
	}
	resp, body := b.do(t, "GET", "/api/contracts?limit=0", "", nil)
	refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
}

// TestAdminListAnswersCostTheirPage: the answers that list endpoints or
// contracts (the ops page, GET /api/endpoints, GET /api/contracts) read
// the store's whole lists and paged them in Go, so that each cost what
// every endpoint the outbox keeps costs, though it shows 100. An answer
// allocates as much with ten times the endpoints (each disabled, with a
// contract pin), give or take: it reads its page, and counts the rest in
// the database. Not parallel: testing.AllocsPerRun counts every
// allocation of the process.
func TestAdminListAnswersCostTheirPage(t *testing.T) {
	const few, many = 150, 1500
	bundles := map[int]*adminBundle{}
	for _, n := range []int{few, many} {
		b := setupAdmin(t, allowAll)
		for _, u := range b.manyDisabled(t, n) {
			if err := b.store.Contracts.Pin(t.Context(), u, digestA); err != nil {
				t.Fatal(err)
			}
		}
		bundles[n] = b
	}
	for _, p := range []string{"/", "/api/endpoints", "/api/endpoints?limit=100&after=" + endpoint.Ref("https://gone-000.example/hooks?token=0"), "/api/contracts"} {
		allocs := map[int]float64{}
		for n, b := range bundles {
			allocs[n] = testing.AllocsPerRun(5, func() {
				if resp, _ := b.do(t, "GET", p, "", nil); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %d", p, resp.StatusCode)
				}
			})
		}
		if allocs[many] > allocs[few]*1.25 {
			t.Errorf("GET %s allocates %.0f times with %d endpoints, %.0f with %d: it grows with the lists, not with its page",
				p, allocs[few], few, allocs[many], many)
		}
	}
}

// TestAdminEndpointsPagesHoldThroughChanges: GET /api/endpoints reads a
// page from the store by URL from its cursor's endpoint on. Its cursor, a
// ref, holds when that endpoint leaves the list (enabled, it is forgotten)
// and endpoints come and go between pages: every endpoint listed
// throughout comes once, none twice, and one added after the cursor
// comes in its place. Another Admin, on another Store of the same
// database, that never handed out the cursor finds its endpoint among
// those the store knows; a cursor whose endpoint the store no longer
// knows at all is 404 not_found there (start again from the first page).
func TestAdminEndpointsPagesHoldThroughChanges(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "outbox.db")
	s, err := sqlite.Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := setupAdminConfig(t, Config{Store: s, Authorize: allowAll})
	urls := b.manyDisabled(t, 30) // gone-000 … gone-029, in URL order
	page := func(b *adminBundle, after string) (endpointPageJSON, int) {
		p := "/api/endpoints?limit=10"
		if after != "" {
			p += "&after=" + after
		}
		resp, body := b.do(t, "GET", p, "", nil)
		var out endpointPageJSON
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
		}
		return out, resp.StatusCode
	}

	first, _ := page(b, "")
	if first.NextAfter != endpoint.Ref(urls[9]) {
		t.Fatalf("the first page's cursor is %q, want the ref of %s", first.NextAfter, urls[9])
	}
	for _, change := range []func() error{
		func() error { return s.Endpoints.Enable(t.Context(), urls[9]) },                            // the cursor's own: forgotten
		func() error { return s.Endpoints.Enable(t.Context(), urls[12]) },                           // one not yet listed
		func() error { return s.Endpoints.Disable(t.Context(), "https://gone-005a.example/hooks") }, // before the cursor
		func() error { return s.Endpoints.Disable(t.Context(), "https://gone-015a.example/hooks") }, // after it
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	for _, e := range first.Endpoints {
		seen[e.Ref]++
	}
	after := first.NextAfter
	for pages := 1; after != ""; pages++ {
		if pages > 10 {
			t.Fatal("paging did not end")
		}
		p, code := page(b, after)
		if code != http.StatusOK {
			t.Fatalf("the page after %s: %d", after, code)
		}
		for _, e := range p.Endpoints {
			seen[e.Ref]++
		}
		after = p.NextAfter
	}
	for i, u := range append(urls, "https://gone-015a.example/hooks") {
		want := 1
		if i == 12 {
			want = 0 // enabled before its page
		}
		if seen[endpoint.Ref(u)] != want {
			t.Errorf("%s listed %d times, want %d", u, seen[endpoint.Ref(u)], want)
		}
	}
	if seen[endpoint.Ref("https://gone-005a.example/hooks")] != 0 {
		t.Error("an endpoint added before the cursor was listed after it")
	}

	// Another Admin, on another Store, has handed out no cursor.
	other, err := sqlite.Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ob := setupAdminConfig(t, Config{Store: other})
	if p, code := page(ob, endpoint.Ref(urls[19])); code != http.StatusOK || len(p.Endpoints) == 0 || p.Endpoints[0].Ref != endpoint.Ref(urls[20]) {
		t.Errorf("the page after %s from another Store: %d, %+v, want %s first", urls[19], code, p.Endpoints, urls[20])
	}
	resp, body := ob.do(t, "GET", "/api/endpoints?after="+first.NextAfter, "", nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
}

package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
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
// one array. It answers a page of them in ref order, limit at a time
// (100 by default, at most 1000), with next_after to pass as after for
// the next; the last page has none. Every endpoint comes once.
func TestAdminEndpointsPages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	urls := b.manyDisabled(t, 120)
	want := make([]string, len(urls))
	for i, u := range urls {
		want[i] = endpoint.Ref(u)
	}
	slices.Sort(want)

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
		t.Fatalf("the pages gave %d refs, want the %d in ref order, each once", len(got), len(want))
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
	want := make([]string, len(urls))
	for i, u := range urls {
		want[i] = endpoint.Ref(u)
	}
	slices.Sort(want)
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
		t.Fatalf("the pages gave %d refs, want the %d in ref order, each once", len(got), len(want))
	}
	if first := adminOK[contractPageJSON](t, b, "GET", "/api/contracts", ""); len(first.Contracts) != 100 || first.NextAfter != first.Contracts[99].Ref {
		t.Fatalf("the first page has %d contracts, next_after %q, want 100 and the last one's ref", len(first.Contracts), first.NextAfter)
	}
	resp, body := b.do(t, "GET", "/api/contracts?limit=0", "", nil)
	refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
}

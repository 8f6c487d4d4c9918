package browsertest

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestOpsPageRefusesAnotherSite: a page of another site, open in the
// operator's browser, that posts the ops page's form, posts an empty
// text/plain form or a bodiless fetch to the JSON API (an action that
// reads no body takes an empty one whatever its type), or frames the ops
// page to lay its buttons under a click, changes nothing and shows
// nothing. The Admin's Authorize lets every request in, as an
// application whose operators are known by their network or by HTTP
// basic authentication would (a SameSite cookie would already keep
// another site's request out): what refuses these is the Admin's own.
func TestOpsPageRefusesAnotherSite(t *testing.T) {
	path := chromium(t)
	s, srv, id := setupAuthorized(t, func(*http.Request) error { return nil })
	sid := strconv.FormatInt(id, 10)
	ops := srv.URL + prefix
	pages := map[string]string{
		"/form": `<form method="post" action="` + html.EscapeString(ops+"/ops/redrive") + `">` +
			`<input type="hidden" name="id" value="` + sid + `"><button id="go">win a prize</button></form>`,
		"/plain": `<form method="post" enctype="text/plain" action="` + html.EscapeString(ops+"/api/deliveries/"+sid+"/redrive") + `">` +
			`<button id="go">win a prize</button></form>`,
		"/fetch": `<p>nothing to see</p>`,
		"/frame": `<iframe id="ops" width="1000" height="600" src="` + html.EscapeString(ops+"/") + `"></iframe>`,
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>another site</title>" + pages[r.URL.Path]))
	}))
	t.Cleanup(other.Close)
	// localhost is another site than the Admin's 127.0.0.1.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	ctx := browser(t, path) // after the servers: its cleanup closes the browser first

	stillFailed := func(what string) {
		t.Helper()
		d, err := s.Outbox.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != courier.StatusFailed {
			t.Fatalf("%s: the delivery is %s, want failed: another site acted", what, d.Status)
		}
		h, err := s.Endpoints.Get(t.Context(), endpoint)
		if err != nil || h.State == store.EndpointDisabled {
			t.Fatalf("%s: endpoint %+v, %v", what, h, err)
		}
	}

	for _, p := range []string{"/form", "/plain"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(otherURL+p)); err != nil {
			t.Fatal(err)
		}
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("go")))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != http.StatusForbidden || !strings.HasPrefix(resp.URL, ops+"/") {
			t.Errorf("%s: the post answered %d at %s, want 403", p, resp.Status, resp.URL)
		}
		stillFailed(p)
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(otherURL+"/fetch")); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"/api/deliveries/" + sid + "/cancel", "/api/deliveries/" + sid + "/redrive", "/api/redrive"} {
		js := `fetch(` + strconv.Quote(ops+action) + `, {method: "POST", mode: "no-cors", credentials: "include"}).then(r => r.type)`
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil || got != "opaque" {
			t.Fatalf("fetch %s: %q, %v", action, got, err)
		}
		stillFailed("fetch " + action)
	}

	// Framed, the ops page is not shown: the browser puts its own error
	// page in the frame.
	if err := chromedp.Do(ctx, chromedp.Navigate(otherURL+"/frame")); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, "ops-framed-by-another-site.png")
	targets, err := chromedp.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	frames := 0
	for _, tg := range targets {
		if tg.Type != "iframe" || !strings.HasPrefix(tg.URL, ops+"/") {
			continue
		}
		frames++
		fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(tg.TargetID))
		shown, err := chromedp.Run(fctx, chromedp.Evaluate[string](`document.location.href + " " + document.title`))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the frame shows %s", shown)
		if strings.Contains(shown, "courier ops") || strings.HasPrefix(shown, ops) {
			t.Errorf("another site framed the ops page: %s", shown)
		}
	}
	if frames != 1 {
		t.Fatalf("found %d frames of the ops page, want 1: %+v", frames, targets)
	}
}

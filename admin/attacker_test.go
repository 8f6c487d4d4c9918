package admin

import (
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// hostile is markup a stored value could carry: text that closes an
// attribute and opens a script, a javascript: link and an event handler.
const hostile = `"><script>alert(1)</script><a href="javascript:alert(1)" onx='1'>`

// linkAttr is the value of every href and form action on a page.
var linkAttr = regexp.MustCompile(`(?:href|action)="([^"]*)"`)

// TestAdminEscapesWhatTheDatabaseHolds writes markup straight into every
// column the ops page shows (notification ids, codes a receiver sent back,
// worker names, key ids, breaker reasons, endpoint URLs no store call
// would take) and finds it escaped on every page: no script, no attribute
// it could open, and every link and form still the page's own, relative.
// It runs on both engines.
func TestAdminEscapesWhatTheDatabaseHolds(t *testing.T) {
	t.Parallel()
	onBothEngines(t, escapesWhatTheDatabaseHolds)
}

func escapesWhatTheDatabaseHolds(t *testing.T, s *store.Store) {
	b := setupAdminConfig(t, Config{Store: s, Authorize: allowAll})
	ctx := t.Context()
	failed := b.failed(t, "n-failed", hookA)
	leased := b.enqueue(t, "n-leased", hookB)
	if claimed, err := protocol.For(b.store).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute}); err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	db := b.store.DB()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE courier_outbox SET notification_id = ? || CAST(id AS TEXT), endpoint = ? || CAST(id AS TEXT), last_error_code = ?, last_remote_code = ?, key_id = ?, payload_key_id = ?, profile = ?`,
			[]any{hostile, "javascript:alert(1)//" + hostile, hostile, hostile, hostile, hostile, hostile}},
		{`UPDATE courier_outbox SET lease_owner = ? WHERE status = 'leased'`, []any{hostile}},
		{`UPDATE courier_attempts SET owner = ?, error_code = ?, remote_code = ?`, []any{hostile, hostile, hostile}},
		{`UPDATE courier_endpoints SET endpoint = ?, reason = ?`, []any{"https://x.example/" + hostile, hostile}},
	} {
		if _, err := db.ExecContext(ctx, db.Rebind(q.sql), q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	for _, p := range []string{"/", "/deliveries/" + strconv.FormatInt(failed, 10), "/deliveries/" + strconv.FormatInt(leased, 10)} {
		resp, raw := b.do(t, "GET", p, "", nil)
		page := string(raw)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, page)
		}
		if !strings.Contains(page, "&lt;script&gt;") {
			t.Errorf("GET %s does not show the stored values: %s", p, page)
		}
		if strings.Contains(page, "<script") || strings.Contains(page, "onx='") || strings.Contains(page, `onx="`) {
			t.Errorf("GET %s carries the stored markup unescaped: %s", p, page)
		}
		for _, m := range linkAttr.FindAllStringSubmatch(page, -1) {
			if !strings.HasPrefix(m[1], "./") && !strings.HasPrefix(m[1], "../") {
				t.Errorf("GET %s links to %q, not a path of its own", p, m[1])
			}
		}
	}
}

// TestAdminAnswersAreNeitherStoredNorSniffed: every answer with a body,
// page, JSON or refusal, tells caches not to keep it (it shows the
// outbox to whoever is let in) and browsers not to read it as another
// type; every page also refuses to be framed, so no other site can lay
// its buttons under a click.
func TestAdminAnswersAreNeitherStoredNorSniffed(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	pending := b.enqueue(t, "n-2", hookA)
	fid := strconv.FormatInt(failed, 10)
	pages := []string{"/", "/?done=redrive&n=1", "/deliveries?notification_id=n-1", "/deliveries/" + fid}
	reads := []string{"/api/health", "/api/deliveries", "/api/deliveries/" + fid, "/api/endpoints", "/api/contracts",
		"/api/endpoints/" + endpoint.Ref(hookA) + "/blocked-keys",
		"/nowhere", "/deliveries/999", "/api/deliveries?limit=0", "/deliveries?notification_id=%3Cb%3E"}
	check := func(what string, resp *http.Response, page bool) {
		t.Helper()
		hd := resp.Header
		if hd.Get("Cache-Control") != "no-store" || hd.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d with Cache-Control %q, X-Content-Type-Options %q", what, resp.StatusCode, hd.Get("Cache-Control"), hd.Get("X-Content-Type-Options"))
		}
		if page && (hd.Get("X-Frame-Options") != "DENY" || !strings.Contains(hd.Get("Content-Security-Policy"), "frame-ancestors 'none'")) {
			t.Errorf("%s: a page that may be framed: %v", what, hd)
		}
	}
	for _, method := range []string{"GET", "HEAD"} {
		for _, p := range pages {
			resp, _ := b.do(t, method, p, "", nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s: %d", method, p, resp.StatusCode)
			}
			check(method+" "+p, resp, true)
		}
		for _, p := range reads {
			resp, _ := b.do(t, method, p, "", nil)
			check(method+" "+p, resp, false)
		}
	}
	for _, m := range mutations(failed, pending) {
		if strings.HasPrefix(m.path, "/api/") {
			resp, body := b.do(t, m.method, m.path, m.body, nil)
			check(m.method+" "+m.path+": "+string(body), resp, false)
		}
	}
}

// TestAdminGetChangesNothing: a link, an image or a prefetch (GET or HEAD)
// to any action, carrying what the action's form or body would, is 405
// and acts on nothing; a crafted link to the page puts no words of its
// own on it.
func TestAdminGetChangesNothing(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	pending := b.enqueue(t, "n-2", hookA)
	for _, m := range mutations(failed, pending) {
		query := m.body
		if strings.HasPrefix(query, "{") {
			query = ""
		}
		for _, method := range []string{"GET", "HEAD"} {
			resp, body := b.do(t, method, m.path+"?"+query, "", nil)
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
				t.Errorf("%s %s?%s: %d %s", method, m.path, query, resp.StatusCode, body)
			}
		}
	}
	_, raw := b.do(t, "GET", "/?done=%3Cb%3Eowned&n=%3Cb%3E&id="+strconv.FormatInt(failed, 10), "", nil)
	if strings.Contains(string(raw), "owned") || strings.Contains(string(raw), `id="flash"`) {
		t.Errorf("a crafted link put words on the page: %s", raw)
	}
	if f, p := b.status(t, failed), b.status(t, pending); f != courier.StatusFailed || p != courier.StatusPending {
		t.Fatalf("a GET acted: failed is %s, pending is %s", f, p)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), hookA); h.State != store.EndpointClosed || h.ConsecutiveFailures != 1 || h.Limits != (store.Limits{}) {
		t.Fatalf("a GET acted on the endpoint: %+v", h)
	}
	if k, err := b.store.Contracts.Get(t.Context(), hookA); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("a GET pinned a contract: %+v, %v", k, err)
	}
}

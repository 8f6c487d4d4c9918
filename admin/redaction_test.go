package admin

import (
	"bytes"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// secretHook is an endpoint whose URL carries credentials in its userinfo,
// its path and its query.
const (
	secretHook      = "https://user:pass@h.example/p/PATHSECRET?token=SECRET"
	secretRedacted  = "https://h.example/…"
	secretHookOther = "https://user:pass@h.example/p/PATHSECRET?token=SECRET2" // same redaction, another endpoint
)

// secretForms is every spelling in which the credentials could leak: raw,
// URL-escaped (query and path), HTML-escaped and JSON-escaped.
func secretForms() []string {
	var forms []string
	for _, s := range []string{"pass", "SECRET", "PATHSECRET", "user:pass", "user:pass@", "token="} {
		j, _ := json.Marshal(s)
		forms = append(forms, s, url.QueryEscape(s), url.PathEscape(s), html.EscapeString(s), string(j[1:len(j)-1]),
			strings.ReplaceAll(url.QueryEscape(s), "%", "%25")) // escaped twice, as in a Location of an escaped query
	}
	return forms
}

// syncBuffer is a log sink shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAdminNeverShowsEndpointSecrets walks every page and every API answer
// over deliveries to an endpoint whose URL carries credentials, acting on
// it by ref, and finds the credentials in none of them, in no encoding:
// not in bodies, not in headers (Location), not in the log. Before, the
// page, the JSON API and the forms' hidden fields carried the full URL.
//
// It runs on both engines: refs are resolved by the store's SQL.
func TestAdminNeverShowsEndpointSecrets(t *testing.T) {
	t.Parallel()
	onBothEngines(t, neverShowsEndpointSecrets)
}

// onBothEngines runs test on SQLite (a nil Store: setupAdminConfig opens
// one) and on PostgreSQL, in parallel.
func onBothEngines(t *testing.T, test func(t *testing.T, s *store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		test(t, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		test(t, openPostgresStore(t))
	})
}

func neverShowsEndpointSecrets(t *testing.T, s *store.Store) {
	var logs syncBuffer
	b := setupAdminConfig(t, Config{Store: s, Authorize: allowAll, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	failed := b.failed(t, "n-failed", secretHook)
	pending := b.enqueue(t, "n-pending", secretHook)
	other := b.failed(t, "n-other", secretHookOther)
	ref, otherRef := endpoint.Ref(secretHook), endpoint.Ref(secretHookOther)
	fid, pid := strconv.FormatInt(failed, 10), strconv.FormatInt(pending, 10)

	forms := secretForms()
	var answers int
	check := func(what string, resp *http.Response, body []byte) {
		t.Helper()
		answers++
		var head strings.Builder
		if err := resp.Header.Write(&head); err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			if bytes.Contains(body, []byte(f)) {
				t.Errorf("%s: the body shows %q: %s", what, f, body)
			}
			if strings.Contains(head.String(), f) {
				t.Errorf("%s: the headers show %q: %s", what, f, head.String())
			}
		}
	}
	get := func(p string) []byte {
		t.Helper()
		resp, body := b.do(t, "GET", p, "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, body)
		}
		check("GET "+p, resp, body)
		return body
	}
	post := func(p, body string, want int) []byte {
		t.Helper()
		resp, out := b.do(t, "POST", p, body, nil)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d %s", p, resp.StatusCode, out)
		}
		check("POST "+p, resp, out)
		return out
	}

	// What is shown is the redacted endpoint, and its ref to act by.
	index := string(get("/"))
	for _, want := range []string{secretRedacted, `name="endpoint_ref" value="` + ref + `"`, `name="endpoint_ref" value="` + otherRef + `"`} {
		if !strings.Contains(index, want) {
			t.Errorf("the ops page lacks %s", want)
		}
	}
	get("/deliveries/" + fid)
	get("/deliveries/" + pid)
	get("/api/health")
	var page deliveryPageJSON
	if err := json.Unmarshal(get("/api/deliveries"), &page); err != nil || len(page.Deliveries) != 3 {
		t.Fatalf("deliveries: %+v %v", page, err)
	}
	for _, d := range page.Deliveries {
		if d.Endpoint != secretRedacted || (d.EndpointRef != ref && d.EndpointRef != otherRef) {
			t.Errorf("delivery %d shows endpoint %q, ref %q", d.ID, d.Endpoint, d.EndpointRef)
		}
	}
	if err := json.Unmarshal(get("/api/deliveries?endpoint_ref="+ref), &page); err != nil || len(page.Deliveries) != 2 {
		t.Fatalf("deliveries by ref: %+v %v", page, err)
	}
	get("/api/deliveries/" + fid)
	var endpoints endpointPageJSON
	if err := json.Unmarshal(get("/api/endpoints"), &endpoints); err != nil || len(endpoints.Endpoints) != 2 {
		t.Fatalf("endpoints: %+v %v", endpoints, err)
	}

	// Acting by ref reaches the right endpoint, and its answers show no
	// more than the reads.
	post("/api/endpoints/"+ref+"/disable", "", http.StatusOK)
	if h, _ := b.store.Endpoints.Get(t.Context(), secretHook); h.State != store.EndpointDisabled {
		t.Fatalf("disable by ref: %+v", h)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), secretHookOther); h.State == store.EndpointDisabled {
		t.Fatal("disable by ref reached the endpoint that differs only in its query")
	}
	get("/")
	post("/api/endpoints/"+ref+"/enable", "", http.StatusOK)
	post("/ops/endpoints/disable", "endpoint_ref="+ref, http.StatusSeeOther)
	post("/ops/endpoints/enable", "endpoint_ref="+ref, http.StatusSeeOther)
	if h, _ := b.store.Endpoints.Get(t.Context(), secretHook); h.State != store.EndpointClosed {
		t.Fatalf("enable by ref: %+v", h)
	}
	post("/api/endpoints/"+ref+"/limits", `{"max_in_flight":2,"rate":4}`, http.StatusOK)
	post("/api/endpoints/"+ref+"/limits", `{"max_in_flight":0,"rate":0}`, http.StatusOK)
	post("/api/redrive", `{"endpoint_ref":"`+ref+`"}`, http.StatusOK)
	if st, ost := b.status(t, failed), b.status(t, other); st != courier.StatusPending || ost != courier.StatusFailed {
		t.Fatalf("redrive by ref: %s, and the other endpoint's %s", st, ost)
	}
	post("/ops/redrive", "endpoint_ref="+otherRef, http.StatusSeeOther)
	if st := b.status(t, other); st != courier.StatusPending {
		t.Fatalf("form redrive by ref: %s", st)
	}
	post("/api/deliveries/"+pid+"/cancel", "", http.StatusOK)
	b.failDue(t)
	post("/api/deliveries/"+fid+"/redrive", "", http.StatusOK)
	get("/?done=redrive&n=1")
	get("/deliveries/" + fid)
	get("/api/deliveries?status=failed")

	// Contracts and the search name the endpoint the same way.
	post("/api/contracts/"+ref+"/pin", `{"capabilities_sha256":"`+strings.Repeat("a", 64)+`"}`, http.StatusOK)
	if k, err := b.store.Contracts.Get(t.Context(), secretHook); err != nil || k.CapabilitiesSHA256 != strings.Repeat("a", 64) {
		t.Fatalf("pin by ref: %+v, %v", k, err)
	}
	get("/api/contracts")
	post("/api/contracts/"+ref+"/fail-mismatched", "", http.StatusOK)
	post("/ops/contracts/pin", "endpoint_ref="+ref+"&capabilities_sha256="+strings.Repeat("b", 64), http.StatusSeeOther)
	post("/ops/contracts/fail-mismatched", "endpoint_ref="+ref, http.StatusSeeOther)
	get("/")
	get("/deliveries?notification_id=n-failed")
	get("/api/deliveries?notification_id=n-failed")

	if answers < 20 {
		t.Fatalf("only %d answers checked", answers)
	}
	for _, f := range forms {
		if strings.Contains(logs.String(), f) {
			t.Errorf("the log shows %q: %s", f, logs.String())
		}
	}
	if !strings.Contains(logs.String(), ref) {
		t.Errorf("the log does not name the endpoint by ref: %s", logs.String())
	}
	if bad := logkey.UndocumentedJSON(logs.String()); len(bad) != 0 {
		t.Errorf("logged keys %v, which courier's documentation does not list", bad)
	}
}

// openPostgresStore opens a Store on a fresh PostgreSQL database of the
// server the package's tests share (pgtest.URL). Without one the test is
// skipped, or fails if COURIER_PG_REQUIRE is set.
func openPostgresStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	db, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

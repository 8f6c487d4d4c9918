package admin

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/damage"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/opsjson"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// adminPrefix is where the tests mount the Admin, as an application would.
const adminPrefix = "/ops/courier"

// Endpoints the tests deliver to, as the Admin shows them (redacted),
// and their refs.
const (
	hookA         = "https://a.example/hooks?x=1&y=2"
	hookB         = "https://b.example/hooks"
	hookARedacted = "https://a.example/…"
	hookBRedacted = "https://b.example/…"
)

var (
	refA = endpoint.Ref(hookA)
	refB = endpoint.Ref(hookB)
)

type problemBody struct {
	Status int                 `json:"status"`
	Code   courier.Code        `json:"code"`
	Detail string              `json:"detail"`
	Errors []map[string]string `json:"errors"`
}

// adminBundle is an Admin over a real SQLite outbox, mounted under
// adminPrefix behind a real HTTP server.
type adminBundle struct {
	store  *store.Store
	server *httptest.Server
	client *http.Client // follows no redirects
}

func setupAdmin(t *testing.T, authorize func(*http.Request) error) *adminBundle {
	t.Helper()
	return setupAdminConfig(t, Config{Authorize: authorize})
}

// setupAdminConfig is setupAdmin with cfg, on a fresh SQLite store unless
// cfg has one.
func setupAdminConfig(t testing.TB, cfg Config) *adminBundle {
	t.Helper()
	if cfg.Store == nil {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		cfg.Store = s
	}
	s := cfg.Store
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(adminPrefix+"/", http.StripPrefix(adminPrefix, h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &adminBundle{store: s, server: srv, client: &client}
}

func allowAll(*http.Request) error { return nil }

// enqueue adds a pending delivery of notification id to endpoint.
func (b *adminBundle) enqueue(t *testing.T, id, endpoint string) int64 {
	t.Helper()
	e, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), store.EnqueueParams{
		NotificationID: id, Endpoint: endpoint, Payload: []byte(`{"id":"` + id + `"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// failDue claims every due delivery and fails it as a 503 would: one
// failed attempt each, counted against its endpoint.
func (b *adminBundle) failDue(t *testing.T) {
	t.Helper()
	claimed, err := protocol.For(b.store).Claim(t.Context(), protocol.ClaimParams{Owner: "test-worker", Limit: protocol.MaxClaimBatch, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if _, err := protocol.For(b.store).Settle(t.Context(), protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverUnavailable, HTTPStatus: http.StatusServiceUnavailable}); err != nil {
			t.Fatal(err)
		}
	}
}

// failed adds a delivery and fails it; nothing else may be due.
func (b *adminBundle) failed(t *testing.T, id, endpoint string) int64 {
	t.Helper()
	d := b.enqueue(t, id, endpoint)
	b.failDue(t)
	return d
}

func (b *adminBundle) status(t *testing.T, id int64) courier.Status {
	t.Helper()
	d, err := b.store.Outbox.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status
}

// do sends a request to the Admin's path p: a body starting with "{" is
// JSON, any other a form.
func (b *adminBundle) do(t *testing.T, method, p, body string, edit func(*http.Request)) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.server.URL+adminPrefix+p, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.HasPrefix(body, "{"):
		req.Header.Set("Content-Type", "application/json")
	case body != "":
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if edit != nil {
		edit(req)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// ok sends a request that must answer 200 and decodes its JSON into T.
func adminOK[T any](t *testing.T, b *adminBundle, method, p, body string) T {
	t.Helper()
	resp, out := b.do(t, method, p, body, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%s %s = %d %s %s", method, p, resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}
	var v T
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// refused checks a problem+json answer's status and code.
func refused(t *testing.T, resp *http.Response, body []byte, status int, code courier.Code) problemBody {
	t.Helper()
	var p problemBody
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("status %d %q, want %d problem+json: %s", resp.StatusCode, resp.Header.Get("Content-Type"), status, body)
	}
	if err := json.Unmarshal(body, &p); err != nil || p.Code != code {
		t.Fatalf("code %q (%v), want %q: %s", p.Code, err, code, body)
	}
	return p
}

func TestAdminConfig(t *testing.T) {
	t.Parallel()
	if _, err := NewHandler(Config{}); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Fatalf("no store: %v", err)
	}
}

func TestAdminHealth(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	h := adminOK[healthJSON](t, b, "GET", "/api/health", "")
	if h.Status != store.HealthOK || h.Code != "" || len(h.Counts) != len(courier.Statuses()) || h.Due != 0 {
		t.Fatalf("empty outbox: %+v", h)
	}
	b.failed(t, "n-1", hookA)
	b.enqueue(t, "n-2", hookA)
	h = adminOK[healthJSON](t, b, "GET", "/api/health", "")
	want := healthJSON{Status: store.HealthBlocked, Code: courier.CodeFailedPresent, Due: 1, Failed: 1}
	if h.Status != want.Status || h.Code != want.Code || h.Due != want.Due || h.Failed != want.Failed ||
		h.Counts[courier.StatusFailed] != 1 || h.Counts[courier.StatusPending] != 1 || h.OldestDueAgeSeconds < 0 {
		t.Fatalf("health %+v, want %+v with one failed and one pending", h, want)
	}
}

// TestAdminHealthCountsOverdue: a delivery waiting past its deadline,
// which no worker claimed, is counted as overdue, and the health is
// blocked with deliveries_overdue.
func TestAdminHealthCountsOverdue(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := setupAdminConfig(t, Config{Store: s})
	if _, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{
		NotificationID: "n-1", Endpoint: hookA, Payload: []byte(`{}`), Deadline: clock.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Hour)
	h := adminOK[healthJSON](t, b, "GET", "/api/health", "")
	if h.Status != store.HealthBlocked || h.Code != courier.CodeDeliveriesOverdue || h.Overdue != 1 || h.Due != 1 {
		t.Fatalf("health %+v, want blocked deliveries_overdue with the one due delivery overdue", h)
	}
}

// TestAdminDatabaseUnavailable: a database that fails the store's call
// (here, closed under the handler) is 503 database_unavailable with
// Retry-After, for the API and for the page, not a 500 that reads as
// courier's own failure.
func TestAdminDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	if err := b.store.DB().Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/health", "/"} {
		resp, body := b.do(t, "GET", p, "", nil)
		refused(t, resp, body, http.StatusServiceUnavailable, courier.CodeDatabaseUnavailable)
		if resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After: %v", p, resp.Header)
		}
	}
}

// TestAdminDatabaseDamaged: a database file SQLite finds damaged (here,
// courier_outbox's root page overwritten) is 503 database_corrupt, for
// the API and for the page, without Retry-After (no retry passes until
// it is restored), not a 500 internal_error that reads as courier's own
// failure.
func TestAdminDatabaseDamaged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "outbox.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	damage.Tables(t, s, path, "courier_outbox")
	if s, err = sqlite.Open(ctx, path, store.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	b := setupAdminConfig(t, Config{Store: s})
	for _, p := range []string{"/api/health", "/api/deliveries", "/"} {
		resp, body := b.do(t, "GET", p, "", nil)
		refused(t, resp, body, http.StatusServiceUnavailable, courier.CodeDatabaseCorrupt)
		if resp.Header.Get("Retry-After") != "" {
			t.Errorf("%s: 503 database_corrupt with Retry-After: %v", p, resp.Header)
		}
	}
}

// TestAdminDatabaseNotSetUp: a database the store cannot find its tables
// in (here, courier_outbox dropped under the handler) is no passing
// failure: 500 config_invalid saying what is wrong, for the API and the
// page, not 503 database_unavailable (try again later) nor a bare
// internal_error.
func TestAdminDatabaseNotSetUp(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	if _, err := b.store.DB().ExecContext(t.Context(), "DROP TABLE courier_outbox"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/health", "/api/deliveries", "/"} {
		resp, body := b.do(t, "GET", p, "", nil)
		pb := refused(t, resp, body, http.StatusInternalServerError, courier.CodeConfigInvalid)
		if !strings.Contains(pb.Detail, "not reachable") {
			t.Fatalf("%s: detail %q, want it to say courier's tables are out of reach", p, pb.Detail)
		}
	}
}

func TestAdminListPages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	for i := range 3 {
		b.enqueue(t, fmt.Sprintf("fail-%d", i), hookA)
	}
	b.failDue(t)
	for i := range 4 {
		b.enqueue(t, fmt.Sprintf("wait-%d", i), hookB)
	}

	// Pages of 3 over 7 rows: 3, 3, 1, newest first, each row once.
	var ids []int64
	q := "limit=3"
	for pages := 1; ; pages++ {
		resp, raw := b.do(t, "GET", "/api/deliveries?"+q, "", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d %s", pages, resp.StatusCode, raw)
		}
		if strings.Contains(string(raw), `"payload"`) {
			t.Fatalf("a page carries payloads: %s", raw)
		}
		var page deliveryPageJSON
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Deliveries {
			if len(ids) > 0 && d.ID >= ids[len(ids)-1] {
				t.Fatalf("page %d: id %d after %d", pages, d.ID, ids[len(ids)-1])
			}
			ids = append(ids, d.ID)
		}
		if page.NextBefore == 0 {
			if pages != 3 || len(page.Deliveries) != 1 {
				t.Fatalf("last page is page %d with %d rows", pages, len(page.Deliveries))
			}
			break
		}
		q = "limit=3&before=" + strconv.FormatInt(page.NextBefore, 10)
	}
	if len(ids) != 7 {
		t.Fatalf("pages held %d deliveries, want 7", len(ids))
	}

	future := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"", 7},
		{"status=failed", 3},
		{"endpoint_ref=" + refB, 4},
		{"status=failed&endpoint_ref=" + refB, 0},
		{"since=" + future, 0},
		{"until=" + future, 7},
	} {
		page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?"+tc.query, "")
		if len(page.Deliveries) != tc.want || page.Deliveries == nil {
			t.Errorf("?%s: %d deliveries, want %d", tc.query, len(page.Deliveries), tc.want)
		}
		for _, d := range page.Deliveries {
			if strings.Contains(tc.query, "status=failed") && (d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeReceiverUnavailable) {
				t.Errorf("?%s: %+v", tc.query, d)
			}
		}
	}
}

func TestAdminListRefusals(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	for _, tc := range []struct{ query, field string }{
		{"status=lost", "status"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=ten", "limit"},
		{"before=-1", "before"},
		{"before=0", "before"},
		{"before=9223372036854775808", "before"},
		{"before=0x10", "before"},
		{"before=1.5", "before"},
		{"limit=99999999999999999999", "limit"},
		{"since=yesterday", "since"},
		{"until=2026-01-02", "until"},
		{"since=2026-01-02T00:00:00Z&until=2026-01-02T00:00:00Z", "until"},
		{"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
		{"since=2026-01-02T00:00:00.0000001Z&until=2026-01-02T00:00:00.0000009Z", "until"}, // the same microsecond
		{"endpoint_ref=" + url.QueryEscape(hookA), "endpoint_ref"},
		{"notification_id=" + url.QueryEscape("order 7"), "notification_id"},
		{"notification_id=" + strings.Repeat("n", 257), "notification_id"},
	} {
		resp, body := b.do(t, "GET", "/api/deliveries?"+tc.query, "", nil)
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != tc.field {
			t.Errorf("?%s: errors %v, want field %s", tc.query, p.Errors, tc.field)
		}
	}
}

func TestAdminGetDelivery(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	id := b.failed(t, "n-1", hookA)
	path := "/api/deliveries/" + strconv.FormatInt(id, 10)

	resp, raw := b.do(t, "GET", path, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var members struct{ Delivery map[string]json.RawMessage }
	if err := json.Unmarshal(raw, &members); err != nil {
		t.Fatal(err)
	}
	if _, ok := members.Delivery["payload"]; ok {
		t.Fatalf("the delivery carries its payload: %s", raw)
	}
	var got opsjson.DeliveryDetail
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"id":"n-1"}`))
	d := got.Delivery
	if d.ID != id || d.NotificationID != "n-1" || d.Endpoint != hookARedacted || d.EndpointRef != refA || d.Status != courier.StatusFailed ||
		d.PayloadSHA256 != hex.EncodeToString(sum[:]) || d.Attempts != 1 || d.LastStatus != 503 {
		t.Fatalf("delivery %+v", d)
	}
	if len(got.Attempts) != 1 {
		t.Fatalf("attempts %+v", got.Attempts)
	}
	if a := got.Attempts[0]; a.Attempt != 1 || a.Owner != "test-worker" || a.Outcome != "failed" ||
		a.HTTPStatus != 503 || a.ErrorCode != courier.CodeReceiverUnavailable || a.FinishedAt.IsZero() {
		t.Fatalf("attempt %+v", a)
	}

	resp, body := b.do(t, "GET", "/api/deliveries/999", "", nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
}

func TestAdminRedrive(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	a1 := b.enqueue(t, "a-1", hookA)
	a2 := b.enqueue(t, "a-2", hookA)
	b1 := b.enqueue(t, "b-1", hookB)
	b.failDue(t)

	one := "/api/deliveries/" + strconv.FormatInt(a1, 10) + "/redrive"
	if got := adminOK[redrivenJSON](t, b, "POST", one, ""); got.Redriven != 1 {
		t.Fatalf("redrive one: %+v", got)
	}
	if st := b.status(t, a1); st != courier.StatusPending {
		t.Fatalf("redriven delivery is %s", st)
	}
	// One Redrive does not take is refused, as cancel refuses one it does
	// not take, and its detail says what it is: a count of 0 with 200
	// read as done to a script that checks the status alone.
	resp, body := b.do(t, "POST", one, "", nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
	if !strings.Contains(string(body), "it is pending") {
		t.Fatalf("redriving a pending delivery: %s; want a detail naming its status", body)
	}
	resp, body = b.do(t, "POST", "/api/deliveries/999/redrive", "", nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)

	b.failDue(t) // a1 fails again
	if got := adminOK[redrivenJSON](t, b, "POST", "/api/redrive", `{"endpoint_ref":"`+refA+`"}`); got.Redriven != 2 {
		t.Fatalf("redrive endpoint A: %+v", got)
	}
	if a1s, a2s, b1s := b.status(t, a1), b.status(t, a2), b.status(t, b1); a1s != courier.StatusPending || a2s != courier.StatusPending || b1s != courier.StatusFailed {
		t.Fatalf("after redriving A: a1 %s, a2 %s, b1 %s", a1s, a2s, b1s)
	}
	if got := adminOK[redrivenJSON](t, b, "POST", "/api/redrive", `{}`); got.Redriven != 1 {
		t.Fatalf("redrive all: %+v", got)
	}
	if st := b.status(t, b1); st != courier.StatusPending {
		t.Fatalf("b1 is %s", st)
	}
	if h, _ := b.store.Outbox.Health(t.Context()); h.Failed != 0 || h.Counts[courier.StatusPending] != 3 {
		t.Fatalf("health after redrive: %+v", h)
	}
}

// TestAdminRedriveWithoutBody: POST /api/redrive with an empty body is
// {}, whatever its Content-Type, and redrives every endpoint's failed
// deliveries; a body that is not empty must still be JSON.
func TestAdminRedriveWithoutBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*http.Request)
	}{
		{"no body, no Content-Type", nil},
		{"Content-Length 0, a form's Content-Type", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}},
		{"an empty chunked body", func(r *http.Request) {
			r.Header.Set("Content-Type", "application/json")
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(strings.NewReader("")), -1, []string{"chunked"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAdmin(t, allowAll)
			a := b.failed(t, "a-1", hookA)
			c := b.failed(t, "b-1", hookB)
			resp, out := b.do(t, "POST", "/api/redrive", "", tc.edit)
			var got redrivenJSON
			if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &got) != nil || got.Redriven != 2 {
				t.Fatalf("%d %s, want 200 with 2 redriven", resp.StatusCode, out)
			}
			if as, cs := b.status(t, a), b.status(t, c); as != courier.StatusPending || cs != courier.StatusPending {
				t.Fatalf("after redriving: %s, %s", as, cs)
			}
		})
	}
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "a-1", hookA)
	resp, out := b.do(t, "POST", "/api/redrive", " ", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") })
	refused(t, resp, out, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Fatalf("a refused redrive acted: %s", st)
	}
}

func TestAdminCancel(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	pending := b.enqueue(t, "n-2", hookA)

	path := "/api/deliveries/" + strconv.FormatInt(pending, 10) + "/cancel"
	d := adminOK[opsjson.Delivery](t, b, "POST", path, "")
	if d.ID != pending || d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled: %+v", d)
	}
	for _, p := range []string{path, "/api/deliveries/999/cancel"} {
		resp, body := b.do(t, "POST", p, "", nil)
		refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
	}
	// A failed delivery is dismissed: suppressed, cancelled.
	d = adminOK[opsjson.Delivery](t, b, "POST", "/api/deliveries/"+strconv.FormatInt(failed, 10)+"/cancel", "")
	if d.ID != failed || d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled failed delivery: %+v", d)
	}
}

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	b.enqueue(t, "n-2", hookB) // the store knows hookB by its delivery

	list := adminOK[endpointPageJSON](t, b, "GET", "/api/endpoints", "").Endpoints
	if len(list) != 1 || list[0].Endpoint != hookARedacted || list[0].Ref != refA || list[0].State != store.EndpointClosed ||
		list[0].ConsecutiveFailures != 1 || list[0].Reason != courier.CodeReceiverUnavailable || list[0].FailingSince.IsZero() {
		t.Fatalf("endpoints %+v", list)
	}

	e := adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refB+"/disable", "")
	if e.Endpoint != hookBRedacted || e.Ref != refB || e.State != store.EndpointDisabled || e.Reason != courier.CodeEndpointDisabled {
		t.Fatalf("disabled: %+v", e)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), hookB); h.State != store.EndpointDisabled {
		t.Fatalf("store: %+v", h)
	}
	if list = adminOK[endpointPageJSON](t, b, "GET", "/api/endpoints", "").Endpoints; len(list) != 2 {
		t.Fatalf("endpoints %+v", list)
	}
	for _, ref := range []string{refA, refB} {
		e = adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+ref+"/enable", "")
		if e.Ref != ref || e.State != store.EndpointClosed || e.ConsecutiveFailures != 0 {
			t.Fatalf("enabled %s: %+v", ref, e)
		}
	}
	if list = adminOK[endpointPageJSON](t, b, "GET", "/api/endpoints", "").Endpoints; len(list) != 0 {
		t.Fatalf("endpoints after enabling: %+v", list)
	}

	for _, tc := range []struct {
		name, path, body string
		contentType      string
		status           int
		code             courier.Code
	}{
		{"not a ref", "/api/endpoints/" + url.PathEscape(hookB) + "/disable", "", "", 404, courier.CodeNotFound},
		{"uppercase ref", "/api/endpoints/" + strings.ToUpper(refB) + "/disable", "", "", 404, courier.CodeNotFound},
		{"unknown ref", "/api/endpoints/" + endpoint.Ref("https://c.example/") + "/disable", "", "", 404, courier.CodeNotFound},
		{"redrive: bad ref", "/api/redrive", `{"endpoint_ref":"x"}`, "application/json", 400, courier.CodeValidation},
		{"redrive: unknown ref", "/api/redrive", `{"endpoint_ref":"` + endpoint.Ref("https://c.example/") + `"}`, "application/json", 404, courier.CodeNotFound},
		{"redrive: a URL", "/api/redrive", `{"endpoint":"` + hookA + `"}`, "application/json", 400, courier.CodeValidation},
		{"redrive: unknown field", `/api/redrive`, `{"endpoint_ref":"` + refA + `","all":true}`, "application/json", 400, courier.CodeValidation},
		{"redrive: duplicate key", "/api/redrive", `{"endpoint_ref":"x","endpoint_ref":"y"}`, "application/json", 400, courier.CodeDuplicateKey},
		{"redrive: malformed", "/api/redrive", `{"endpoint_ref":`, "application/json", 400, courier.CodeMalformedJSON},
		{"redrive: not JSON", "/api/redrive", `endpoint_ref=x`, "application/x-www-form-urlencoded", 415, courier.CodeUnsupportedMediaType},
		{"redrive: too large", "/api/redrive", `{"endpoint_ref":"` + strings.Repeat("x", 20<<10) + `"}`, "application/json", 413, courier.CodeBodyTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.do(t, "POST", tc.path, tc.body, func(r *http.Request) { r.Header.Set("Content-Type", tc.contentType) })
			refused(t, resp, body, tc.status, tc.code)
		})
	}
	if list = adminOK[endpointPageJSON](t, b, "GET", "/api/endpoints", "").Endpoints; len(list) != 0 {
		t.Fatalf("a refused request changed endpoints: %+v", list)
	}
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Fatalf("a refused redrive acted: %s", st)
	}
}

// mutations lists every request that changes something, for ids of a
// failed and a pending delivery.
func mutations(failed, pending int64) []struct{ method, path, body string } {
	f, p := strconv.FormatInt(failed, 10), strconv.FormatInt(pending, 10)
	return []struct{ method, path, body string }{
		{"POST", "/api/deliveries/" + f + "/redrive", ""},
		{"POST", "/api/deliveries/" + p + "/cancel", ""},
		{"POST", "/api/redrive", `{}`},
		{"POST", "/api/cancel", `{"endpoint_ref":"` + refA + `"}`},
		{"POST", "/api/endpoints/" + refA + "/enable", ""},
		{"POST", "/api/endpoints/" + refA + "/disable", ""},
		{"POST", "/api/endpoints/" + refA + "/limits", `{"max_in_flight":1,"rate":0}`},
		{"POST", "/ops/redrive", "id=" + f},
		{"POST", "/ops/cancel", "id=" + p},
		{"POST", "/ops/endpoints/enable", "endpoint_ref=" + refA},
		{"POST", "/ops/endpoints/disable", "endpoint_ref=" + refA},
		{"POST", "/api/contracts/" + refA + "/pin", `{"capabilities_sha256":"` + strings.Repeat("a", 64) + `"}`},
		{"POST", "/api/contracts/" + refA + "/fail-mismatched", ""},
		{"POST", "/ops/contracts/pin", "endpoint_ref=" + refA + "&capabilities_sha256=" + strings.Repeat("a", 64)},
		{"POST", "/ops/contracts/fail-mismatched", "endpoint_ref=" + refA},
	}
}

func TestAdminRefusesMutations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		authorize func(*http.Request) error
		edit      func(*http.Request)
		status    int
		code      courier.Code
	}{
		{"read-only", nil, nil, http.StatusForbidden, courier.CodeForbidden},
		{"unauthenticated", func(*http.Request) error { return errors.New("no session") }, nil, http.StatusForbidden, courier.CodeUnauthorized},
		{"forbidden", func(*http.Request) error { return fmt.Errorf("%w: viewer role", courier.CodeForbidden) }, nil, http.StatusForbidden, courier.CodeForbidden},
		{"cross-site", allowAll, func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden, courier.CodeForbidden},
		{"foreign origin", allowAll, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, http.StatusForbidden, courier.CodeForbidden},
		// As a browser sends them: a form of another site posting as
		// text/plain, a fetch without body or Content-Type (a JSON action
		// takes an empty body whatever its type), a sibling subdomain, and
		// an opaque origin (a sandboxed frame) from a browser that sends no
		// Sec-Fetch-Site.
		{"cross-site text/plain", allowAll, func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "https://evil.example")
			r.Header.Set("Content-Type", "text/plain")
		}, http.StatusForbidden, courier.CodeForbidden},
		{"cross-site without a body", allowAll, func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "https://evil.example")
			r.Header.Del("Content-Type")
			r.Body, r.ContentLength = http.NoBody, 0
		}, http.StatusForbidden, courier.CodeForbidden},
		{"same-site", allowAll, func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", "same-site")
			r.Header.Set("Origin", "https://other.example.com")
		}, http.StatusForbidden, courier.CodeForbidden},
		{"opaque origin", allowAll, func(r *http.Request) { r.Header.Set("Origin", "null") }, http.StatusForbidden, courier.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAdmin(t, tc.authorize)
			failed := b.failed(t, "n-1", hookA)
			pending := b.enqueue(t, "n-2", hookA)
			for _, m := range mutations(failed, pending) {
				resp, body := b.do(t, m.method, m.path, m.body, tc.edit)
				if resp.StatusCode != tc.status {
					t.Errorf("%s %s: %d %s", m.method, m.path, resp.StatusCode, body)
					continue
				}
				refused(t, resp, body, tc.status, tc.code)
			}
			if f, p := b.status(t, failed), b.status(t, pending); f != courier.StatusFailed || p != courier.StatusPending {
				t.Fatalf("a refused mutation acted: failed is %s, pending is %s", f, p)
			}
			if h, _ := b.store.Endpoints.Get(t.Context(), hookA); h.State != store.EndpointClosed || h.ConsecutiveFailures != 1 || h.Limits != (store.Limits{}) {
				t.Fatalf("a refused mutation acted on the endpoint: %+v", h)
			}
			if k, err := b.store.Contracts.Get(t.Context(), hookA); !errors.Is(err, courier.CodeNotFound) {
				t.Fatalf("a refused mutation pinned a contract: %+v, %v", k, err)
			}
			// Reads stay open: they are the application's to guard.
			adminOK[healthJSON](t, b, "GET", "/api/health", "")
		})
	}
}

func TestAdminSameOriginFormPost(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	resp, body := b.do(t, "POST", "/ops/redrive", "id="+strconv.FormatInt(failed, 10), func(r *http.Request) {
		r.Header.Set("Sec-Fetch-Site", "same-origin")
		r.Header.Set("Origin", b.server.URL)
	})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if st := b.status(t, failed); st != courier.StatusPending {
		t.Fatalf("status %s", st)
	}
}

func TestAdminRouting(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	for _, tc := range []struct {
		method, path string
		status       int
		code         courier.Code
		allow        string
	}{
		{"GET", "/api/redrive", 405, courier.CodeMethodNotAllowed, "POST"},
		{"GET", "/ops/endpoints/enable", 405, courier.CodeMethodNotAllowed, "POST"},
		{"POST", "/api/health", 405, courier.CodeMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/", 405, courier.CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/nowhere", 404, courier.CodeNotFound, ""},
		{"GET", "/api/deliveries/1/payload", 404, courier.CodeNotFound, ""},
	} {
		resp, body := b.do(t, tc.method, tc.path, "", nil)
		refused(t, resp, body, tc.status, tc.code)
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}

	// The mount point without its slash: ServeMux adds it.
	resp, _ := b.do(t, "GET", "", "", nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != adminPrefix+"/" {
		t.Fatalf("GET %s: %d to %q", adminPrefix, resp.StatusCode, loc)
	}
	// Handed the prefix itself, as http.StripPrefix does outside a mux, the
	// Admin redirects relatively.
	h, _ := NewHandler(Config{Store: b.store})
	rec := httptest.NewRecorder()
	http.StripPrefix(adminPrefix, h).ServeHTTP(rec, httptest.NewRequest("GET", adminPrefix, nil))
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusMovedPermanently || loc != "./courier/" {
		t.Fatalf("StripPrefix'd mount point: %d to %q", rec.Code, loc)
	}
	// Mounted at the root, it serves the same.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/health", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("at the root: %d %s", rec.Code, rec.Body)
	}
}

// TestAdminMountedWithItsSlashStripped: http.StripPrefix given the prefix
// with its trailing slash ("/ops/courier/") hands the Admin paths without
// their leading one ("", "api/health"); the Admin serves them as it does
// under the prefix without the slash, every redirect staying under it.
func TestAdminMountedWithItsSlashStripped(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	h, err := NewHandler(Config{Store: b.store, Authorize: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(adminPrefix+"/", http.StripPrefix(adminPrefix+"/", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b.server, b.client = srv, &client

	for _, tc := range []struct{ path, want string }{
		{"/", "<!doctype html>"},
		{"/api/health", `"status":"blocked"`},
		{"/api/deliveries/" + strconv.FormatInt(failed, 10), `"notification_id":"n-1"`},
		{"/deliveries/" + strconv.FormatInt(failed, 10), "n-1"},
	} {
		resp, body := b.do(t, "GET", tc.path, "", nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s%s: %d %.120q, want 200 with %q", adminPrefix, tc.path, resp.StatusCode, body, tc.want)
		}
	}
	resp, body := b.do(t, "POST", "/ops/redrive", "id="+strconv.FormatInt(failed, 10), nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST %s/ops/redrive: %d %s", adminPrefix, resp.StatusCode, body)
	}
	b.follow(t, resp)
	if st := b.status(t, failed); st != courier.StatusPending {
		t.Fatalf("status %s after the redrive, want pending", st)
	}
}

// follow resolves a redirect's relative Location against the request the
// way a browser does, and fetches it.
func (b *adminBundle) follow(t *testing.T, resp *http.Response) string {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", resp.StatusCode)
	}
	loc, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loc.Path, adminPrefix+"/") {
		t.Fatalf("redirected out of the mount point, to %s", loc)
	}
	resp2, body := b.do(t, "GET", strings.TrimPrefix(loc.RequestURI(), adminPrefix), "", nil)
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", loc, resp2.StatusCode, body)
	}
	return string(body)
}

func TestAdminOpsPage(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "order-42-shipped", hookA)
	pending := b.enqueue(t, "order-43-shipped", hookB)
	fid := strconv.FormatInt(failed, 10)

	resp, raw := b.do(t, "GET", "/", "", nil)
	page := string(raw)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	shownA := hookARedacted // never the query: see TestAdminNeverShowsEndpointSecrets
	for _, want := range []string{
		"order-42-shipped", shownA, "receiver_unavailable", "deliveries_failed", // health, failure, endpoint
		`href="./deliveries/` + fid + `"`,
		`<form class="inline" method="post" action="./ops/redrive"><input type="hidden" name="id" value="` + fid + `"><button id="redrive-` + fid + `">Redrive</button></form>`,
		`<input type="hidden" name="endpoint_ref" value="` + refA + `"><button>Redrive its failed and unreadable deliveries</button>`,
		`action="./ops/endpoints/disable"><input type="hidden" name="endpoint_ref" value="` + refA + `"><button>Disable</button>`,
		`<button>Redrive every failed or unreadable delivery</button>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") || strings.Contains(page, " disabled>") {
		t.Error("the page has scripts, network references or disabled buttons")
	}
	// The only style is inline, allowed by its digest; nothing else is.
	css := page[strings.Index(page, "<style>")+len("<style>") : strings.Index(page, "</style>")]
	sum := sha256.Sum256([]byte(css))
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") ||
		!strings.Contains(csp, "form-action 'self'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("headers %v", resp.Header)
	}

	// Redrive the failure: 303 back to the page, which says so.
	resp, body := b.do(t, "POST", "/ops/redrive", "id="+fid, nil)
	if loc := resp.Header.Get("Location"); loc != "../?done=redrive&n=1" {
		t.Fatalf("%d to %q: %s", resp.StatusCode, loc, body)
	}
	page = b.follow(t, resp)
	if !strings.Contains(page, `id="flash"`) || !strings.Contains(page, "Moved 1 delivery back to pending.") || !strings.Contains(page, "No failed deliveries.") {
		t.Fatalf("after redrive: %s", page)
	}
	if st := b.status(t, failed); st != courier.StatusPending {
		t.Fatalf("redriven delivery is %s", st)
	}

	// Disable, then enable an endpoint from the page.
	resp, _ = b.do(t, "POST", "/ops/endpoints/disable", "endpoint_ref="+refA, nil)
	if loc := resp.Header.Get("Location"); loc != "../../?done=disable" {
		t.Fatalf("disable: %d to %q", resp.StatusCode, loc)
	}
	page = b.follow(t, resp)
	if !strings.Contains(page, "Endpoint disabled.") || !strings.Contains(page, `action="./ops/endpoints/enable"><input type="hidden" name="endpoint_ref" value="`+refA+`">`) {
		t.Fatalf("after disable: %s", page)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), hookA); h.State != store.EndpointDisabled {
		t.Fatalf("endpoint %+v", h)
	}
	resp, _ = b.do(t, "POST", "/ops/endpoints/enable", "endpoint_ref="+refA, nil)
	if page = b.follow(t, resp); !strings.Contains(page, "Endpoint enabled.") {
		t.Fatalf("after enable: %s", page)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), hookA); h.State != store.EndpointClosed {
		t.Fatalf("endpoint %+v", h)
	}

	// Cancel from the delivery page.
	pid := strconv.FormatInt(pending, 10)
	_, raw = b.do(t, "GET", "/deliveries/"+pid, "", nil)
	if !strings.Contains(string(raw), `<form method="post" action="../ops/cancel"><input type="hidden" name="id" value="`+pid+`">`) {
		t.Fatalf("delivery page: %s", raw)
	}
	resp, _ = b.do(t, "POST", "/ops/cancel", "id="+pid, nil)
	if page = b.follow(t, resp); !strings.Contains(page, "Delivery cancelled.") {
		t.Fatalf("after cancel: %s", page)
	}
	if st := b.status(t, pending); st != courier.StatusSuppressed {
		t.Fatalf("cancelled delivery is %s", st)
	}

	// Bad forms are refused and change nothing.
	for _, tc := range []struct {
		path, body string
		status     int
		code       courier.Code
	}{
		{"/ops/redrive", "id=x", 400, courier.CodeValidation},
		{"/ops/cancel", "", 400, courier.CodeValidation},
		{"/ops/cancel", "id=999", 404, courier.CodeNotFound},
		{"/ops/endpoints/disable", "endpoint=", 400, courier.CodeValidation},
		{"/ops/endpoints/disable", "endpoint=not+a+url", 400, courier.CodeValidation},
		{"/ops/endpoints/disable", "endpoint=https%3A%2F%2Fh.example%2Fp%00", 400, courier.CodeValidation},
		{"/ops/endpoints/disable", "endpoint=https%3A%2F%2Fh.example%2Fp%FF", 400, courier.CodeValidation},
		{"/ops/endpoints/disable", "endpoint_ref=x", 400, courier.CodeValidation},
		{"/ops/endpoints/enable", "endpoint_ref=" + endpoint.Ref("https://c.example/"), 404, courier.CodeNotFound},
		{"/ops/redrive", "endpoint_ref=" + endpoint.Ref("https://c.example/"), 404, courier.CodeNotFound},
		{"/ops/endpoints/disable", "endpoint=" + strings.Repeat("x", 20<<10), 413, courier.CodeBodyTooLarge},
		{"/ops/endpoints/disable", `{"endpoint":"x"}`, 415, courier.CodeUnsupportedMediaType},
	} {
		resp, body := b.do(t, "POST", tc.path, tc.body, func(r *http.Request) {
			if tc.body == "" {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
		})
		refused(t, resp, body, tc.status, tc.code)
	}
}

func TestAdminDeliveryPage(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	id := strconv.FormatInt(b.failed(t, "n-1", hookA), 10)
	resp, raw := b.do(t, "GET", "/deliveries/"+id, "", nil)
	page := string(raw)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, page)
	}
	sum := sha256.Sum256([]byte(`{"id":"n-1"}`))
	for _, want := range []string{
		`id="status">failed<`, `<dd class="ep">` + hookARedacted + ` <code class="ref">` + refA + `</code></dd>`, hex.EncodeToString(sum[:]), "test-worker", "receiver_unavailable", "<td>503</td>",
		`<form method="post" action="../ops/redrive"><input type="hidden" name="id" value="` + id + `"><button id="redrive-` + id + `">Redrive</button></form>`,
		`<a href="../">courier ops</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "x=1&y=2") || strings.Contains(page, "x=1&amp;y=2") {
		t.Error("the endpoint is not redacted")
	}
	resp, body := b.do(t, "GET", "/deliveries/999", "", nil)
	refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
}

func TestAdminReadOnlyPage(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	id := strconv.FormatInt(b.failed(t, "n-1", hookA), 10)
	_, raw := b.do(t, "GET", "/", "", nil)
	page := string(raw)
	if !strings.Contains(page, `<span class="ro">read-only</span>`) || !strings.Contains(page, `<button id="redrive-`+id+`" disabled>Redrive</button>`) {
		t.Fatalf("read-only page: %s", page)
	}
	// Every form that changes something has its button disabled; the
	// search, a read, stays usable.
	for _, form := range strings.Split(page, "<form")[1:] {
		form = form[:strings.Index(form, "</form>")]
		if strings.Contains(form, `method="post"`) && !strings.Contains(form, " disabled>") {
			t.Fatalf("a read-only page has an enabled mutation: <form%s", form)
		}
	}
	if !strings.Contains(page, `<button id="search-button">Find</button>`) {
		t.Fatal("the read-only page lacks the search")
	}
}

// TestAdminFindsANotification: the API lists one notification's
// deliveries by notification_id, and the ops page's search form shows
// them, each linked to its page and its endpoint redacted.
func TestAdminFindsANotification(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	a7, b7 := b.enqueue(t, "order-7", hookA), b.enqueue(t, "order-7", hookB)
	b.enqueue(t, "order-8", hookA)

	page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?notification_id=order-7", "")
	if len(page.Deliveries) != 2 || page.Deliveries[0].ID != b7 || page.Deliveries[1].ID != a7 {
		t.Fatalf("by notification: %+v, want %d then %d", page.Deliveries, b7, a7)
	}
	page = adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?notification_id=order-7&endpoint_ref="+refA, "")
	if len(page.Deliveries) != 1 || page.Deliveries[0].ID != a7 || page.Deliveries[0].Endpoint != hookARedacted {
		t.Fatalf("by notification and endpoint: %+v, want %d redacted", page.Deliveries, a7)
	}
	if page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?notification_id=order-9", ""); len(page.Deliveries) != 0 || page.Deliveries == nil {
		t.Fatalf("unknown notification: %+v", page)
	}

	_, raw := b.do(t, "GET", "/", "", nil)
	if !strings.Contains(string(raw), `<form id="search" method="get" action="./deliveries">`) {
		t.Fatalf("the ops page lacks the search form: %s", raw)
	}
	resp, raw := b.do(t, "GET", "/deliveries?notification_id=order-7", "", nil)
	found := string(raw)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("search: %d %s", resp.StatusCode, found)
	}
	for _, want := range []string{
		"<h1>Notification order-7</h1>", hookARedacted, hookBRedacted,
		`href="./deliveries/` + strconv.FormatInt(a7, 10) + `"`, `href="./deliveries/` + strconv.FormatInt(b7, 10) + `"`,
	} {
		if !strings.Contains(found, want) {
			t.Errorf("the search page lacks %s", want)
		}
	}
	if strings.Contains(found, "order-8") || strings.Contains(found, "x=1") {
		t.Errorf("the search page shows another notification or an endpoint's query: %s", found)
	}
	_, raw = b.do(t, "GET", "/deliveries?notification_id=order-9", "", nil)
	if !strings.Contains(string(raw), "No delivery of notification <code>order-9</code>.") {
		t.Errorf("unknown notification: %s", raw)
	}
	for _, q := range []string{"", "?notification_id=", "?notification_id=" + url.QueryEscape("<b>x</b>")} {
		resp, body := b.do(t, "GET", "/deliveries"+q, "", nil)
		refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
	}
}

// TestAdminJSONCharsetIsCaseInsensitive: the API reads JSON like the
// receivers: a charset of UTF-8 in any case is accepted, another refused.
func TestAdminJSONCharsetIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-1", hookA)
	resp, body := b.do(t, "POST", "/api/redrive", `{}`, func(r *http.Request) { r.Header.Set("Content-Type", "application/json; charset=utf-16") })
	refused(t, resp, body, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
	resp, body = b.do(t, "POST", "/api/redrive", `{}`, func(r *http.Request) { r.Header.Set("Content-Type", "application/json; charset=Utf-8") })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("charset=Utf-8: %d %s", resp.StatusCode, body)
	}
	if st := b.status(t, failed); st != courier.StatusPending {
		t.Fatalf("status %s", st)
	}
}

// TestAdminShowsTheReceiversCode: the code a receiver refused an attempt
// with (from its problem+json) is shown beside courier's own, on the
// delivery and its attempts, in the API and on the ops pages.
func TestAdminShowsTheReceiversCode(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	id := b.enqueue(t, "n-1", hookA)
	claimed, err := protocol.For(b.store).Claim(t.Context(), protocol.ClaimParams{Owner: "test-worker", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("Claim = %d, %v", len(claimed), err)
	}
	if _, err := protocol.For(b.store).Settle(t.Context(), protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Failed,
		Code: courier.CodeReceiverRejected, HTTPStatus: http.StatusUnprocessableEntity, RemoteCode: "plan_unknown"}); err != nil {
		t.Fatal(err)
	}
	sid := strconv.FormatInt(id, 10)

	resp, raw := b.do(t, "GET", "/api/deliveries/"+sid, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	var got opsjson.DeliveryDetail
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Delivery.LastRemoteCode != "plan_unknown" || got.Delivery.LastErrorCode != courier.CodeReceiverRejected {
		t.Errorf("delivery codes %q / %q, want receiver_rejected / plan_unknown", got.Delivery.LastErrorCode, got.Delivery.LastRemoteCode)
	}
	if len(got.Attempts) != 1 || got.Attempts[0].RemoteCode != "plan_unknown" {
		t.Errorf("attempts %+v, want one with remote code plan_unknown", got.Attempts)
	}
	_, raw = b.do(t, "GET", "/api/deliveries?status=failed", "", nil)
	if !strings.Contains(string(raw), `"last_remote_code":"plan_unknown"`) {
		t.Errorf("the list lacks the remote code: %s", raw)
	}

	_, raw = b.do(t, "GET", "/deliveries/"+sid, "", nil)
	for _, want := range []string{`receiver <code id="remote-code">plan_unknown</code>`, `<td><code>receiver_rejected</code></td><td><code>plan_unknown</code></td>`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the delivery page lacks %s", want)
		}
	}
	_, raw = b.do(t, "GET", "/", "", nil)
	if !strings.Contains(string(raw), "<code>plan_unknown</code>") {
		t.Errorf("the ops page lacks the remote code")
	}
}

// TestAdminMountedWithoutStripPrefixSaysSo: mounted under a prefix without
// http.StripPrefix, the Admin is handed every path with the prefix still
// on it and finds none of its pages: its 404 says how it is mounted
// rather than "no such page" alone, which left the operator guessing.
func TestAdminMountedWithoutStripPrefixSaysSo(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	h, err := NewHandler(Config{Store: b.store, Authorize: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(adminPrefix+"/", h) // no http.StripPrefix
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, p := range []string{"/api/health", "/deliveries", "/"} {
		resp, err := srv.Client().Get(srv.URL + adminPrefix + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "http.StripPrefix") {
			t.Errorf("GET %s%s without StripPrefix: %d %s; want 404 saying to mount it with http.StripPrefix", adminPrefix, p, resp.StatusCode, body)
		}
	}
	// Mounted right, a path it has no page for is just that.
	resp, body := b.do(t, "GET", "/no-such-page", "", nil)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(body), "StripPrefix") {
		t.Errorf("GET %s/no-such-page: %d %s; want 404 without the mounting hint", adminPrefix, resp.StatusCode, body)
	}
}

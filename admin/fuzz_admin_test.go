package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/codetest"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/rawhttp"
	"github.com/courier-go/courier/internal/tablerows"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The Admin fuzzed end to end: one Handler over real HTTP on one SQLite
// file store, opened once per fuzz process and seeded with deliveries
// (pending, failed, quarantined payload_unreadable, one holding an
// ordering key), endpoints (failing, disabled, limited, keyed) and a
// contract pin that holds commands back, with an Authorize that accepts.
// Each input is a raw HTTP/1.1 request: method, target (path and query),
// Content-Type, Content-Encoding, Origin, Sec-Fetch-Site and a body.
// Whatever arrives, the Admin must answer as the package promises:
//
//   - an answer, and no panic;
//   - a refusal (4xx) is a problem+json body with a code courier
//     declares, and changes nothing in the store;
//   - an answer that is no successful change (a read, a redirect the
//     router makes, a refusal) changes nothing;
//   - a successful change touches only what its action names: the
//     delivery of its id (and its ordering key), the endpoint of its ref;
//   - no answer shows an endpoint URL's credentials, path or query, nor a
//     payload.
//
// After a change, the store is put back as seeded, so that every input
// meets the same outbox.

// Endpoints the fuzz seeds, each URL a secret past its host.
const (
	fuzzHookFailing  = "https://user:PASSSECRET1@failing.example/PATHSECRET1/hooks?token=TOKENSECRET1"
	fuzzHookDisabled = "https://user:PASSSECRET2@disabled.example/PATHSECRET2?token=TOKENSECRET2"
	fuzzHookLimited  = "https://limited.example/PATHSECRET3/x?token=TOKENSECRET3"
	fuzzHookKeyed    = "https://user:PASSSECRET4@keyed.example/PATHSECRET4?token=TOKENSECRET4"
	fuzzHookSource   = "https://ops:PASSSECRET5@source.example/PATHSECRET5/commands?token=TOKENSECRET5"
	fuzzPayload      = "PAYLOADSECRET"
)

// fuzzSecrets are what no answer may show.
var fuzzSecrets = []string{
	"PASSSECRET1", "PASSSECRET2", "PASSSECRET4", "PASSSECRET5",
	"PATHSECRET1", "PATHSECRET2", "PATHSECRET3", "PATHSECRET4", "PATHSECRET5",
	"TOKENSECRET1", "TOKENSECRET2", "TOKENSECRET3", "TOKENSECRET4", "TOKENSECRET5",
	fuzzPayload,
}

var fuzzAdminMethods = []string{http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "post", "PROPFIND"}

// fuzzAdminRig is the Handler under fuzz and what judging its answers
// needs.
type fuzzAdminRig struct {
	store  *store.Store
	srv    *rawhttp.Server
	addr   string // host:port of the server
	codes  map[courier.Code]bool
	tables []string          // every courier table, snapshotted and restored
	urls   map[string]string // endpoint URL by ref
	ids    map[string]int64  // the seeded deliveries, by role
}

// fuzzRow is one row of a snapshot: its table and its values.
type fuzzRow struct {
	table string
	cols  map[string]any
	text  string
}

// snapshot reads every row of every courier table, keyed by its text.
func (rg *fuzzAdminRig) snapshot(tb testing.TB) map[string]fuzzRow {
	tb.Helper()
	rows := map[string]fuzzRow{}
	for _, table := range rg.tables {
		rg.snapshotTable(tb, table, rows)
	}
	return rows
}

// snapshotTable adds the rows of table to rows.
func (rg *fuzzAdminRig) snapshotTable(tb testing.TB, table string, rows map[string]fuzzRow) {
	tb.Helper()
	for _, cols := range tablerows.Read(tb, rg.store, "SELECT * FROM "+table) {
		text, err := json.Marshal(cols)
		if err != nil {
			tb.Fatal(err)
		}
		key := table + " " + string(text)
		rows[key] = fuzzRow{table: table, cols: cols, text: key}
	}
}

// changed returns the rows in one snapshot and not the other.
func fuzzChanged(before, after map[string]fuzzRow) []fuzzRow {
	var out []fuzzRow
	for k, r := range before {
		if _, ok := after[k]; !ok {
			out = append(out, r)
		}
	}
	for k, r := range after {
		if _, ok := before[k]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// restore puts every courier table back as seeded.
func (rg *fuzzAdminRig) restore(tb testing.TB) {
	tb.Helper()
	tx, err := rg.store.DB().Beginx()
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, table := range rg.tables {
		if _, err := tx.Exec("DELETE FROM " + table); err != nil {
			tb.Fatal(err)
		}
	}
	for _, table := range rg.tables {
		if _, err := tx.Exec("INSERT INTO " + table + " SELECT * FROM fuzz_seed_" + table); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

func newFuzzAdminRig(f *testing.F) *fuzzAdminRig {
	f.Helper()
	ctx := f.Context()
	path := filepath.Join(f.TempDir(), "fuzz.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	rg := &fuzzAdminRig{store: s, codes: codetest.Set(f), urls: map[string]string{}, ids: map[string]int64{}}
	for _, u := range []string{fuzzHookFailing, fuzzHookDisabled, fuzzHookLimited, fuzzHookKeyed, fuzzHookSource} {
		rg.urls[endpoint.Ref(u)] = u
	}
	enqueue := func(st *store.Store, id, to, key string) int64 {
		e, err := st.Outbox.Enqueue(ctx, st.DB(), store.EnqueueParams{NotificationID: id, Endpoint: to, OrderingKey: key, Payload: []byte(`{"secret":"` + fuzzPayload + `"}`)})
		if err != nil {
			f.Fatal(err)
		}
		return e.ID
	}
	failDue := func() {
		claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "fuzz-worker", Limit: protocol.MaxClaimBatch, Lease: time.Minute})
		if err != nil {
			f.Fatal(err)
		}
		for _, c := range claimed {
			if _, err := protocol.For(s).Settle(ctx, protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverUnavailable, HTTPStatus: http.StatusServiceUnavailable}); err != nil {
				f.Fatal(err)
			}
		}
	}
	// A failed delivery, and the endpoint's breaker open.
	rg.ids["failed"] = enqueue(s, "n-failed", fuzzHookFailing, "")
	failDue()
	for i := 0; ; i++ {
		if i == 50 {
			f.Fatal("the breaker does not open")
		}
		h, err := s.Endpoints.Get(ctx, fuzzHookFailing)
		if err != nil {
			f.Fatal(err)
		}
		if h.State == store.EndpointOpen {
			break
		}
		enqueue(s, fmt.Sprintf("n-open-%d", i), fuzzHookFailing, "")
		failDue()
	}
	// An ordering key its failed head holds, a delivery waiting behind it.
	rg.ids["head"] = enqueue(s, "n-head", fuzzHookKeyed, "order-7")
	rg.ids["behind"] = enqueue(s, "n-behind", fuzzHookKeyed, "order-7")
	failDue()
	// A delivery sealed under a payload key the Admin's store lacks: its
	// claim quarantines it payload_unreadable.
	k, err := store.NewPayloadKey("k-fuzz", bytes.Repeat([]byte{7}, 32))
	if err != nil {
		f.Fatal(err)
	}
	sealed, err := store.Open(ctx, s.DB(), store.Config{Encryption: &store.Encryption{Current: "k-fuzz", Keys: []store.PayloadKey{k}}})
	if err != nil {
		f.Fatal(err)
	}
	rg.ids["unreadable"] = enqueue(sealed, "n-unreadable", fuzzHookKeyed, "")
	sealed.Close()
	if c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "fuzz-worker", Limit: 10, Lease: time.Minute}); err != nil || len(c) != 0 {
		f.Fatalf("Claim = %+v, %v; want none", c, err)
	}
	// Pending deliveries, a limited endpoint, a disabled one.
	rg.ids["pending"] = enqueue(s, "n-pending", fuzzHookLimited, "")
	enqueue(s, "n-disabled", fuzzHookDisabled, "")
	if err := s.Endpoints.SetLimits(ctx, fuzzHookLimited, store.Limits{MaxInFlight: 3, Rate: 2.5, Burst: 3}); err != nil {
		f.Fatal(err)
	}
	if err := s.Endpoints.Disable(ctx, fuzzHookDisabled); err != nil {
		f.Fatal(err)
	}
	// Commands built for one contract digest, the endpoint pinned to
	// another: held back.
	for i, digest := range []string{digestA, digestA} {
		c, err := ack.NewCommand(ack.Command{Operation: ack.OperationChange, RequestID: fmt.Sprintf("req-%d", i), SourceMaxAttempts: 5, CapabilitiesSHA256: digest, Body: json.RawMessage(`{"s":"` + fuzzPayload + `"}`)})
		if err != nil {
			f.Fatal(err)
		}
		payload, err := c.Payload()
		if err != nil {
			f.Fatal(err)
		}
		e, err := s.Outbox.EnqueueCommand(ctx, s.DB(), store.CommandParams{Endpoint: fuzzHookSource, Payload: payload})
		if err != nil {
			f.Fatal(err)
		}
		rg.ids[fmt.Sprintf("command-%d", i)] = e.ID
	}
	if err := s.Contracts.Pin(ctx, fuzzHookSource, digestB); err != nil {
		f.Fatal(err)
	}

	if err := s.DB().Select(&rg.tables, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'courier%' AND name <> 'courier_schema' ORDER BY name"); err != nil {
		f.Fatal(err)
	}
	for _, table := range rg.tables {
		if _, err := s.DB().Exec("CREATE TABLE fuzz_seed_" + table + " AS SELECT * FROM " + table); err != nil {
			f.Fatal(err)
		}
	}

	h, err := NewHandler(Config{Store: s, Authorize: func(*http.Request) error { return nil }})
	if err != nil {
		f.Fatal(err)
	}
	rg.srv = rawhttp.Serve(f, func(string) http.Handler { return http.StripPrefix(adminPrefix, h) })
	rg.addr = rg.srv.Addr
	return rg
}

// fuzzAdminInput is one request: target is the path and query under the
// Handler; "" for a header leaves it out.
type fuzzAdminInput struct {
	method                                             uint8
	target, contentType, contentEncoding, origin, site string
	body                                               []byte
	chunked                                            bool
}

func FuzzAdmin(f *testing.F) {
	rg := newFuzzAdminRig(f)
	id := func(role string) string { return strconv.FormatInt(rg.ids[role], 10) }
	refF, refD, refL, refK, refS := endpoint.Ref(fuzzHookFailing), endpoint.Ref(fuzzHookDisabled), endpoint.Ref(fuzzHookLimited), endpoint.Ref(fuzzHookKeyed), endpoint.Ref(fuzzHookSource)
	const form, js = "application/x-www-form-urlencoded", "application/json"
	add := func(method uint8, target, ct, body string) {
		f.Add(method, target, ct, "", "", "", []byte(body), false)
	}
	// Every read, and pages with cursors.
	for _, target := range []string{"/", "/api/health", "/api/deliveries", "/api/deliveries?limit=2", "/api/deliveries?before=" + id("pending") + "&limit=1",
		"/api/deliveries?status=failed&endpoint_ref=" + refF, "/api/deliveries?notification_id=n-head", "/api/deliveries?since=2020-01-01T00:00:00Z&until=2999-01-01T00:00:00Z",
		"/api/deliveries?limit=1&limit=2", "/api/deliveries/" + id("failed"), "/api/deliveries/" + id("unreadable"), "/api/deliveries/999999",
		"/api/endpoints", "/api/endpoints?limit=1", "/api/endpoints?after=" + refF + "&limit=2", "/api/contracts", "/api/contracts?after=" + refS,
		"/deliveries?notification_id=n-failed", "/deliveries/" + id("head"), "/?done=redrive&n=1", "/nowhere", "/api/../api/health", "deliveries"} {
		add(0, target, "", "")
	}
	// Every change, on the API and the page's forms.
	for _, m := range []struct{ target, ct, body string }{
		{"/api/deliveries/" + id("failed") + "/redrive", "", ""},
		{"/api/deliveries/" + id("unreadable") + "/redrive", js, "{}"},
		{"/api/deliveries/" + id("head") + "/redrive", "", ""},
		{"/api/deliveries/" + id("pending") + "/cancel", "", ""},
		{"/api/deliveries/" + id("head") + "/cancel", js, "{}"},
		{"/api/deliveries/" + id("command-0") + "/cancel", "", ""},
		{"/api/redrive", js, `{}`},
		{"/api/redrive", "", ""},
		{"/api/redrive", js, `{"endpoint_ref":"` + refK + `"}`},
		{"/api/redrive", js, `{"endpoint_ref":null}`},
		{"/api/endpoints/" + refD + "/enable", "", ""},
		{"/api/endpoints/" + refF + "/enable", "", ""},
		{"/api/endpoints/" + refL + "/disable", "", ""},
		{"/api/endpoints/" + refL + "/limits", js, `{"max_in_flight":0,"rate":0}`},
		{"/api/endpoints/" + refK + "/limits", js, `{"max_in_flight":1,"rate":2.5,"burst":4}`},
		{"/api/endpoints/" + refK + "/limits", js, `{"max_in_flight":1}`},
		{"/api/contracts/" + refS + "/pin", js, `{"capabilities_sha256":"` + digestA + `"}`},
		{"/api/contracts/" + refS + "/fail-mismatched", "", ""},
		{"/ops/redrive", form, "id=" + id("failed")},
		{"/ops/redrive", form, "endpoint_ref=" + refK},
		{"/ops/redrive", form, ""},
		{"/ops/redrive", form, "id="},
		{"/ops/cancel", form, "id=" + id("behind")},
		{"/ops/endpoints/enable", form, "endpoint_ref=" + refF},
		{"/ops/endpoints/disable", form, "endpoint_ref=" + refK},
		{"/ops/endpoints/disable", form, "endpoint=" + url.QueryEscape("https://keyed.example/other")},
		{"/ops/contracts/pin", form, "endpoint_ref=" + refS + "&capabilities_sha256=" + digestA},
		{"/ops/contracts/fail-mismatched", form, "endpoint_ref=" + refS},
	} {
		add(1, m.target, m.ct, m.body)
	}
	// Departures: a method, a query on a change, a type, a coding, another
	// site, a field twice or unknown, a body too long.
	f.Add(uint8(0), "/api/deliveries/"+id("failed")+"/redrive", "", "", "", "", []byte(nil), false)
	f.Add(uint8(3), "/api/redrive", js, "", "", "", []byte(`{}`), false)
	f.Add(uint8(1), "/api/redrive?endpoint_ref="+refF, js, "", "", "", []byte(`{}`), false)
	f.Add(uint8(1), "/ops/cancel", "text/plain", "", "", "", []byte("id="+id("pending")), false)
	f.Add(uint8(1), "/ops/cancel", form, "gzip", "", "", []byte("id="+id("pending")), false)
	f.Add(uint8(1), "/ops/cancel", form, "", "https://evil.example", "", []byte("id="+id("pending")), false)
	f.Add(uint8(1), "/ops/cancel", form, "", "", "cross-site", []byte("id="+id("pending")), false)
	f.Add(uint8(1), "/ops/cancel", form, "", "http://"+rg.addr, "same-origin", []byte("id="+id("pending")), true)
	f.Add(uint8(1), "/ops/cancel", form, "", "", "", []byte("id="+id("pending")+"&id="+id("failed")), false)
	f.Add(uint8(1), "/ops/cancel", form, "", "", "", []byte("id="+id("pending")+"&x=1"), false)
	f.Add(uint8(1), "/api/endpoints/"+refL+"/limits", js, "", "", "", []byte(`{"max_in_flight":1,"rate":1,"x":1}`), false)
	f.Add(uint8(1), "/api/endpoints/"+refL+"/limits", js+"; charset=utf-16", "", "", "", []byte(`{"max_in_flight":1,"rate":1}`), true)
	f.Add(uint8(1), "/api/contracts/"+refS+"/pin", js, "", "", "", []byte(`{"capabilities_sha256":"`+strings.Repeat("A", 64)+`"}`), false)
	f.Add(uint8(1), "/api/endpoints/"+strings.Repeat("0", 32)+"/disable", "", "", "", "", []byte(nil), false)
	f.Add(uint8(1), "/api/redrive", js, "", "", "", []byte(`{"endpoint_ref":"`+refK+`"}`+strings.Repeat(" ", 17<<10)), false)
	f.Fuzz(func(t *testing.T, method uint8, target, contentType, contentEncoding, origin, site string, body []byte, chunked bool) {
		rg.check(t, fuzzAdminInput{method, target, contentType, contentEncoding, origin, site, body, chunked})
	})
}

// fuzzFieldValue reports whether net/http's server reads v as a field
// value: no control characters but tab, no DEL.
func fuzzFieldValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// check sends in and holds the Admin's answer to the properties above.
func (rg *fuzzAdminRig) check(t *testing.T, in fuzzAdminInput) {
	method := fuzzAdminMethods[int(in.method)%len(fuzzAdminMethods)]
	if !strings.HasPrefix(in.target, "/") || len(in.target) > 4<<10 {
		return
	}
	for i := range len(in.target) {
		if c := in.target[i]; c <= 0x20 || c >= 0x7f || c == '#' {
			return // not a request-target net/http reads as one
		}
	}
	if _, err := url.ParseRequestURI(in.target); err != nil {
		return // net/http answers it 400 itself (an escape that is none), before any handler
	}
	h := http.Header{}
	for name, v := range map[string]string{"Content-Type": in.contentType, "Content-Encoding": in.contentEncoding, "Origin": in.origin, "Sec-Fetch-Site": in.site} {
		if v == "" {
			continue
		}
		if !fuzzFieldValue(v) || len(v) > 4<<10 {
			return
		}
		h.Set(name, v)
	}
	before := rg.snapshot(t)
	start := time.Now()
	status, header, out := rg.roundTrip(t, method, in.target, h, in.body, in.chunked)
	// A guard against an answer that waits for what never comes (a body,
	// a lock), not a measure of speed: the fuzz engine's workers share a
	// machine that may be loaded.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("%s %s answered in %v: it waited on something", method, in.target, d)
	}
	rg.noPanic(t)
	after := rg.snapshot(t)
	changed := fuzzChanged(before, after)
	if len(changed) > 0 {
		defer rg.restore(t)
	}
	what := fmt.Sprintf("%s %s (Content-Type %q, Content-Encoding %q, Origin %q, Sec-Fetch-Site %q) %q: %d %q", method, in.target, in.contentType, in.contentEncoding, in.origin, in.site, in.body, status, out)

	// Nothing secret in the answer, but what the request itself carried.
	var sent bytes.Buffer
	sent.WriteString(in.target)
	sent.Write(in.body)
	for _, vs := range h {
		sent.WriteString(strings.Join(vs, " "))
	}
	var answer bytes.Buffer
	answer.Write(out)
	_ = header.Write(&answer)
	for _, secret := range fuzzSecrets {
		if bytes.Contains(answer.Bytes(), []byte(secret)) && !bytes.Contains(sent.Bytes(), []byte(secret)) {
			t.Fatalf("%s\nthe answer shows %q: %s", what, secret, answer.Bytes())
		}
	}

	if status >= 400 {
		if ct := header.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/problem+json" {
			t.Fatalf("%s\nrefused with Content-Type %q, want application/problem+json", what, ct)
		}
		if method != http.MethodHead {
			var p problemBody
			if err := json.Unmarshal(out, &p); err != nil || p.Status != status || !rg.codes[p.Code] {
				t.Fatalf("%s\nnot a problem of a code courier declares (status %d, code %q, %v)", what, p.Status, p.Code, err)
			}
		}
	}
	write := method == http.MethodPost && (status >= 200 && status < 300 || status == http.StatusSeeOther && header.Get("Location") != "")
	if !write {
		if len(changed) > 0 {
			t.Fatalf("%s\nchanged the store: %s", what, fuzzRowsText(changed))
		}
		return
	}
	rg.judgeWrite(t, what, in, before, changed)
}

// judgeWrite holds a successful change to touching only what its action
// names.
func (rg *fuzzAdminRig) judgeWrite(t *testing.T, what string, in fuzzAdminInput, before map[string]fuzzRow, changed []fuzzRow) {
	t.Helper()
	path, _, _ := strings.Cut(in.target, "?")
	seg := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var form url.Values
	if seg[0] == "ops" {
		var err error
		if form, err = url.ParseQuery(string(in.body)); err != nil {
			t.Fatalf("%s\naccepted a form net/url cannot read: %v", what, err)
		}
	}
	// The delivery a row is of, and its endpoint.
	endpointOf := map[int64]string{}
	keyOf := map[int64]any{}
	statusOf := map[int64]any{}
	for _, r := range before {
		if r.table == "courier_outbox" {
			id := fuzzInt(r.cols["id"])
			endpointOf[id], keyOf[id], statusOf[id] = fmt.Sprint(r.cols["endpoint"]), r.cols["ordering_key"], r.cols["status"]
		}
	}
	rowDelivery := func(r fuzzRow) (int64, bool) {
		switch r.table {
		case "courier_outbox", "courier_outbox_payload":
			return fuzzInt(r.cols["id"]), true
		case "courier_attempts":
			return fuzzInt(r.cols["delivery_id"]), true
		}
		return 0, false
	}
	rowEndpoint := func(r fuzzRow) string {
		if e, ok := r.cols["endpoint"]; ok {
			return fmt.Sprint(e)
		}
		if d, ok := rowDelivery(r); ok {
			return endpointOf[d]
		}
		return ""
	}
	// What the action names: a delivery, or an endpoint, or every one.
	var delivery int64 = -1
	var named string
	all := false
	var tables []string
	deliveryTables := []string{"courier_outbox", "courier_outbox_payload", "courier_attempts", "courier_ordering_keys"}
	refURL := func(ref string) string {
		u, ok := rg.urls[ref]
		if !ok {
			t.Fatalf("%s\nacted on a ref the store does not know: %q", what, ref)
		}
		return u
	}
	switch {
	case len(seg) == 4 && seg[0] == "api" && seg[1] == "deliveries" && (seg[3] == "redrive" || seg[3] == "cancel"):
		delivery, tables = fuzzInt(seg[2]), deliveryTables
	case path == "/ops/redrive" || path == "/ops/cancel":
		switch {
		case form.Get("id") != "":
			delivery = fuzzInt(form.Get("id"))
		case form.Get("endpoint_ref") != "":
			named = refURL(form.Get("endpoint_ref"))
		default:
			all = true
		}
		tables = deliveryTables
	case path == "/api/redrive":
		var req struct {
			Ref *string `json:"endpoint_ref"`
		}
		_ = json.Unmarshal(in.body, &req)
		if req.Ref != nil {
			named = refURL(*req.Ref)
		} else {
			all = true
		}
		tables = deliveryTables
	case len(seg) == 4 && seg[0] == "api" && seg[1] == "endpoints":
		named = refURL(seg[2])
		tables = []string{"courier_endpoints"}
		if seg[3] == "limits" {
			tables = []string{"courier_endpoint_limits"}
		}
	case len(seg) == 4 && seg[0] == "api" && seg[1] == "contracts":
		named = refURL(seg[2])
		tables = []string{"courier_contracts"}
		if seg[3] == "fail-mismatched" {
			tables = deliveryTables
		}
	case strings.HasPrefix(path, "/ops/endpoints/") || strings.HasPrefix(path, "/ops/contracts/"):
		if r := form.Get("endpoint_ref"); r != "" {
			named = refURL(r)
		} else {
			// The store keeps an endpoint as Normalize writes it (scheme
			// and host in lower case): a URL of another case names it.
			named = endpoint.Normalize(form.Get("endpoint"))
		}
		tables = []string{"courier_endpoints"}
		if path == "/ops/contracts/pin" {
			tables = []string{"courier_contracts"}
		} else if path == "/ops/contracts/fail-mismatched" {
			tables = deliveryTables
		}
	default:
		if len(changed) > 0 {
			t.Fatalf("%s\nan answer of no action changed the store: %s", what, fuzzRowsText(changed))
		}
		return
	}
	for _, r := range changed {
		if !slices.Contains(tables, r.table) {
			t.Fatalf("%s\nchanged a row no such action touches: %s", what, r.text)
		}
		d, isDelivery := rowDelivery(r)
		switch {
		case delivery >= 0:
			// The delivery named, or one of its ordering key's.
			if isDelivery && d != delivery && (keyOf[delivery] == nil || keyOf[d] != keyOf[delivery] || endpointOf[d] != endpointOf[delivery]) {
				t.Fatalf("%s\nchanged another delivery's row: %s", what, r.text)
			}
			if rowEndpoint(r) != endpointOf[delivery] {
				t.Fatalf("%s\nchanged a row of another endpoint: %s", what, r.text)
			}
		case all:
			if r.table == "courier_outbox" && statusOf[d] != nil && statusOf[d] != string(courier.StatusFailed) && statusOf[d] != string(courier.StatusQuarantined) {
				t.Fatalf("%s\na redrive changed a delivery neither failed nor quarantined: %s", what, r.text)
			}
		default:
			if rowEndpoint(r) != named {
				t.Fatalf("%s\nchanged a row of another endpoint than %q names: %s", what, endpoint.Ref(named), r.text)
			}
		}
	}
}

func fuzzInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return -2
		}
		return n
	}
	return -2
}

func fuzzRowsText(rows []fuzzRow) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString("\n\t" + r.text)
	}
	return b.String()
}

// noPanic fails t if the Handler panicked.
func (rg *fuzzAdminRig) noPanic(t *testing.T) { rg.srv.NoPanic(t) }

// roundTrip writes the request on a new connection, exactly as given,
// and reads the answer.
func (rg *fuzzAdminRig) roundTrip(t *testing.T, method, target string, h http.Header, body []byte, chunked bool) (int, http.Header, []byte) {
	t.Helper()
	length := len(body)
	if chunked {
		length = rawhttp.Chunked
	}
	return rg.srv.RoundTrip(t, rawhttp.Request{Method: method, Target: adminPrefix + target, Header: h, Body: body, Length: length}, 10*time.Second)
}

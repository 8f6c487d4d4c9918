package admin

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestAdminRefusesABodyItWouldIgnore: an action that reads no body (the
// path names all it acts on) refuses one with a member, 400
// validation_failed naming the member with rule unknown, and acts on
// nothing: a caller that sends {"endpoint_ref": …} or {"id": …} to narrow
// the action must not have it taken as the path alone names it. An empty
// body and {} are still taken. Before, the body was never read: the
// disable below stopped sending to the endpoint, whatever it said.
func TestAdminRefusesABodyItWouldIgnore(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-f", hookA)
	pending := b.enqueue(t, "n-p", hookA)
	fid, pid := strconv.FormatInt(failed, 10), strconv.FormatInt(pending, 10)
	for _, tc := range []struct{ path, body, field string }{
		{"/api/deliveries/" + fid + "/redrive", `{"endpoint_ref":"` + refB + `"}`, "endpoint_ref"},
		{"/api/deliveries/" + pid + "/cancel", `{"confirm":true}`, "confirm"},
		{"/api/endpoints/" + refA + "/disable", `{"endpoint_ref":"` + refB + `"}`, "endpoint_ref"},
		{"/api/endpoints/" + refA + "/enable", `{"reason":"fixed"}`, "reason"},
		{"/api/contracts/" + refA + "/fail-mismatched", `{"ids":[1]}`, "ids"},
	} {
		resp, body := b.do(t, "POST", tc.path, tc.body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %s, want 400", tc.path, tc.body, resp.StatusCode, body)
			continue
		}
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != tc.field || p.Errors[0]["rule"] != "unknown" {
			t.Errorf("POST %s %s: errors %v, want %s (unknown)", tc.path, tc.body, p.Errors, tc.field)
		}
	}
	// A body that is not JSON is not read either.
	resp, body := b.do(t, "POST", "/api/endpoints/"+refA+"/disable", "endpoint_ref="+refB, nil)
	refused(t, resp, body, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)

	if f, p := b.status(t, failed), b.status(t, pending); f != courier.StatusFailed || p != courier.StatusPending {
		t.Fatalf("a refused action acted: failed is %s, pending is %s", f, p)
	}
	if h, err := b.store.Endpoints.Get(t.Context(), hookA); err != nil || h.State != store.EndpointClosed {
		t.Fatalf("a refused action acted on the endpoint: %+v, %v", h, err)
	}
	// No body, or one with no member, is the action as the path names it.
	if e := adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refA+"/disable", `{}`); e.State != store.EndpointDisabled {
		t.Fatalf("disable with {}: %+v", e)
	}
	if e := adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refA+"/enable", ""); e.State != store.EndpointClosed {
		t.Fatalf("enable without a body: %+v", e)
	}
}

// TestAdminLimitsNameTheirFields: a limits body no claim could honour is
// refused as every other body the Admin reads is, 400 validation_failed
// naming the field, not the store's invalid_argument naming none; and
// since the body replaces the endpoint's limits, a body that leaves out
// max_in_flight or rate (which would set it to no limit, whatever it was)
// is refused naming what is missing. Before, {"burst":5} was 400
// invalid_argument with no field, and {"max_in_flight":5} silently
// removed the endpoint's rate.
func TestAdminLimitsNameTheirFields(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	b.enqueue(t, "n-1", hookA)
	path := "/api/endpoints/" + refA + "/limits"
	want := limitsJSON{MaxInFlight: 2, Rate: 4, Burst: 8}
	if e := adminOK[endpointJSON](t, b, "POST", path, `{"max_in_flight":2,"rate":4,"burst":8}`); e.Limits != want {
		t.Fatalf("after setting limits: %+v", e.Limits)
	}
	for _, tc := range []struct {
		body   string
		fields map[string]string // field: rule
	}{
		{`{"max_in_flight":5}`, map[string]string{"rate": "required"}},
		{`{"rate":1}`, map[string]string{"max_in_flight": "required"}},
		{`{"burst":5}`, map[string]string{"max_in_flight": "required", "rate": "required"}},
		{`{}`, map[string]string{"max_in_flight": "required", "rate": "required"}},
		{`{"max_in_flight":0,"rate":0,"burst":5}`, map[string]string{"burst": "excluded_without"}},
		{`{"max_in_flight":-1,"rate":0}`, map[string]string{"max_in_flight": "min"}},
		{`{"max_in_flight":100001,"rate":0}`, map[string]string{"max_in_flight": "max"}},
		{`{"max_in_flight":0,"rate":-2}`, map[string]string{"rate": "min"}},
		{`{"max_in_flight":0,"rate":1000001}`, map[string]string{"rate": "max"}},
		{`{"max_in_flight":0,"rate":1,"burst":-1}`, map[string]string{"burst": "min"}},
		{`{"max_in_flight":0,"rate":1,"burst":1000001}`, map[string]string{"burst": "max"}},
	} {
		resp, body := b.do(t, "POST", path, tc.body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("limits %s: %d %s, want 400", tc.body, resp.StatusCode, body)
			continue
		}
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		got := map[string]string{}
		for _, e := range p.Errors {
			got[e["field"]] = e["rule"]
		}
		if len(got) != len(tc.fields) {
			t.Errorf("limits %s: errors %v, want %v", tc.body, p.Errors, tc.fields)
			continue
		}
		for f, rule := range tc.fields {
			if got[f] != rule {
				t.Errorf("limits %s: errors %v, want %v", tc.body, p.Errors, tc.fields)
			}
		}
	}
	if h, err := b.store.Endpoints.Get(t.Context(), hookA); err != nil || h.Limits != (store.Limits{MaxInFlight: 2, Rate: 4, Burst: 8}) {
		t.Fatalf("a refused limits body changed the limits: %+v, %v", h.Limits, err)
	}
	// Every member given, zero for none: the rate goes, as asked.
	if e := adminOK[endpointJSON](t, b, "POST", path, `{"max_in_flight":5,"rate":0}`); e.Limits != (limitsJSON{MaxInFlight: 5}) {
		t.Fatalf("after setting max_in_flight alone: %+v", e.Limits)
	}
	if e := adminOK[endpointJSON](t, b, "POST", path, `{"max_in_flight":0,"rate":0,"burst":0}`); e.Limits != (limitsJSON{}) {
		t.Fatalf("after removing the limits: %+v", e.Limits)
	}
}

// TestAdminRefusesAQueryKeyGivenTwice: a deliveries query that gives a
// parameter twice is refused, 400 validation_failed naming it with rule
// single, as a form is: which value counts would depend on who reads the
// query (the Admin took the first, a proxy or a log may take the last).
// Before, ?status=pending&status=failed listed pending deliveries alone.
func TestAdminRefusesAQueryKeyGivenTwice(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, nil)
	b.failed(t, "n-f", hookA)
	b.enqueue(t, "n-p", hookB)
	for _, tc := range []struct{ path, field string }{
		{"/api/deliveries?status=pending&status=failed", "status"},
		{"/api/deliveries?endpoint_ref=" + refA + "&endpoint_ref=" + refB, "endpoint_ref"},
		{"/api/deliveries?limit=1&limit=1", "limit"},
		{"/deliveries?notification_id=n-p&notification_id=n-f", "notification_id"},
	} {
		resp, body := b.do(t, "GET", tc.path, "", nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", tc.path, resp.StatusCode, body)
			continue
		}
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != tc.field || p.Errors[0]["rule"] != "single" {
			t.Errorf("GET %s: errors %v, want %s (single)", tc.path, p.Errors, tc.field)
		}
	}
	if page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?status=failed", ""); len(page.Deliveries) != 1 {
		t.Fatalf("?status=failed listed %d deliveries, want 1", len(page.Deliveries))
	}
}

// TestAdminTypedEndpointNamesItsField: an endpoint an operator typed in
// the disable form that is no endpoint URL is refused, 400
// validation_failed naming the field, as every other field the Admin
// reads is. Before, the store refused it, 400 invalid_argument naming
// none.
func TestAdminTypedEndpointNamesItsField(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	for _, body := range []string{"endpoint=not+a+url", "endpoint=ftp%3A%2F%2Fh.example%2F", "endpoint=https%3A%2F%2Fh.example%2Fp%00", "endpoint=https%3A%2F%2Fh.example%2Fp%FF"} {
		resp, raw := b.do(t, "POST", "/ops/endpoints/disable", body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, resp.StatusCode, raw)
			continue
		}
		p := refused(t, resp, raw, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != "endpoint" || p.Errors[0]["rule"] != "url" {
			t.Errorf("%s: errors %v, want endpoint (url)", body, p.Errors)
		}
	}
	if eps, err := b.store.Endpoints.List(t.Context()); err != nil || len(eps) != 0 {
		t.Fatalf("a refused form disabled an endpoint: %+v, %v", eps, err)
	}
}

// TestAdminTakesAnEmptyChunkedBodyAsNone: an action whose body may be
// left out takes an empty body sent chunked (its length unknown until it
// ends) as none, whatever its Content-Type, as it takes one with
// Content-Length: 0 (curl sends a form's type for an empty -d). Before,
// the type was checked first, and the empty chunked body was 415.
func TestAdminTakesAnEmptyChunkedBodyAsNone(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	b.failed(t, "n-f", hookA)
	chunked := func(r *http.Request) {
		r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(eofReader{}), -1, []string{"chunked"}
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, path := range []string{"/api/endpoints/" + refA + "/disable", "/api/redrive"} {
		resp, body := b.do(t, "POST", path, "", chunked)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s with an empty chunked body: %d %s, want 200", path, resp.StatusCode, body)
		}
	}
}

// eofReader is an empty body of unknown length.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// TestAdminRefusesContentTypeOnTwoLines: Content-Type holds one media
// type, so two field lines are refused 415, as the receivers refuse them,
// and nothing is acted on, whether the body's length is known or it comes
// chunked. Before, the first line was read and the second ignored: a body
// sent as application/json and text/plain at once was acted on.
func TestAdminRefusesContentTypeOnTwoLines(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-f", hookA)
	body := `{"endpoint_ref":"` + refA + `"}`
	for _, tc := range []struct {
		name string
		edit func(r *http.Request)
	}{
		{"sized", func(r *http.Request) { r.Header.Add("Content-Type", "text/plain") }},
		{"sized, the same type twice", func(r *http.Request) { r.Header.Add("Content-Type", "application/json") }},
		{"chunked", func(r *http.Request) {
			r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
			r.Header.Add("Content-Type", "text/plain")
		}},
	} {
		resp, out := b.do(t, "POST", "/api/redrive", body, tc.edit)
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("%s: %d %s, want 415", tc.name, resp.StatusCode, out)
			continue
		}
		refused(t, resp, out, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
	}
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Fatalf("a refused redrive acted: %s", st)
	}
}

// TestAdminFormRefusesContentTypeOnTwoLines: the ops page's forms hold to
// the rule the JSON actions do: Content-Type holds one media type, so a
// form post with two Content-Type lines is refused 415 and nothing is
// acted on. Before, the first line was read and the second ignored: a
// body sent as a form and as JSON at once was acted on as a form.
func TestAdminFormRefusesContentTypeOnTwoLines(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-f", hookA)
	for _, second := range []string{"application/json", "application/x-www-form-urlencoded"} {
		resp, out := b.do(t, "POST", "/ops/redrive", "id="+strconv.FormatInt(failed, 10), func(r *http.Request) {
			r.Header.Add("Content-Type", second)
		})
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("then %s: %d %s, want 415", second, resp.StatusCode, out)
			continue
		}
		refused(t, resp, out, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
	}
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Fatalf("a refused redrive acted: %s", st)
	}
}

// TestAdminRefusesAContentCodedBody: a JSON body sent compressed
// (Content-Encoding: gzip) is refused 415 with Accept-Encoding: identity,
// as the receivers refuse it, and nothing is acted on, whether its length
// is known or it comes chunked; Content-Encoding: identity is no coding.
// Before, the compressed bytes were parsed as JSON and refused 400
// malformed_json, which a receiver of package handler did not answer.
func TestAdminRefusesAContentCodedBody(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "n-f", hookA)
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	if _, err := zw.Write([]byte(`{"endpoint_ref":"` + refA + `"}`)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(r *http.Request)
	}{
		{"sized", func(r *http.Request) { r.Header.Set("Content-Encoding", "gzip") }},
		{"chunked", func(r *http.Request) {
			r.ContentLength, r.TransferEncoding = -1, []string{"chunked"}
			r.Header.Set("Content-Encoding", "identity, gzip")
		}},
	} {
		resp, out := b.do(t, "POST", "/api/redrive", zipped.String(), func(r *http.Request) {
			r.Header.Set("Content-Type", "application/json")
			tc.edit(r)
		})
		if resp.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("%s: %d %s, want 415", tc.name, resp.StatusCode, out)
			continue
		}
		refused(t, resp, out, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
		if got := resp.Header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("%s: Accept-Encoding %q, want identity", tc.name, got)
		}
	}
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Fatalf("a refused redrive acted: %s", st)
	}
	resp, out := b.do(t, "POST", "/api/redrive", `{"endpoint_ref":"`+refA+`"}`, func(r *http.Request) { r.Header.Set("Content-Encoding", "identity") })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Content-Encoding identity: %d %s, want 200", resp.StatusCode, out)
	}
}

package admin

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestAdminRedrivesEverythingOnlyWhenAskedTo: a redrive that names an
// endpoint or a delivery by an empty (or null) value is refused, 400
// validation_failed naming the field, and moves nothing; only one that
// names neither (an empty body, {}, the page's "every" button) redrives
// every failed delivery. Before, {"endpoint_ref":""}, {"endpoint_ref":null},
// id= and endpoint_ref= redrove every endpoint's: a script whose variable
// was unset acted on the whole outbox instead of failing.
func TestAdminRedrivesEverythingOnlyWhenAskedTo(t *testing.T) {
	t.Parallel()
	onBothEngines(t, redrivesEverythingOnlyWhenAskedTo)
}

func redrivesEverythingOnlyWhenAskedTo(t *testing.T, s *store.Store) {
	b := setupAdminConfig(t, Config{Store: s, Authorize: allowAll})
	a := b.failed(t, "n-a", hookA)
	c := b.failed(t, "n-b", hookB)
	for _, tc := range []struct{ path, body, field string }{
		{"/api/redrive", `{"endpoint_ref":""}`, "endpoint_ref"},
		{"/api/redrive", `{"endpoint_ref":null}`, "endpoint_ref"},
		{"/api/redrive", `{"endpoint_ref":7}`, "endpoint_ref"},
		{"/ops/redrive", "endpoint_ref=", "endpoint_ref"},
		{"/ops/redrive", "id=", "id"},
		{"/ops/redrive", "id=&endpoint_ref=", "id"},
	} {
		resp, body := b.do(t, "POST", tc.path, tc.body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %s, want 400", tc.path, tc.body, resp.StatusCode, body)
			continue
		}
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != tc.field {
			t.Errorf("POST %s %s: errors %v, want one naming %s", tc.path, tc.body, p.Errors, tc.field)
		}
	}
	if as, cs := b.status(t, a), b.status(t, c); as != courier.StatusFailed || cs != courier.StatusFailed {
		t.Fatalf("a refused redrive moved deliveries: %s, %s", as, cs)
	}
	// Naming neither is every endpoint's, as documented.
	if got := adminOK[redrivenJSON](t, b, "POST", "/api/redrive", `{}`); got.Redriven != 2 {
		t.Fatalf("redrive every endpoint's: %+v", got)
	}
}

// TestAdminRefusesAFormItWouldReadAmiss: a form post with a field its
// action does not read (a misspelt name), or with a field given twice, is
// refused, 400 validation_failed naming the field (rule unknown or
// single), and changes nothing, as a JSON body with an unknown or
// duplicate member is. Before, the form reader ignored the one and took
// the first of the other: "ids=7" posted to /ops/redrive redrove every
// failed delivery, and "endpoint_ref=B&endpoint_ref=A" redrove B's while a
// proxy that reads the last value saw A.
func TestAdminRefusesAFormItWouldReadAmiss(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	a := b.failed(t, "n-a", hookA)
	c := b.failed(t, "n-b", hookB)
	pending := b.enqueue(t, "n-p", hookA)
	aid, cid, pid := strconv.FormatInt(a, 10), strconv.FormatInt(c, 10), strconv.FormatInt(pending, 10)
	for _, tc := range []struct{ path, body, field, rule string }{
		{"/ops/redrive", "ids=" + aid, "ids", "unknown"},
		{"/ops/redrive", "endpointref=" + refA, "endpointref", "unknown"},
		{"/ops/redrive", "id=" + aid + "&id=" + cid, "id", "single"},
		{"/ops/redrive", "endpoint_ref=" + refB + "&endpoint_ref=" + refA, "endpoint_ref", "single"},
		{"/ops/cancel", "id=" + pid + "&confirm=1", "confirm", "unknown"},
		{"/ops/cancel", "id=" + pid + "&id=" + pid, "id", "single"},
		{"/ops/endpoints/disable", "endpoint_ref=" + refA + "&endpoint_ref=" + refB, "endpoint_ref", "single"},
		{"/ops/endpoints/disable", "endpoint_ref=" + refA + "&state=disabled", "state", "unknown"},
		{"/ops/endpoints/enable", "endpoint_ref=" + refA + "&endpoint_ref=" + refA, "endpoint_ref", "single"},
		{"/ops/contracts/pin", "endpoint_ref=" + refA + "&capabilities_sha256=" + digestA + "&capabilities_sha256=" + digestA, "capabilities_sha256", "single"},
		{"/ops/contracts/pin", "endpoint_ref=" + refA + "&capabilities_sha256=" + digestA + "&digest=x", "digest", "unknown"},
		{"/ops/contracts/fail-mismatched", "endpoint_ref=" + refA + "&id=" + aid, "id", "unknown"},
	} {
		resp, body := b.do(t, "POST", tc.path, tc.body, nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %s, want 400", tc.path, tc.body, resp.StatusCode, body)
			continue
		}
		p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
		if len(p.Errors) != 1 || p.Errors[0]["field"] != tc.field || p.Errors[0]["rule"] != tc.rule {
			t.Errorf("POST %s %s: errors %v, want %s (%s)", tc.path, tc.body, p.Errors, tc.field, tc.rule)
		}
	}
	if as, cs, ps := b.status(t, a), b.status(t, c), b.status(t, pending); as != courier.StatusFailed || cs != courier.StatusFailed || ps != courier.StatusPending {
		t.Fatalf("a refused form acted: %s, %s, %s", as, cs, ps)
	}
	if h, _ := b.store.Endpoints.Get(t.Context(), hookA); h.State != store.EndpointClosed {
		t.Fatalf("a refused form acted on the endpoint: %+v", h)
	}
	// The page's own forms still post: the "every" button sends no field.
	resp, body := b.do(t, "POST", "/ops/redrive", "", func(r *http.Request) {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the page's redrive-every form: %d %s", resp.StatusCode, body)
	}
	if as, cs := b.status(t, a), b.status(t, c); as != courier.StatusPending || cs != courier.StatusPending {
		t.Fatalf("after redriving every delivery: %s, %s", as, cs)
	}
}

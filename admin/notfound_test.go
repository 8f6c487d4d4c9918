package admin

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
)

// TestNotFoundSaysWhy: every 404 about a delivery id says which it is. An
// id that names no delivery is "no such delivery" whatever the action; a
// delivery a cancel or a redrive does not take is named by its status, so
// that an operator can tell the two apart as the command line does.
func TestNotFoundSaysWhy(t *testing.T) {
	t.Parallel()
	b := setupAdminConfig(t, Config{Authorize: allowAll})
	pending := strconv.FormatInt(b.enqueue(t, "n-pending", hookA), 10)
	cancelled := strconv.FormatInt(b.enqueue(t, "n-cancelled", hookA), 10)
	b.do(t, "POST", "/api/deliveries/"+cancelled+"/cancel", "", nil)
	for _, tc := range []struct{ method, path, detail string }{
		{"GET", "/api/deliveries/999", "no such delivery"},
		{"POST", "/api/deliveries/999/redrive", "no such delivery"},
		{"POST", "/api/deliveries/999/cancel", "no such delivery"},
		{"POST", "/api/deliveries/" + pending + "/redrive", "no delivery with this id that can be redriven: failed, or quarantined payload_unreadable (it is pending)"},
		{"POST", "/api/deliveries/" + cancelled + "/cancel", "no delivery with this id that can be cancelled: pending, retrying, failed or quarantined (it is suppressed)"},
	} {
		resp, body := b.do(t, tc.method, tc.path, "", nil)
		refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
		var p struct{ Detail string }
		if err := json.Unmarshal(body, &p); err != nil || p.Detail != tc.detail {
			t.Errorf("%s %s: detail %q, want %q", tc.method, tc.path, p.Detail, tc.detail)
		}
	}
}

// TestAnEndpointRefNoEndpointHasIsNotFound: GET /api/deliveries with an
// endpoint_ref no endpoint has answered 200 with no deliveries, as if the
// endpoint were known and had none, where the package documentation (and
// courier deliveries list) says a ref that names no endpoint the store
// knows is not found. Every read and action that takes an endpoint's ref,
// in a query, a body, a form or the path, answers 404 not_found for it; a
// known endpoint with no deliveries lists none, 200.
func TestAnEndpointRefNoEndpointHasIsNotFound(t *testing.T) {
	t.Parallel()
	b := setupAdminConfig(t, Config{Authorize: allowAll})
	b.enqueue(t, "n-1", hookA)
	const quiet = "https://quiet.example/hooks" // known by its breaker record alone
	if err := b.store.Endpoints.Disable(t.Context(), quiet); err != nil {
		t.Fatal(err)
	}
	unknown := endpoint.Ref("https://a.example/hook")
	digest := strings.Repeat("a", 64)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/deliveries?endpoint_ref=" + unknown, ""},
		{"GET", "/api/deliveries?status=failed&endpoint_ref=" + unknown, ""},
		{"GET", "/api/endpoints?after=" + unknown, ""},
		{"GET", "/api/contracts?after=" + unknown, ""},
		{"GET", "/api/endpoints/" + unknown + "/blocked-keys", ""},
		{"POST", "/api/redrive", `{"endpoint_ref":"` + unknown + `"}`},
		{"POST", "/api/cancel", `{"endpoint_ref":"` + unknown + `"}`},
		{"POST", "/api/endpoints/" + unknown + "/enable", ""},
		{"POST", "/api/endpoints/" + unknown + "/disable", ""},
		{"POST", "/api/endpoints/" + unknown + "/limits", `{"max_in_flight":1,"rate":0}`},
		{"POST", "/api/contracts/" + unknown + "/pin", `{"capabilities_sha256":"` + digest + `"}`},
		{"POST", "/api/contracts/" + unknown + "/fail-mismatched", ""},
		{"POST", "/ops/redrive", "endpoint_ref=" + unknown},
		{"POST", "/ops/endpoints/enable", "endpoint_ref=" + unknown},
		{"POST", "/ops/endpoints/disable", "endpoint_ref=" + unknown},
		{"POST", "/ops/contracts/pin", "endpoint_ref=" + unknown + "&capabilities_sha256=" + digest},
		{"POST", "/ops/contracts/fail-mismatched", "endpoint_ref=" + unknown},
	} {
		resp, body := b.do(t, tc.method, tc.path, tc.body, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: %d %s, want 404 not_found", tc.method, tc.path, resp.StatusCode, body)
			continue
		}
		refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
	}
	if page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?endpoint_ref="+endpoint.Ref(quiet), ""); page.Deliveries == nil || len(page.Deliveries) != 0 {
		t.Errorf("a known endpoint with no deliveries listed %+v, want none", page.Deliveries)
	}
	if page := adminOK[deliveryPageJSON](t, b, "GET", "/api/deliveries?endpoint_ref="+refA, ""); len(page.Deliveries) != 1 {
		t.Errorf("endpoint A listed %+v, want its one delivery", page.Deliveries)
	}
}

// TestAPathIDThatIsNoDeliveryIDIsABadRequest: GET /api/deliveries/abc
// answered 404 not_found "no such delivery", where the command line says
// "abc" is not a delivery id, a usage error. An {id} that is not a
// delivery id (not an integer, 0, negative, past int64) is a bad request
// on every route that takes one, the page's too: 400 validation_failed
// naming id, as the API names a bad query parameter. A well-formed id no
// delivery has stays 404 not_found.
func TestAPathIDThatIsNoDeliveryIDIsABadRequest(t *testing.T) {
	t.Parallel()
	b := setupAdminConfig(t, Config{Authorize: allowAll})
	for _, id := range []string{"abc", "0", "-1", "1.5", "0x10", "9223372036854775808"} {
		for _, tc := range []struct{ method, path string }{
			{"GET", "/api/deliveries/" + id},
			{"POST", "/api/deliveries/" + id + "/redrive"},
			{"POST", "/api/deliveries/" + id + "/cancel"},
			{"GET", "/deliveries/" + id},
		} {
			resp, body := b.do(t, tc.method, tc.path, "", nil)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s %s: %d %s, want 400 validation_failed", tc.method, tc.path, resp.StatusCode, body)
				continue
			}
			p := refused(t, resp, body, http.StatusBadRequest, courier.CodeValidation)
			if len(p.Errors) != 1 || p.Errors[0]["field"] != "id" {
				t.Errorf("%s %s: errors %v, want one naming id", tc.method, tc.path, p.Errors)
			}
		}
	}
	for _, tc := range []struct{ method, path string }{
		{"GET", "/api/deliveries/999"},
		{"POST", "/api/deliveries/999/redrive"},
		{"POST", "/api/deliveries/999/cancel"},
		{"GET", "/deliveries/999"},
	} {
		resp, body := b.do(t, tc.method, tc.path, "", nil)
		refused(t, resp, body, http.StatusNotFound, courier.CodeNotFound)
	}
}

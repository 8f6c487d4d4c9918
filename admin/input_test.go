package admin

import (
	"encoding/json"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestAdminRefusesTextPostgreSQLCannotStore: a NUL byte or a byte that is
// not UTF-8 in a query parameter, a form field, a JSON member or a path
// segment is answered 4xx with a problem, the same on both engines, and
// changes nothing; never the 500 PostgreSQL's refusal of such text would
// make of it. Each is refused where the Admin reads it (a ref, a token, a
// status, a digest, a URL).
//
// A query parameter the API does not read (?endpoint=) is refused by its
// name alone (TestAPIListsRefuseAParameterTheyDoNotRead): its value never
// reaches the store.
func TestAdminRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	onBothEngines(t, refusesTextPostgreSQLCannotStore)
}

func refusesTextPostgreSQLCannotStore(t *testing.T, s *store.Store) {
	b := setupAdminConfig(t, Config{Store: s, Authorize: allowAll})
	failed := b.failed(t, "n-failed", hookA)
	pending := b.enqueue(t, "n-pending", hookB)
	for _, tc := range []struct {
		method, path, body string
		status             int
		code               courier.Code
	}{
		{"GET", "/api/deliveries?notification_id=n%00", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?notification_id=n%FF", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?status=failed%00", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?status=failed%FF", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?endpoint_ref=" + refA[:31] + "%00", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?endpoint_ref=" + refA[:31] + "%FF", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?since=%00", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries?before=%FF", "", 400, courier.CodeValidation},
		{"GET", "/deliveries?notification_id=n%00", "", 400, courier.CodeValidation},
		{"GET", "/deliveries?notification_id=n%FF", "", 400, courier.CodeValidation},
		{"GET", "/api/deliveries/%00", "", 400, courier.CodeValidation},
		{"GET", "/deliveries/%FF", "", 400, courier.CodeValidation},
		{"POST", "/api/deliveries/%FF/cancel", "", 400, courier.CodeValidation},
		{"POST", "/api/endpoints/%00/disable", "", 404, courier.CodeNotFound},
		{"POST", "/api/endpoints/" + refA[:31] + "%FF/enable", "", 404, courier.CodeNotFound},
		{"POST", "/api/contracts/%FF/fail-mismatched", "", 404, courier.CodeNotFound},
		{"POST", "/api/redrive", `{"endpoint_ref":"\u0000"}`, 400, courier.CodeValidation},
		{"POST", "/api/redrive", "{\"endpoint_ref\":\"" + refA[:31] + "\xff\"}", 400, courier.CodeMalformedJSON},
		{"POST", "/api/contracts/" + refA + "/pin", `{"capabilities_sha256":"\u0000"}`, 400, courier.CodeValidation},
		{"POST", "/ops/endpoints/disable", "endpoint=https%3A%2F%2Fh.example%2Fp%00", 400, courier.CodeValidation},
		{"POST", "/ops/endpoints/enable", "endpoint=https%3A%2F%2Fh.example%2Fp%FF", 400, courier.CodeValidation},
		{"POST", "/ops/endpoints/disable", "endpoint_ref=%00", 400, courier.CodeValidation},
		{"POST", "/ops/redrive", "id=%00", 400, courier.CodeValidation},
		{"POST", "/ops/redrive", "endpoint_ref=" + refA[:31] + "%FF", 400, courier.CodeValidation},
		{"POST", "/ops/cancel", "id=1%FF", 400, courier.CodeValidation},
		{"POST", "/ops/contracts/pin", "endpoint_ref=" + refA + "&capabilities_sha256=%00", 400, courier.CodeValidation},
		{"POST", "/ops/contracts/pin", "endpoint_ref=%FF&capabilities_sha256=" + digestA, 400, courier.CodeValidation},
		{"POST", "/ops/contracts/fail-mismatched", "endpoint_ref=%00", 400, courier.CodeValidation},
	} {
		resp, body := b.do(t, tc.method, tc.path, tc.body, nil)
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s %q: %d %s, want %d problem+json: %s", tc.method, tc.path, tc.body, resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, body)
			continue
		}
		var p problemBody
		if err := json.Unmarshal(body, &p); err != nil || p.Code != tc.code {
			t.Errorf("%s %s %q: code %q (%v), want %q", tc.method, tc.path, tc.body, p.Code, err, tc.code)
		}
	}
	resp, body := b.do(t, "GET", "/api/deliveries?endpoint=%FF&notification_id=n-failed", "", nil)
	if p := refused(t, resp, body, 400, courier.CodeValidation); len(p.Errors) != 1 || p.Errors[0]["field"] != "endpoint" || p.Errors[0]["rule"] != "unknown" {
		t.Errorf("?endpoint=%%FF&notification_id=n-failed: %s, want endpoint refused as unknown", body)
	}

	// Nothing changed.
	if st := b.status(t, failed); st != courier.StatusFailed {
		t.Errorf("the failed delivery is %s", st)
	}
	if st := b.status(t, pending); st != courier.StatusPending {
		t.Errorf("the pending delivery is %s", st)
	}
	if eps, err := b.store.Endpoints.List(t.Context()); err != nil || len(eps) != 1 || eps[0].Endpoint != hookA || eps[0].State != store.EndpointClosed {
		t.Errorf("endpoints %+v, %v; want hookA alone, closed, as its failure left it", eps, err)
	}
	if pins, err := b.store.Contracts.List(t.Context()); err != nil || len(pins) != 0 {
		t.Errorf("contracts %+v, %v; want none", pins, err)
	}
}

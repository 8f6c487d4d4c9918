package admin

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// TestAdminRedriveSaysWhatMovedBeforeAFailure: Redrive moves an
// endpoint's deliveries in batches, each committed on its own, so one
// that fails part-way (a trigger refuses to move the 201st, in the second
// batch) has moved the first batch for good. The refusal, from the API
// and from the page's form alike, says how many were moved: otherwise the
// operator cannot tell that the rest is to redrive again, not all of it.
func TestAdminRedriveSaysWhatMovedBeforeAFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, path, body string }{
		{"api", "/api/redrive", `{"endpoint_ref":"` + refA + `"}`},
		{"page", "/ops/redrive", "endpoint_ref=" + refA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAdmin(t, allowAll)
			for i := range 201 {
				b.enqueue(t, "n-"+strconv.Itoa(i), hookA)
			}
			b.failDue(t)
			if h, err := b.store.Outbox.Health(t.Context()); err != nil || h.Failed != 201 {
				t.Fatalf("failed deliveries: %d, %v; want 201", h.Failed, err)
			}
			if _, err := b.store.DB().ExecContext(t.Context(), `CREATE TRIGGER refuse_redrive BEFORE UPDATE ON courier_outbox
				WHEN OLD.id = 201 AND NEW.status = 'pending' BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
				t.Fatal(err)
			}
			resp, body := b.do(t, "POST", tc.path, tc.body, nil)
			var p problem.Problem
			if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode < 400 || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("the failed redrive answered %d %s (%v), want a problem", resp.StatusCode, body, err)
			}
			if !strings.Contains(p.Detail, "200 deliveries") {
				t.Errorf("the problem's detail %q does not say that 200 deliveries were moved", p.Detail)
			}
			if h, err := b.store.Outbox.Health(t.Context()); err != nil || h.Failed != 1 || h.Counts[courier.StatusPending] != 200 {
				t.Fatalf("after the failed redrive: %d failed, %d pending (%v); want 1 and 200", h.Failed, h.Counts[courier.StatusPending], err)
			}
		})
	}
}

// TestAdminRedriveRefusedByTheDatabaseIsAStoreFailure: a rule of the
// database's (here a trigger) that refuses a redrive's or a cancel's
// write is no fault of the operator's request: it is answered 500
// internal_error, as the store failing, not 400 invalid_argument, which
// told the operator to fix input that was fine.
func TestAdminRedriveRefusedByTheDatabaseIsAStoreFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, path, body string }{
		{"one delivery", "/api/deliveries/1/redrive", ""},
		{"an endpoint's", "/api/redrive", `{"endpoint_ref":"` + refA + `"}`},
		{"a cancel", "/api/deliveries/1/cancel", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAdmin(t, allowAll)
			b.enqueue(t, "n-1", hookA)
			b.failDue(t)
			if _, err := b.store.DB().ExecContext(t.Context(), `CREATE TRIGGER refuse_redrive BEFORE UPDATE ON courier_outbox
				WHEN OLD.status = 'failed' BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
				t.Fatal(err)
			}
			resp, body := b.do(t, "POST", tc.path, tc.body, nil)
			var p problem.Problem
			if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != 500 || p.Code != courier.CodeInternal {
				t.Errorf("%s the database refused answered %d %s (%v), want 500 internal_error", tc.name, resp.StatusCode, body, err)
			}
		})
	}
}

// TestAdminEndpointWriteRefusedByTheDatabaseIsAStoreFailure: a rule of
// the database's (here a trigger) that refuses an endpoint's disable or
// enable is no fault of the operator's request either: it is answered
// 500 internal_error, as a refused redrive is, not 400.
func TestAdminEndpointWriteRefusedByTheDatabaseIsAStoreFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, path string }{
		{"a disable", "/api/endpoints/" + refA + "/disable"},
		{"an enable", "/api/endpoints/" + refA + "/enable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupAdmin(t, allowAll)
			b.enqueue(t, "n-1", hookA)
			if err := b.store.Endpoints.Disable(t.Context(), hookA); err != nil {
				t.Fatal(err)
			}
			for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
				if _, err := b.store.DB().ExecContext(t.Context(), `CREATE TRIGGER refuse_`+strings.ToLower(op)+` BEFORE `+op+` ON courier_endpoints
					BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
					t.Fatal(err)
				}
			}
			resp, body := b.do(t, "POST", tc.path, "", nil)
			var p problem.Problem
			if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != 500 || p.Code != courier.CodeInternal {
				t.Errorf("%s the database refused answered %d %s (%v), want 500 internal_error", tc.name, resp.StatusCode, body, err)
			}
		})
	}
}

package admin

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/problem"
)

// TestAdminCancelEndpoint: POST /api/cancel cancels every delivery of the
// endpoint endpoint_ref names that a cancel takes (here one failed, one
// waiting for the endpoint, which is disabled), answers how many, logs
// it, and leaves another endpoint's deliveries; the outbox's health is no
// longer blocked by the disabled endpoint.
func TestAdminCancelEndpoint(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	b := setupAdminConfig(t, Config{Authorize: allowAll, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	failed := b.failed(t, "a-1", hookA)
	pending := b.enqueue(t, "a-2", hookA)
	other := b.enqueue(t, "b-1", hookB)
	adminOK[endpointJSON](t, b, "POST", "/api/endpoints/"+refA+"/disable", "")
	if h := adminOK[healthJSON](t, b, "GET", "/api/health", ""); h.Status != "blocked" {
		t.Fatalf("health before the cancel: %+v, want blocked", h)
	}
	if got := adminOK[cancelledJSON](t, b, "POST", "/api/cancel", `{"endpoint_ref":"`+refA+`"}`); got.Cancelled != 2 {
		t.Fatalf("cancel endpoint A: %+v, want 2 cancelled", got)
	}
	for _, id := range []int64{failed, pending} {
		if st := b.status(t, id); st != courier.StatusSuppressed {
			t.Errorf("delivery %d of the endpoint cancelled is %s, want suppressed", id, st)
		}
	}
	if st := b.status(t, other); st != courier.StatusPending {
		t.Errorf("another endpoint's delivery is %s, want pending", st)
	}
	if h := adminOK[healthJSON](t, b, "GET", "/api/health", ""); h.Status != "ok" {
		t.Errorf("health after the cancel: %+v, want ok", h)
	}
	if line := logs.String(); !strings.Contains(line, `"msg":"admin: cancel"`) || !strings.Contains(line, `"count":2`) || !strings.Contains(line, `"endpoint_ref":"`+refA+`"`) {
		t.Errorf("the log does not say what was cancelled: %s", line)
	}
}

// TestAdminCancelEndpointRefusals: POST /api/cancel has no cancel of
// every endpoint's deliveries: without an endpoint_ref (an empty body,
// {}, null or "") it is 400 validation_failed naming endpoint_ref, as is
// one that is not a ref; an unknown ref is 404. Nothing is cancelled.
func TestAdminCancelEndpointRefusals(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	failed := b.failed(t, "a-1", hookA)
	pending := b.enqueue(t, "b-1", hookB)
	for _, tc := range []struct {
		name, body string
		status     int
		code       courier.Code
	}{
		{"empty body", "", 400, courier.CodeValidation},
		{"no endpoint_ref", `{}`, 400, courier.CodeValidation},
		{"null", `{"endpoint_ref":null}`, 400, courier.CodeValidation},
		{"empty", `{"endpoint_ref":""}`, 400, courier.CodeValidation},
		{"not a string", `{"endpoint_ref":1}`, 400, courier.CodeValidation},
		{"not a ref", `{"endpoint_ref":"x"}`, 400, courier.CodeValidation},
		{"unknown ref", `{"endpoint_ref":"` + endpoint.Ref("https://c.example/") + `"}`, 404, courier.CodeNotFound},
		{"unknown field", `{"endpoint_ref":"` + refA + `","all":true}`, 400, courier.CodeValidation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := b.do(t, "POST", "/api/cancel", tc.body, nil)
			p := refused(t, resp, body, tc.status, tc.code)
			if tc.code == courier.CodeValidation && tc.name != "unknown field" && (len(p.Errors) != 1 || p.Errors[0]["field"] != "endpoint_ref") {
				t.Errorf("errors %v, want one naming endpoint_ref", p.Errors)
			}
		})
	}
	resp, body := b.do(t, "POST", "/api/cancel", `{"endpoint_ref":"`+refA+`"}`, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") })
	refused(t, resp, body, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
	if f, p := b.status(t, failed), b.status(t, pending); f != courier.StatusFailed || p != courier.StatusPending {
		t.Fatalf("a refused cancel acted: %s, %s", f, p)
	}
}

// TestAdminCancelEndpointSaysWhatWasCancelledBeforeAFailure: a cancel of
// an endpoint's deliveries cancels them one at a time, so one that fails
// part-way (a trigger refuses the cancel of the oldest, the last) has
// cancelled the others for good; the refusal says how many.
func TestAdminCancelEndpointSaysWhatWasCancelledBeforeAFailure(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	oldest := b.enqueue(t, "a-1", hookA)
	b.enqueue(t, "a-2", hookA)
	b.enqueue(t, "a-3", hookA)
	if _, err := b.store.DB().ExecContext(t.Context(), `CREATE TRIGGER refuse_cancel BEFORE UPDATE ON courier_outbox
		WHEN OLD.id = `+strconv.FormatInt(oldest, 10)+` AND NEW.status = 'suppressed' BEGIN SELECT RAISE(ABORT, 'the database refuses the write'); END`); err != nil {
		t.Fatal(err)
	}
	resp, body := b.do(t, "POST", "/api/cancel", `{"endpoint_ref":"`+refA+`"}`, nil)
	refused(t, resp, body, http.StatusInternalServerError, courier.CodeInternal)
	var p problem.Problem
	if err := json.Unmarshal(body, &p); err != nil || !strings.Contains(p.Detail, "2 deliveries were cancelled before it") {
		t.Errorf("the problem's detail %q (%v) does not say that 2 deliveries were cancelled", p.Detail, err)
	}
	if h, err := b.store.Outbox.Health(t.Context()); err != nil || h.Counts[courier.StatusPending] != 1 || h.Counts[courier.StatusSuppressed] != 2 {
		t.Fatalf("after the failed cancel: %v (%v); want 1 pending, 2 suppressed", h.Counts, err)
	}
}

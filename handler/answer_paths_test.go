package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/signature"
)

// anyTarget returns the anyReceivers entry named name.
func anyTarget(t *testing.T, name string) anyReceiver {
	t.Helper()
	for _, r := range anyReceivers() {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no receiver %s", name)
	return anyReceiver{}
}

// failingVerifier fails as a replay store or key fetch that is down.
type failingVerifier struct{}

func (failingVerifier) Verify(context.Context, *http.Request, []byte) (signature.Principal, error) {
	return signature.Principal{}, errors.New("replay cache: connection refused")
}

// TestAVerifierFailureIsLoggedWithItsCause: a Verifier that cannot answer
// (a replay store or key fetch that is down) is answered 503
// internal_error, and its log line said nothing of why, where a store's
// 503 names its error: middleware.Verify dropped the verifier's. The
// handler's line carries it.
func TestAVerifierFailureIsLoggedWithItsCause(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	target := anyTarget(t, "Terminal")
	e := target.open(t, anyOptions{logger: slog.New(&logs)})
	h, err := handler.NewReceiver(handler.ReceiverConfig{Store: e.store, Verifier: failingVerifier{}, Logger: slog.New(&logs)},
		func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(h, e.request(t))
	p := problemOf(t, rec)
	recs := logs.All()
	if rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal {
		t.Fatalf("answer %d %s", rec.Code, p.Code)
	}
	if len(recs) != 1 || !strings.Contains(attrs(recs[0])["error"], "replay cache: connection refused") {
		t.Errorf("logged %d lines, the first's error %q; want one, with the verifier's error", len(recs), attrs(recs[0])["error"])
	}
}

// canonNote is an application's notification type that, as ack.Terminal
// does, judges redeliveries on its canonical JSON.
type canonNote struct {
	ID    string          `json:"id" validate:"required"`
	Extra json.RawMessage `json:"extra,omitempty"`
}

func (n canonNote) DedupeKey() string { return n.ID }

func (n canonNote) PayloadSHA256(body []byte) (string, error) {
	c, err := ack.Canonical(body)
	if err != nil {
		return "", err
	}
	return ack.Digest(c), nil
}

// TestABodyTheTypesDigestCannotReadIsRefused400: a body the notification
// type's PayloadSHA256 cannot canonicalize (a number no float64 holds) is
// the sender's bad input, which Reporting answers 400 validation_failed.
// Receiver[T] answered it 500 internal_error, logged at Error, and the
// sender retried it to its horizon.
func TestABodyTheTypesDigestCannotReadIsRefused400(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	verifier, signer := anyStandardWebhooks(t)
	h, err := handler.NewReceiver(handler.ReceiverConfig{Store: anyStore(t), Verifier: verifier, Logger: slog.New(&logs)},
		func(context.Context, *sqlx.Tx, canonNote) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rec := serve(h, anySigned(t, signer, "n1", []byte(`{"id":"n1","extra":1e400}`)))
	if p := problemOf(t, rec); rec.Code != http.StatusBadRequest || p.Code != courier.CodeValidation {
		t.Errorf("answered %d %s, want 400 validation_failed", rec.Code, p.Code)
	}
	if msgs := logs.Messages(slog.LevelError); len(msgs) != 0 {
		t.Errorf("logged %v at Error for the sender's bad input", msgs)
	}
}

// senderless is a custom Verifier that names no sender.
type senderless struct{}

func (senderless) Verify(context.Context, *http.Request, []byte) (signature.Principal, error) {
	return signature.Principal{Scheme: "custom", MessageID: ""}, nil
}

// TestAVerifierWhosePrincipalNoRecordMayHoldIsTheReceiversFault: a
// Verifier that returns a Principal the Inbox cannot record (Sender "")
// is the receiver's own setup's fault, yet the Inbox's invalid_argument
// passed as the request's and was answered 400 validation_failed with no
// field, which a courier sender fails for good, logged at Info alone. It
// is 500 internal_error, logged at Error with why.
func TestAVerifierWhosePrincipalNoRecordMayHoldIsTheReceiversFault(t *testing.T) {
	t.Parallel()
	var logs logtest.Records
	h, err := handler.NewReporting(handler.ReportingConfig{Store: anyStore(t), Verifier: senderless{}, Logger: slog.New(&logs)},
		func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"idempotency_key":"key-0123456789abcdef","operation_id":"op-1","task_id":"task-1","task_type":"media_buy_delivery","status":"completed","timestamp":"2026-01-02T03:04:05Z"}`)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://r.example/", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := serve(h, req)
	if p := problemOf(t, rec); rec.Code != http.StatusInternalServerError || p.Code != courier.CodeInternal {
		t.Errorf("a receiver-side fault answered %d %s, want 500 internal_error", rec.Code, p.Code)
	}
	if recs := logs.All(); len(recs) != 1 || recs[0].Level != slog.LevelError || !strings.Contains(attrs(recs[0])["error"], "needs a sender") {
		t.Errorf("logged %d lines; want one at Error with the Inbox's reason, the sender", len(recs))
	}
}

// TestErrAlreadyAppliedOutsideSourceIsAFailedHandleSpan: ErrAlreadyApplied
// is Source's alone; a Receiver's function that returns it is answered
// 500 handler_failed, and its courier.handle span recorded success.
func TestErrAlreadyAppliedOutsideSourceIsAFailedHandleSpan(t *testing.T) {
	t.Parallel()
	rec := &tracingtest.Recorder{}
	rcv, keys := tracedReceiver(t, rec, func(context.Context, *sqlx.Tx, tracedNote) error { return handler.ErrAlreadyApplied })
	req := couriertest.NewRequest("https://receiver.example/hooks", "n-1", []byte(`{"id":"n-1","verb":"x"}`), keys.Signer)
	w := httptest.NewRecorder()
	rcv.ServeHTTP(w, req)
	h := rec.Named(tracing.SpanHandle)
	if w.Code != http.StatusInternalServerError || len(h) != 1 || h[0].Failed != courier.CodeHandlerFailed {
		t.Errorf("answered %d with handle spans %+v; want 500 and one span failed handler_failed", w.Code, h)
	}
}

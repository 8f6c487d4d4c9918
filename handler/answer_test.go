package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The tests here hold every handler (Terminal, Reporting, Source, Publish)
// to one answer path: the same outcome gets the same status, code, log
// line and Event everywhere. Each handler runs on a real SQLite store with
// a verifier that does not use the store, so a store failure is the
// handler's own to answer.

// anyOptions configures one handler under test.
type anyOptions struct {
	hook   func(handler.Event)
	logger *slog.Logger
	// app is what the application's function does, with the context it
	// was given, after counting the call; nil: nothing. Publish has no
	// application function.
	app func(ctx context.Context) error
	// appTx, when set, is what it does with its transaction too, in place
	// of app.
	appTx func(ctx context.Context, tx *sqlx.Tx) error
	// store, when set, holds the handler's records in place of a fresh
	// SQLite file.
	store *store.Store
}

// anyEnv is one handler under test.
type anyEnv struct {
	store   *store.Store
	handler http.Handler
	calls   *atomic.Int32
	// request returns a valid request, freshly signed, with the body
	// marker in it (see bodyMarker).
	request func(t *testing.T) *http.Request
	// ok is the status of an accepted request.
	ok int
	// bearer: the scheme signs no body (a Bearer token).
	bearer bool
}

// bodyMarker is in every valid body, so a test can tell whether content
// reached a log.
const bodyMarker = "marker-7f3a9c"

// anyReceiver opens one handler under test.
type anyReceiver struct {
	name string
	app  bool // it runs an application function
	open func(t *testing.T, o anyOptions) *anyEnv
}

// anyStore opens a fresh SQLite store.
func anyStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "any.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeOr returns o.store, or a fresh SQLite store when it is nil.
func (o anyOptions) storeOr(t *testing.T) *store.Store {
	if o.store != nil {
		return o.store
	}
	return anyStore(t)
}

// anyApp is the application's function of a receiver under test, doing
// what o says.
func anyApp[T any](calls *atomic.Int32, o anyOptions) handler.Func[T] {
	return func(ctx context.Context, tx *sqlx.Tx, _ T) error {
		calls.Add(1)
		switch {
		case o.appTx != nil:
			return o.appTx(ctx, tx)
		case o.app != nil:
			return o.app(ctx)
		}
		return nil
	}
}

// anySigned returns a request of body signed by signer as id.
func anySigned(t *testing.T, signer signature.Signer, id string, body []byte) *http.Request {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://receiver.example/hooks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return req
}

func anyStandardWebhooks(t *testing.T) (signature.Verifier, signature.Signer) {
	t.Helper()
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender-1", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return verifier, signer
}

// eachReceiver runs test for every receiver of anyReceivers, or only for
// those that run an application function when app, each in a parallel
// subtest named after it.
func eachReceiver(t *testing.T, app bool, test func(t *testing.T, target anyReceiver)) {
	for _, target := range anyReceivers() {
		if app && !target.app {
			continue
		}
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			test(t, target)
		})
	}
}

func anyReceivers() []anyReceiver {
	return []anyReceiver{
		{name: "Terminal", app: true, open: func(t *testing.T, o anyOptions) *anyEnv {
			s := o.storeOr(t)
			verifier, signer := anyStandardWebhooks(t)
			calls := new(atomic.Int32)
			h, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Logger: o.logger, Hook: o.hook}, anyApp[ack.Terminal](calls, o))
			if err != nil {
				t.Fatal(err)
			}
			n, body := terminal(t, bodyMarker)
			return &anyEnv{store: s, handler: h, calls: calls, ok: http.StatusOK,
				request: func(t *testing.T) *http.Request { return anySigned(t, signer, n.NotificationID, body) }}
		}},
		{name: "Reporting", app: true, open: func(t *testing.T, o anyOptions) *anyEnv {
			s := o.storeOr(t)
			verifier, signer := anyStandardWebhooks(t)
			calls := new(atomic.Int32)
			h, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: verifier, Logger: o.logger, Hook: o.hook}, anyApp[ack.Reporting](calls, o))
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"idempotency_key":"key-0123456789abcdef","operation_id":"op-1","task_id":"task-1","task_type":"media_buy_delivery",` +
				`"status":"completed","timestamp":"2026-01-02T03:04:05Z","message":"` + bodyMarker + `"}`)
			return &anyEnv{store: s, handler: h, calls: calls, ok: http.StatusOK,
				request: func(t *testing.T) *http.Request { return anySigned(t, signer, "delivery-1", body) }}
		}},
		{name: "Source", app: true, open: func(t *testing.T, o anyOptions) *anyEnv {
			s := o.storeOr(t)
			verifier, signer := anyStandardWebhooks(t)
			calls := new(atomic.Int32)
			h, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest, Logger: o.logger, Hook: o.hook},
				anyApp[ack.Command](calls, o))
			if err != nil {
				t.Fatal(err)
			}
			body := sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"note":"`+bodyMarker+`"}`)
			return &anyEnv{store: s, handler: h, calls: calls, ok: http.StatusOK,
				request: func(t *testing.T) *http.Request {
					req := anySigned(t, signer, "change:r1", body)
					req.Header.Set(ack.AttemptHeader, "1")
					return req
				}}
		}},
		{name: "Publish", open: func(t *testing.T, o anyOptions) *anyEnv {
			s := o.storeOr(t)
			token, err := signature.ParseSecret("publisher", publishToken)
			if err != nil {
				t.Fatal(err)
			}
			verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "publisher", Tokens: []signature.Secret{token}})
			if err != nil {
				t.Fatal(err)
			}
			h, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: verifier, Logger: o.logger, Hook: o.hook})
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"tenant":"publisher","event_type":"order.paid","event_id":"e-1","payload":{"note":"` + bodyMarker + `"}}`)
			return &anyEnv{store: s, handler: h, calls: new(atomic.Int32), ok: http.StatusAccepted, bearer: true,
				request: func(t *testing.T) *http.Request {
					req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "http://publish.example/", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+publishToken)
					return req
				}}
		}},
	}
}

// serve sends req to h and returns the answer.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// problemOf reads a problem answer's status and code.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) problemBody {
	t.Helper()
	var p problemBody
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%d with Content-Type %q: %s", rec.Code, ct, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// hookEvents collects the Events a handler reports.
type hookEvents struct {
	mu     sync.Mutex
	events []handler.Event
}

func (h *hookEvents) hook(e handler.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *hookEvents) all() []handler.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]handler.Event(nil), h.events...)
}

// attrs returns a record's attributes as strings.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// written counts the store's Inbox and Outbox rows.
func (e *anyEnv) written(t *testing.T) (inbox, outbox int) {
	t.Helper()
	return rows(t, e.store, "courier_inbox"), rows(t, e.store, "courier_outbox")
}

// TestStoreFailureIsAnswered503InEveryReceiver: a store that cannot
// answer (here: closed) is 503 internal_error with Retry-After in every
// handler, so the sender retries later; before, Terminal and Source
// answered 500 handler_failed, blaming the application's function. The
// function is never run, the Event says failed/internal_error, and the log
// line is at Error with the cause.
func TestStoreFailureIsAnswered503InEveryReceiver(t *testing.T) {
	t.Parallel()
	eachReceiver(t, false, func(t *testing.T, target anyReceiver) {
		var events hookEvents
		var logs logtest.Records
		e := target.open(t, anyOptions{hook: events.hook, logger: slog.New(&logs)})
		req := e.request(t)
		if err := e.store.Close(); err != nil {
			t.Fatal(err)
		}
		rec := serve(e.handler, req)
		p := problemOf(t, rec)
		if rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("got %d %s (Retry-After %q), want 503 internal_error with Retry-After: %s",
				rec.Code, p.Code, rec.Header().Get("Retry-After"), rec.Body)
		}
		if e.calls.Load() != 0 {
			t.Fatalf("the application's function ran %d times", e.calls.Load())
		}
		want := handler.Event{Outcome: handler.OutcomeFailed, HTTPStatus: http.StatusServiceUnavailable, Code: courier.CodeInternal}
		if got := events.all(); len(got) != 1 || got[0] != want {
			t.Fatalf("events %+v, want %+v", got, want)
		}
		recs := logs.All()
		if len(recs) != 1 || recs[0].Level != slog.LevelError || attrs(recs[0])["code"] != string(courier.CodeInternal) ||
			attrs(recs[0])["http_status"] != "503" || attrs(recs[0])["error"] == "" || len(logkey.Undocumented(recs[0])) != 0 {
			t.Fatalf("log records %v", recs)
		}
	})
}

// TestOneAnswerPerOutcomeInEveryReceiver: the application's failures are
// answered alike by every receiver: an error is 500 handler_failed, even
// one that wraps a store sentinel (it is the application's, not the
// Inbox's), and a Rejection is 422 with its code; nothing stays written.
func TestOneAnswerPerOutcomeInEveryReceiver(t *testing.T) {
	t.Parallel()
	for _, target := range anyReceivers() {
		if !target.app {
			continue
		}
		for _, tc := range []struct {
			name   string
			app    func(context.Context) error
			status int
			code   courier.Code
		}{
			{"application error", func(context.Context) error { return errors.New("application trouble") }, 500, courier.CodeHandlerFailed},
			{"application error wrapping a collision", func(context.Context) error {
				return fmt.Errorf("enqueue: %w", courier.CodeIdempotencyCollision)
			}, 500, courier.CodeHandlerFailed},
			{"rejection", func(context.Context) error { return handler.Reject("not_for_us", "not for this site") }, 422, "not_for_us"},
			{"rejection without a code", func(context.Context) error { return handler.Reject("", "") }, 422, courier.CodeRejected},
			// The application's refusal, whatever its code: a store's code
			// does not make the store the one that failed.
			{"rejection with a store's code", func(context.Context) error {
				return handler.Reject(courier.CodeDatabaseUnavailable, "")
			}, 422, courier.CodeDatabaseUnavailable},
		} {
			t.Run(target.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				var events hookEvents
				e := target.open(t, anyOptions{hook: events.hook, app: tc.app})
				rec := serve(e.handler, e.request(t))
				if p := problemOf(t, rec); rec.Code != tc.status || p.Code != tc.code {
					t.Fatalf("got %d %s, want %d %s: %s", rec.Code, p.Code, tc.status, tc.code, rec.Body)
				}
				if got := events.all(); len(got) != 1 || got[0].HTTPStatus != tc.status || got[0].Code != tc.code {
					t.Fatalf("events %+v", got)
				}
				if inbox, _ := e.written(t); inbox != 0 || e.calls.Load() != 1 {
					t.Fatalf("%d inbox rows after %d calls", inbox, e.calls.Load())
				}
			})
		}
	}
}

// TestRefusalsAreLogged: the Logger promised one line per refused
// request, and none came. Every refusal is logged at Info with its status
// and code, a failure at Error, an accepted request not at all, and no
// line carries the request's content or credentials. The Hook sees the
// same codes, learnt from the answer as it was written.
func TestRefusalsAreLogged(t *testing.T) {
	t.Parallel()
	eachReceiver(t, false, func(t *testing.T, target anyReceiver) {
		var events hookEvents
		var logs logtest.Records
		e := target.open(t, anyOptions{hook: events.hook, logger: slog.New(&logs)})
		type sent struct {
			status int
			code   courier.Code
		}
		var want []sent
		send := func(edit func(r *http.Request), status int, code courier.Code) {
			t.Helper()
			req := e.request(t)
			if edit != nil {
				edit(req)
			}
			rec := serve(e.handler, req)
			if rec.Code != status {
				t.Fatalf("got %d, want %d: %s", rec.Code, status, rec.Body)
			}
			want = append(want, sent{status, code})
		}
		send(nil, e.ok, "")
		send(func(r *http.Request) { r.Method = http.MethodGet }, 405, courier.CodeMethodNotAllowed)
		send(func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 415, courier.CodeUnsupportedMediaType)
		send(func(r *http.Request) {
			r.Header.Del("webhook-signature")
			r.Header.Del("Authorization")
		}, 401, courier.CodeSignatureMissing)
		// A member the body may not have: the signature no longer
		// covers the body, or with a Bearer token that signs none, the
		// member is refused.
		status, code := http.StatusUnauthorized, courier.CodeSignatureMismatch
		if e.bearer {
			status, code = http.StatusBadRequest, courier.CodeValidation
		}
		send(func(r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			b = append([]byte(`{"`+bodyMarker+`":1,`), b[1:]...)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}, status, code)

		recs := logs.All()
		var refused []sent
		for _, r := range recs {
			a := attrs(r)
			var line strings.Builder
			line.WriteString(r.Message)
			for k, v := range a {
				line.WriteString(" " + k + "=" + v)
			}
			for _, secret := range []string{bodyMarker, publishToken, "v1,"} {
				if strings.Contains(line.String(), secret) {
					t.Errorf("a log line carries content %q: %s", secret, line.String())
				}
			}
			if r.Level != slog.LevelInfo || r.Message != "handler: request refused" {
				t.Errorf("refusal logged at %s: %s", r.Level, line.String())
			}
			if bad := logkey.Undocumented(r); len(bad) != 0 {
				t.Errorf("logged keys %v, which courier's documentation does not list: %s", bad, line.String())
			}
			refused = append(refused, sent{status: atoi(a["http_status"]), code: courier.Code(a["code"])})
		}
		if fmt.Sprint(refused) != fmt.Sprint(want[1:]) {
			t.Fatalf("logged refusals %v, want %v (one per refusal, none for the accepted request)", refused, want[1:])
		}
		var hooked []sent
		for _, ev := range events.all() {
			hooked = append(hooked, sent{ev.HTTPStatus, ev.Code})
		}
		if fmt.Sprint(hooked) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", hooked, want)
		}
	})
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestPanicReachesHook: a panic in the application's function used to
// bypass the Hook (and the log). It is now reported as 500 internal_error,
// outcome failed, what middleware.Recover answers for it, and raised
// again; http.ErrAbortHandler is raised again untouched. Nothing stays
// written.
func TestPanicReachesHook(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		var events hookEvents
		var logs logtest.Records
		type panicWith struct{ v any }
		var value atomic.Value
		e := target.open(t, anyOptions{hook: events.hook, logger: slog.New(&logs), app: func(context.Context) error { panic(value.Load().(panicWith).v) }})

		value.Store(panicWith{"application bug"})
		rec := serve(middleware.Recover(nil)(e.handler), e.request(t))
		if p := problemOf(t, rec); rec.Code != http.StatusInternalServerError || p.Code != courier.CodeInternal {
			t.Fatalf("behind Recover: %d %s", rec.Code, p.Code)
		}
		want := handler.Event{Outcome: handler.OutcomeFailed, HTTPStatus: http.StatusInternalServerError, Code: courier.CodeInternal}
		if got := events.all(); len(got) != 1 || got[0] != want {
			t.Fatalf("events %+v, want %+v", got, want)
		}
		if recs := logs.All(); len(recs) != 1 || recs[0].Level != slog.LevelError || attrs(recs[0])["panic"] != "true" {
			t.Fatalf("log records %v", recs)
		}

		value.Store(panicWith{http.ErrAbortHandler})
		recovered := func() (v any) {
			defer func() { v = recover() }()
			serve(e.handler, e.request(t))
			return nil
		}()
		if recovered != http.ErrAbortHandler { //nolint:errorlint // the sentinel itself, untouched
			t.Fatalf("recovered %v, want http.ErrAbortHandler itself", recovered)
		}
		if got := events.all(); len(got) != 2 || got[1] != want {
			t.Fatalf("events %+v", got)
		}
		if inbox, _ := e.written(t); inbox != 0 || e.calls.Load() != 2 {
			t.Fatalf("%d inbox rows after %d calls", inbox, e.calls.Load())
		}
	})
}

// TestCharsetNamesAreCaseInsensitive: "application/json; charset=Utf-8"
// was refused 415, though charset names are case-insensitive. Any case of
// UTF-8 is accepted by every handler; any other charset is 415.
func TestCharsetNamesAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	for _, target := range anyReceivers() {
		for _, tc := range []struct {
			contentType string
			accepted    bool
		}{
			{"application/json; charset=Utf-8", true},
			{"application/json; charset=UTF-8", true},
			{"application/json;charset=uTf-8", true},
			{`application/json; charset="utf-8"`, true},
			{"Application/JSON; Charset=UTF-8", true},
			{"application/json; charset=utf-16", false},
			{"application/json; charset=UTF-16LE", false},
			{"application/json; charset=latin1", false},
			{"application/json; charset=utf8", false},
		} {
			t.Run(target.name+"/"+tc.contentType, func(t *testing.T) {
				t.Parallel()
				e := target.open(t, anyOptions{})
				req := e.request(t)
				req.Header.Set("Content-Type", tc.contentType)
				rec := serve(e.handler, req)
				switch {
				case tc.accepted && rec.Code != e.ok:
					t.Fatalf("refused: %d %s", rec.Code, rec.Body)
				case !tc.accepted:
					if p := problemOf(t, rec); rec.Code != http.StatusUnsupportedMediaType || p.Code != courier.CodeUnsupportedMediaType {
						t.Fatalf("got %d %s, want 415", rec.Code, p.Code)
					}
				}
			})
		}
	}
}

// TestHookPanicLeavesTheAnswer: the Hook ran while the recover meant for
// the application's function was still armed, so a Hook that panicked
// after a request was answered (and its work committed) had the request
// reported again as failed, 500 internal_error, with the Hook called a
// second time, and behind middleware.Recover the answer already written
// was aborted: the client saw a broken response for work that was done.
// Now the panic is dropped with one line at Error: the client gets the
// answer, over the wire, and the Hook sees each request once, as it was
// answered.
func TestHookPanicLeavesTheAnswer(t *testing.T) {
	t.Parallel()
	eachReceiver(t, false, func(t *testing.T, target anyReceiver) {
		var events hookEvents
		var logs logtest.Records
		e := target.open(t, anyOptions{logger: slog.New(&logs), hook: func(ev handler.Event) {
			events.hook(ev)
			panic("metrics bug")
		}})
		srv := httptest.NewServer(middleware.Recover(nil)(e.handler))
		t.Cleanup(srv.Close)
		send := func(req *http.Request) int {
			t.Helper()
			req.RequestURI = ""
			req.URL.Scheme, req.URL.Host = "http", srv.Listener.Addr().String()
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("the client got no answer: %v", err)
			}
			defer resp.Body.Close()
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatalf("the answer was broken off: %v", err)
			}
			return resp.StatusCode
		}

		if status := send(e.request(t)); status != e.ok {
			t.Fatalf("accepted request answered %d, want %d", status, e.ok)
		}
		refused := e.request(t)
		refused.Method = http.MethodPut
		if status := send(refused); status != http.StatusMethodNotAllowed {
			t.Fatalf("refused request answered %d, want 405", status)
		}

		want := []handler.Event{
			{Outcome: handler.OutcomeAccepted, HTTPStatus: e.ok},
			{Outcome: handler.OutcomeRejected, HTTPStatus: http.StatusMethodNotAllowed, Code: courier.CodeMethodNotAllowed},
		}
		if got := events.all(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %+v, want %+v (one per request)", got, want)
		}
		if inbox, _ := e.written(t); target.app && (inbox != 1 || e.calls.Load() != 1) {
			t.Fatalf("%d inbox rows after %d calls, want the accepted request's one", inbox, e.calls.Load())
		}
		var dropped int
		for _, r := range logs.All() {
			a := attrs(r)
			switch {
			case r.Message == "handler: Hook panicked; the panic was dropped":
				if r.Level != slog.LevelError || a["panic"] != "true" {
					t.Errorf("the dropped panic is logged at %s with %v", r.Level, a)
				}
				dropped++
			case r.Message != "handler: request refused":
				t.Errorf("unexpected log line: %s %s %v", r.Level, r.Message, a)
			}
			if bad := logkey.Undocumented(r); len(bad) != 0 {
				t.Errorf("logged keys %v, which courier's documentation does not list", bad)
			}
			if strings.Contains(fmt.Sprint(a), bodyMarker) || strings.Contains(fmt.Sprint(a), "metrics bug") {
				t.Errorf("a log line carries the request's content or the panic's value: %v", a)
			}
		}
		if dropped != 2 {
			t.Fatalf("%d lines for the Hook's panics, want one per request", dropped)
		}
	})
}

// TestAClientGoneIsNoFailure: the client goes away once it has sent the
// whole body (net/http ends the request's context when the connection
// closes, or when the client half-closes it), before the store is reached
// or while the application's function runs with the request's context.
// Nothing is recorded and the sender retries, as for any 5xx. But neither
// the store nor the application failed: the answer was logged at Error as
// theirs ("store: begin: context canceled"), an alert for every client
// that hangs up. It is logged at Info, as a refusal is, with the status
// and code it was answered.
func TestAClientGoneIsNoFailure(t *testing.T) {
	t.Parallel()
	eachReceiver(t, false, func(t *testing.T, target anyReceiver) {
		for _, when := range []string{"before the store", "in the function"} {
			if when == "in the function" && !target.app {
				continue
			}
			t.Run(when, func(t *testing.T) {
				var logs logtest.Records
				var events []handler.Event
				e := target.open(t, anyOptions{logger: slog.New(&logs), hook: func(e handler.Event) { events = append(events, e) }, app: func(ctx context.Context) error {
					ctx.Value(requestCancelKey{}).(context.CancelFunc)() // the client goes away
					return fmt.Errorf("calling a service: %w", ctx.Err())
				}})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				req := e.request(t)
				req = req.WithContext(context.WithValue(ctx, requestCancelKey{}, cancel))
				if when == "before the store" {
					cancel()
				}
				rec := serve(e.handler, req)
				if rec.Code < 500 {
					t.Fatalf("answered %d %s, want a 5xx: nothing was processed", rec.Code, rec.Body)
				}
				if inbox, outbox := e.written(t); inbox != 0 || outbox != 0 {
					t.Fatalf("%d inbox and %d outbox records, want none", inbox, outbox)
				}
				recs := logs.All()
				if len(recs) != 1 || recs[0].Level != slog.LevelInfo || attrs(recs[0])["http_status"] != fmt.Sprint(rec.Code) ||
					attrs(recs[0])["code"] != string(problemOf(t, rec).Code) || len(logkey.Undocumented(recs[0])) != 0 {
					for _, r := range recs {
						t.Logf("%s %s %v", r.Level, r.Message, attrs(r))
					}
					t.Fatalf("%d log records; want one at Info with the answer's status and code", len(recs))
				}
				// The Event says what was answered, as Event's doc says:
				// failed, with the answer's status and code.
				want := handler.Event{Outcome: handler.OutcomeFailed, HTTPStatus: rec.Code, Code: problemOf(t, rec).Code}
				if len(events) != 1 || events[0] != want {
					t.Fatalf("events %+v; want one, %+v", events, want)
				}
			})
		}
	})
}

// TestABodyCutShortIsRefused: a client that sends less of the body than
// its Content-Length says and then half-closes its connection (or closes
// it) is refused 400 invalid_argument, logged at Info, with nothing
// recorded: the request never arrived, and no store or application
// failed.
func TestABodyCutShortIsRefused(t *testing.T) {
	t.Parallel()
	eachReceiver(t, false, func(t *testing.T, target anyReceiver) {
		var logs logtest.Records
		e := target.open(t, anyOptions{logger: slog.New(&logs)})
		srv := httptest.NewServer(e.handler)
		defer srv.Close()
		req := e.request(t)
		body, err := io.ReadAll(req.Body)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var head bytes.Buffer
		fmt.Fprintf(&head, "POST /hooks HTTP/1.1\r\nHost: receiver.example\r\nContent-Length: %d\r\n", len(body)+100)
		if err := req.Header.Write(&head); err != nil {
			t.Fatal(err)
		}
		head.WriteString("\r\n")
		head.Write(body[:len(body)/2])
		if _, err := conn.Write(head.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p problemBody
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Code != courier.CodeInvalidArgument {
			t.Fatalf("answered %d %+v (%v), want 400 invalid_argument", resp.StatusCode, p, err)
		}
		if inbox, outbox := e.written(t); inbox != 0 || outbox != 0 || e.calls.Load() != 0 {
			t.Fatalf("%d inbox and %d outbox records after %d calls, want none", inbox, outbox, e.calls.Load())
		}
		recs := logs.All()
		if len(recs) != 1 || recs[0].Level != slog.LevelInfo || attrs(recs[0])["code"] != string(courier.CodeInvalidArgument) {
			t.Fatalf("log records %v, want one at Info", recs)
		}
	})
}

package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// adcpTestdata holds AdCP's receiver-envelope vectors and storyboard
// (Apache-2.0, with their LICENSE).
const adcpTestdata = "../ack/testdata/adcp/"

// offsetClock is the store's clock: real time, moved forward by Advance.
// It stays near real time so that the replay cache, which compares the
// signatures' real expiry with the store's clock, keeps working.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// reportingBundle is a Reporting receiver on a real inbox behind a real
// HTTP server, verifying RFC 9421 signatures with the store's replay
// cache, and the seller's signer.
type reportingBundle struct {
	store  *store.Store
	rcv    *handler.Reporting
	server *httptest.Server
	signer signature.Signer
	key    signature.JWK
	clock  *offsetClock
	calls  atomic.Int32 // runs of the application's function
}

type reportingOptions struct {
	// fn is the application's function, after the bundle counted the
	// call. Defaults to recordDelivery.
	fn handler.Func[ack.Reporting]
	// postgres runs the inbox on PostgreSQL rather than SQLite.
	postgres   bool
	staleAfter time.Duration
	// store, when set, is the inbox (another bundle's): postgres is then
	// ignored.
	store *store.Store
	// sender is the verified sender; defaults to reportingSender.
	sender string
	// hook is the receiver's Hook.
	hook func(handler.Event)
}

const reportingSender = "seller.example"

// recordDelivery is the application's effect: one row per processed
// delivery, in the Inbox's transaction.
func recordDelivery(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
	_, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO reporting_effects (idempotency_key) VALUES (?)"), n.IdempotencyKey)
	return err
}

func setupReporting(t *testing.T, opt reportingOptions) *reportingBundle {
	t.Helper()
	b := &reportingBundle{clock: &offsetClock{}}
	cfg := store.Config{Now: b.clock.Now}
	if opt.store != nil {
		b.store = opt.store
	} else if opt.postgres {
		b.store = openPostgresStore(t, cfg)
	} else {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		b.store = s
	}
	if _, err := b.store.DB().Exec("CREATE TABLE IF NOT EXISTS reporting_effects (idempotency_key TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	var err error
	if b.key, err = signature.GenerateJWK("seller-key-1", signature.AlgEd25519); err != nil {
		t.Fatal(err)
	}
	if b.signer, err = signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: b.key}); err != nil {
		t.Fatal(err)
	}
	// The server's address is known before it starts: the verifier needs
	// it as its origin.
	b.server = httptest.NewUnstartedServer(nil)
	t.Cleanup(b.server.Close)
	sender := opt.sender
	if sender == "" {
		sender = reportingSender
	}
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender: sender, Keys: []signature.JWK{b.key.Public()}, Replay: b.store.Replay,
		Origin: "http://" + b.server.Listener.Addr().String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	fn := opt.fn
	if fn == nil {
		fn = recordDelivery
	}
	b.rcv, err = handler.NewReporting(handler.ReportingConfig{
		Store: b.store, Verifier: verifier, Body: middleware.BodyLimits{MaxBytes: 8 << 10}, StaleAfter: opt.staleAfter, Hook: opt.hook,
	}, func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
		b.calls.Add(1)
		return fn(ctx, tx, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	b.server.Config.Handler = b.rcv
	b.server.Start()
	return b
}

// openPostgresStore opens a Store on a fresh PostgreSQL database of the
// server the tests share (postgresServer), dropped when t ends. Without
// one the test is skipped, or fails if COURIER_PG_REQUIRE is set.
func openPostgresStore(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	db, err := sqlx.Open(postgres.DriverName, migratedPostgres.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := store.Open(t.Context(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// migratedPostgres is a database store.Migrate brought to the current
// schema, of which each test's PostgreSQL database is a copy: a copy
// costs the server far less than a migration.
var migratedPostgres = pgtest.NewTemplate(func(ctx context.Context, dbURL string) error {
	db, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return store.Migrate(ctx, db)
})

// request returns a POST of body to the receiver, signed by the seller.
func (b *reportingBundle) request(t *testing.T, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.server.URL+"/adcp/webhooks", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := b.signer.Sign(req, signature.Message{Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	return req
}

// do sends req with body and returns the response and its body.
func (b *reportingBundle) do(t *testing.T, req *http.Request, body []byte) (*http.Response, []byte) {
	t.Helper()
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := b.server.Client().Do(req)
	if err != nil {
		t.Error(err) // Error, not Fatal: do also runs on other goroutines
		return &http.Response{}, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// post sends body, freshly signed.
func (b *reportingBundle) post(t *testing.T, body []byte) (*http.Response, []byte) {
	t.Helper()
	return b.do(t, b.request(t, body), body)
}

// written counts what the receiver stored: inbox records and effects.
func (b *reportingBundle) written(t *testing.T) (inbox, effects int) {
	t.Helper()
	return rows(t, b.store, "courier_inbox"), rows(t, b.store, "reporting_effects")
}

// inboxKey is the Inbox's key for body, as the receiver derives it.
func inboxKey(t *testing.T, body []byte) protocol.InboxKey {
	t.Helper()
	var n ack.Reporting
	if err := json.Unmarshal(body, &n); err != nil {
		t.Fatal(err)
	}
	canonical, err := canonical.JCS(body)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.InboxKey{Sender: reportingSender, Key: n.IdempotencyKey, PayloadSHA256: ack.Digest(canonical)}
}

type reportingProblem struct {
	Status int          `json:"status"`
	Code   courier.Code `json:"code"`
	Errors []struct {
		Field string `json:"field"`
		Rule  string `json:"rule"`
	} `json:"errors"`
}

// wantProblem checks that resp is a problem with status and code.
func wantProblem(t *testing.T, resp *http.Response, out []byte, status int, code courier.Code) reportingProblem {
	t.Helper()
	var p reportingProblem
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("%d: body %q is not a problem: %v", resp.StatusCode, out, err)
	}
	if resp.StatusCode != status || p.Status != status || p.Code != code {
		t.Fatalf("got %d %s, want %d %s (body %s)", resp.StatusCode, p.Code, status, code, out)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	return p
}

// wantOK checks that resp is the empty 200 of the reporting profile.
func wantOK(t *testing.T, resp *http.Response, out []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusOK || len(out) != 0 {
		t.Fatalf("got %d %q, want an empty 200", resp.StatusCode, out)
	}
}

// postOK posts body, freshly signed, and wants an empty 200.
func (b *reportingBundle) postOK(t *testing.T, body []byte) {
	t.Helper()
	resp, out := b.post(t, body)
	wantOK(t, resp, out)
}

// wantInProgress checks for the 503 of a delivery another request holds.
func wantInProgress(t *testing.T, resp *http.Response, out []byte) {
	t.Helper()
	wantProblem(t, resp, out, http.StatusServiceUnavailable, courier.CodeInProgress)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
}

// envelopeVector is one vector of webhook-receiver-envelope.json.
type envelopeVector struct {
	ID            string          `json:"id"`
	SameEventAs   string          `json:"same_event_as"`
	ExpectedError string          `json:"expected_error"`
	Payload       json.RawMessage `json:"payload"`
}

// envelopeErrorFields is what each expected_error of the negative vectors
// means as the fields the refusal must name, as the storyboard words it.
// A vector with an expected_error not listed here fails the test.
var envelopeErrorFields = map[string][]string{
	"missing_envelope_fields": {"idempotency_key", "operation_id", "task_id", "task_type", "status", "timestamp"},
	"missing_idempotency_key": {"idempotency_key"},
	"invalid_envelope_status": {"status"},
}

func loadReportingVectors(t *testing.T) (positive, negative map[string]envelopeVector) {
	t.Helper()
	b, err := os.ReadFile(adcpTestdata + "webhook-receiver-envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Positive, Negative []envelopeVector }
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	index := func(vs []envelopeVector) map[string]envelopeVector {
		m := map[string]envelopeVector{}
		for _, v := range vs {
			m[v.ID] = v
		}
		return m
	}
	return index(file.Positive), index(file.Negative)
}

// deliveryReport returns the first positive vector's payload.
func deliveryReport(t *testing.T) []byte {
	t.Helper()
	positive, _ := loadReportingVectors(t)
	return positive["mcp-delivery-report-envelope"].Payload
}

// storyStep is one step of the storyboard webhook-receiver-envelope.yaml.
type storyStep struct {
	id          string
	kind        string // positive or negative
	vector      string
	expectError bool
}

// storySteps reads the steps that replay a vector from the storyboard, in
// order. The YAML is read line by line: a step is a "- id:" item with a
// vector_ref, and expect_error marks the ones a receiver must refuse.
func storySteps(t *testing.T) []storyStep {
	t.Helper()
	b, err := os.ReadFile(adcpTestdata + "webhook-receiver-envelope.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var items []storyStep
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(strings.TrimSpace(line), ":")
		value = strings.Trim(strings.TrimSpace(value), `"`)
		switch {
		case name == "- id":
			items = append(items, storyStep{id: value})
		case len(items) == 0:
		case name == "vector_ref":
			_, fragment, _ := strings.Cut(value, "#")
			items[len(items)-1].kind, items[len(items)-1].vector, _ = strings.Cut(fragment, "/")
		case name == "expect_error":
			items[len(items)-1].expectError = value == "true"
		}
	}
	var steps []storyStep
	for _, s := range items {
		if s.vector != "" {
			steps = append(steps, s)
		}
	}
	return steps
}

// TestReportingStoryboard replays AdCP's receiver-envelope storyboard in
// its order against one receiver: the envelope is accepted, its retry is
// accepted without a second effect, and every payload that is not an
// envelope is refused (400, as an invalid envelope is answered) before
// anything runs or is written.
func TestReportingStoryboard(t *testing.T) {
	t.Parallel()
	positive, negative := loadReportingVectors(t)
	steps := storySteps(t)
	if len(steps) != len(positive)+len(negative) {
		t.Fatalf("%d storyboard steps for %d vectors", len(steps), len(positive)+len(negative))
	}
	b := setupReporting(t, reportingOptions{})
	events := map[string]bool{}
	for _, s := range steps {
		var v envelopeVector
		var ok bool
		switch s.kind {
		case "positive":
			v, ok = positive[s.vector]
		case "negative":
			v, ok = negative[s.vector]
		}
		if !ok || s.expectError != (s.kind == "negative") {
			t.Fatalf("step %s: vector %s/%s is missing or its expectation disagrees", s.id, s.kind, s.vector)
		}
		resp, out := b.post(t, v.Payload)
		if s.expectError {
			p := wantProblem(t, resp, out, http.StatusBadRequest, courier.CodeValidation)
			fields, ok := envelopeErrorFields[v.ExpectedError]
			if !ok {
				t.Fatalf("step %s: expected_error %q has no meaning in this test yet", s.id, v.ExpectedError)
			}
			named := map[string]bool{}
			for _, e := range p.Errors {
				named[e.Field] = true
			}
			for _, f := range fields {
				if !named[f] {
					t.Fatalf("step %s: the refusal does not name %s: %s", s.id, f, out)
				}
			}
		} else {
			wantOK(t, resp, out)
			event := v.ID
			if v.SameEventAs != "" {
				event = v.SameEventAs
			}
			events[event] = true
		}
		inbox, effects := b.written(t)
		if inbox != len(events) || effects != len(events) || int(b.calls.Load()) != len(events) {
			t.Fatalf("after step %s: %d inbox records, %d effects, %d calls for %d events", s.id, inbox, effects, b.calls.Load(), len(events))
		}
	}
}

func TestReportingRefusals(t *testing.T) {
	t.Parallel()
	report := deliveryReport(t)
	var m map[string]any
	if err := json.Unmarshal(report, &m); err != nil {
		t.Fatal(err)
	}
	with := func(field string, v any) []byte {
		c := map[string]any{}
		for k, x := range m {
			c[k] = x
		}
		c[field] = v
		out, _ := json.Marshal(c)
		return out
	}
	impostor, err := signature.GenerateJWK("seller-key-1", signature.AlgEd25519) // the seller's kid, another key
	if err != nil {
		t.Fatal(err)
	}
	impostorSigner, _ := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: impostor})
	tests := []struct {
		name   string
		body   []byte
		send   []byte                             // the body sent, if not body
		edit   func(r *http.Request, body []byte) // after signing
		status int
		code   courier.Code
		field  string // a field the problem must list
	}{
		{name: "GET", body: report, edit: func(r *http.Request, _ []byte) { r.Method = http.MethodGet }, status: 405, code: courier.CodeMethodNotAllowed},
		{name: "text/plain", body: report, edit: func(r *http.Request, _ []byte) { r.Header.Set("Content-Type", "text/plain") }, status: 415, code: courier.CodeUnsupportedMediaType},
		{name: "latin-1", body: report, edit: func(r *http.Request, _ []byte) { r.Header.Set("Content-Type", "application/json; charset=latin1") }, status: 415, code: courier.CodeUnsupportedMediaType},
		{name: "too large", body: append(bytes.Repeat([]byte(" "), 8<<10), report...), status: 413, code: courier.CodeBodyTooLarge},
		{name: "unsigned", body: report, edit: func(r *http.Request, _ []byte) {
			r.Header.Del("Signature")
			r.Header.Del("Signature-Input")
		}, status: 401, code: courier.CodeWebhookHeaderMalformed},
		{name: "body changed after signing", body: report, send: append(slices.Clone(report), ' '), status: 401, code: courier.CodeWebhookDigestMismatch},
		{name: "Content-Digest changed after signing", body: report, edit: func(r *http.Request, _ []byte) {
			r.Header.Set("Content-Digest", "sha-256=:"+strings.Repeat("A", 43)+"=:")
		}, status: 401, code: courier.CodeWebhookInvalid},
		{name: "signed by another key", body: report, edit: func(r *http.Request, body []byte) {
			if err := impostorSigner.Sign(r, signature.Message{Body: body, Time: time.Now()}); err != nil {
				t.Error(err)
			}
		}, status: 401, code: courier.CodeWebhookInvalid},
		{name: "malformed JSON", body: []byte(`{"idempotency_key":`), status: 400, code: courier.CodeMalformedJSON},
		// A valid JSON document with a number no float64 holds is invalid
		// input, not malformed JSON, as Publish and Receiver answer it.
		{name: "number out of range", body: with("result", map[string]any{"x": json.Number("1e400")}), status: 400, code: courier.CodeValidation, field: "result.x"},
		{name: "number out of range in an array", body: with("extra", []any{1, json.Number("-1e400")}), status: 400, code: courier.CodeValidation, field: "extra[1]"},
		{name: "duplicate keys", body: append([]byte(`{"status":"working",`), report[1:]...), status: 400, code: courier.CodeDuplicateKey},
		{name: "duplicate keys in result", body: bytes.Replace(report, []byte(`"currency"`), []byte(`"currency": "EUR", "currency"`), 1), status: 400, code: courier.CodeDuplicateKey},
		{name: "not an object", body: []byte(`[]`), status: 400, code: courier.CodeValidation},
		{name: "media buy status", body: with("status", "active"), status: 400, code: courier.CodeValidation, field: "status"},
		{name: "short idempotency_key", body: with("idempotency_key", "whk_1"), status: 400, code: courier.CodeValidation, field: "idempotency_key"},
		{name: "bad delivery report", body: with("result", map[string]any{"notification_type": "final"}), status: 400, code: courier.CodeValidation, field: "result.reporting_period"},
		{name: "case variant in the envelope", body: bytes.Replace(report, []byte(`"idempotency_key"`), []byte(`"IDEMPOTENCY_KEY": "whk_0123456789abcdef", "idempotency_key"`), 1),
			status: 400, code: courier.CodeValidation, field: "IDEMPOTENCY_KEY"},
		{name: "case variant in result", body: bytes.Replace(report, []byte(`"currency"`), []byte(`"Currency": "usd", "currency"`), 1),
			status: 400, code: courier.CodeValidation, field: "result.Currency"},
	}
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			pgAdmin := ""
			if engine.postgres {
				pgAdmin = postgresServer(t)
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					opt := reportingOptions{}
					if pgAdmin != "" {
						opt.store = openPostgresStore(t, store.Config{})
					}
					b := setupReporting(t, opt)
					req := b.request(t, tt.body)
					if tt.edit != nil {
						tt.edit(req, tt.body)
					}
					send := tt.body
					if tt.send != nil {
						send = tt.send
					}
					resp, out := b.do(t, req, send)
					p := wantProblem(t, resp, out, tt.status, tt.code)
					if tt.status == 401 && resp.Header.Get("WWW-Authenticate") != `Signature error="`+string(tt.code)+`"` {
						t.Fatalf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
					}
					if tt.field != "" && !strings.Contains(string(out), `"field":"`+tt.field+`"`) {
						t.Fatalf("problem does not list %s: %+v", tt.field, p)
					}
					if inbox, effects := b.written(t); inbox != 0 || effects != 0 || b.calls.Load() != 0 {
						t.Fatalf("refused request wrote %d inbox records, %d effects, %d calls", inbox, effects, b.calls.Load())
					}
					// A request refused before its signature passed leaves no
					// nonce either; one refused after it leaves its own.
					wantNonces := 1
					if tt.status != http.StatusBadRequest {
						wantNonces = 0
					}
					var nonces int
					if err := b.store.DB().Get(&nonces, "SELECT COUNT(*) FROM courier_replay"); err != nil || nonces != wantNonces {
						t.Fatalf("%d nonces remembered (%v), want %d", nonces, err, wantNonces)
					}
				})
			}
		})
	}
}

// TestReportingBodyLimit: a body of exactly Body.MaxBytes is received,
// with its length told or not (chunked); one byte more is refused 413
// before its signature is checked, with nothing written.
func TestReportingBodyLimit(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			b := setupReporting(t, reportingOptions{postgres: engine.postgres})
			report := deliveryReport(t)
			const limit = 8 << 10 // setupReporting's
			padded := func(n int) []byte { return append(slices.Clone(report), bytes.Repeat([]byte(" "), n-len(report))...) }
			for _, chunked := range []bool{false, true} {
				send := func(body []byte) (*http.Response, []byte) {
					req := b.request(t, body)
					if !chunked {
						return b.do(t, req, body)
					}
					req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), -1
					resp, err := b.server.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					out, _ := io.ReadAll(resp.Body)
					return resp, out
				}
				before, _ := b.written(t) // the chunked round sends what the first received
				resp, out := send(padded(limit + 1))
				wantProblem(t, resp, out, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
				if inbox, effects := b.written(t); inbox != before || effects != before || b.calls.Load() != int32(before) {
					t.Fatalf("chunked %v: a body over the limit wrote %d inbox records, %d effects, %d calls", chunked, inbox-before, effects-before, b.calls.Load()-int32(before))
				}
				resp, out = send(padded(limit)) // the same delivery both rounds: processed once
				wantOK(t, resp, out)
				if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 1 {
					t.Fatalf("chunked %v: %d inbox records, %d effects, %d calls; want one of each", chunked, inbox, effects, b.calls.Load())
				}
			}
		})
	}
}

// TestReportingReplayedSignature sends one signed request twice: the
// second is refused as a replay, even though a retry of the same delivery
// (freshly signed) would be welcome.
func TestReportingReplayedSignature(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	report := deliveryReport(t)
	req := b.request(t, report)
	resp, out := b.do(t, req, report)
	wantOK(t, resp, out)
	resp, out = b.do(t, req, report)
	wantProblem(t, resp, out, http.StatusUnauthorized, courier.CodeWebhookReplayed)
	if got := resp.Header.Get("WWW-Authenticate"); got != `Signature error="webhook_signature_replayed"` {
		t.Fatalf("WWW-Authenticate %q", got)
	}
	resp, out = b.post(t, report)
	wantOK(t, resp, out)
	if b.calls.Load() != 1 {
		t.Fatalf("%d calls", b.calls.Load())
	}
}

// TestReportingDedupe: a retry is 200 without a second effect, also when
// the sender re-serialized the same JSON; another body under the same key
// is 409.
func TestReportingDedupe(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			b := setupReporting(t, reportingOptions{postgres: engine.postgres})
			report := deliveryReport(t)
			var m map[string]any
			if err := json.Unmarshal(report, &m); err != nil {
				t.Fatal(err)
			}
			// Keys sorted, indented, 5625.0 written 5625, "/" escaped: other bytes,
			// the same JCS document.
			reserialized, err := json.MarshalIndent(m, "", "\t")
			if err != nil {
				t.Fatal(err)
			}
			reserialized = bytes.Replace(reserialized, []byte(`"mb_001"`), []byte(`"mb\u005f001"`), 1)
			if bytes.Equal(reserialized, report) {
				t.Fatal("the re-serialization changed nothing")
			}
			m["message"] = "Adjusted"
			changed, _ := json.Marshal(m)

			b.postOK(t, report)
			for i := range 2 {
				resp, out := b.post(t, report)
				if resp.StatusCode != http.StatusOK || len(out) != 0 {
					t.Fatalf("retry %d: %d %q, want an empty 200", i, resp.StatusCode, out)
				}
			}
			b.postOK(t, reserialized)
			resp, out := b.post(t, changed)
			wantProblem(t, resp, out, http.StatusConflict, courier.CodeIdempotencyCollision)
			if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 1 {
				t.Fatalf("%d inbox records, %d effects, %d calls; want one of each", inbox, effects, b.calls.Load())
			}
		})
	}
}

// TestReportingConcurrentDuplicate sends a duplicate while the first
// request's function runs. On PostgreSQL the claim, committed on its own,
// answers it 503 at once. On SQLite the function's transaction holds the
// database's one write lock, so the duplicate waits for it (in the replay
// cache, then the claim) and is answered 200 once the first completes.
// Either way the function runs once.
func TestReportingConcurrentDuplicate(t *testing.T) {
	t.Parallel()
	for _, engine := range []struct {
		name       string
		postgres   bool
		answersNow bool // the duplicate is answered while the first runs
	}{
		{name: "sqlite"},
		{name: "postgres", postgres: true, answersNow: true},
	} {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			started, release := make(chan struct{}), make(chan struct{})
			var first atomic.Bool
			b := setupReporting(t, reportingOptions{postgres: engine.postgres, fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
				if first.CompareAndSwap(false, true) {
					close(started)
					<-release
				}
				return recordDelivery(ctx, tx, n)
			}})
			report := deliveryReport(t)
			firstDone := make(chan int)
			go func() {
				resp, _ := b.post(t, report)
				firstDone <- resp.StatusCode
			}()
			<-started
			if engine.answersNow {
				resp, out := b.post(t, report)
				wantInProgress(t, resp, out)
				close(release)
			} else {
				dupDone := make(chan int)
				go func() {
					resp, _ := b.post(t, report)
					dupDone <- resp.StatusCode
				}()
				close(release)
				if status := <-dupDone; status != http.StatusOK {
					t.Fatalf("duplicate: %d, want 200", status)
				}
			}
			if status := <-firstDone; status != http.StatusOK {
				t.Fatalf("first: %d, want 200", status)
			}
			b.postOK(t, report)
			if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 1 {
				t.Fatalf("%d inbox records, %d effects, %d calls; want one of each", inbox, effects, b.calls.Load())
			}
		})
	}
}

// TestReportingClaimedElsewhere: another receiver process claimed the
// delivery and is processing it: 503 until it completes, then 200 without
// running the function here.
func TestReportingClaimedElsewhere(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	report := deliveryReport(t)
	r, claim, err := protocol.InboxFor(b.store).Claim(t.Context(), inboxKey(t, report), 5*time.Minute)
	if err != nil || !r.Fresh {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	resp, out := b.post(t, report)
	wantInProgress(t, resp, out)

	tx, err := b.store.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.InboxFor(b.store).CompleteClaim(t.Context(), tx, claim, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	b.postOK(t, report)
	if b.calls.Load() != 0 {
		t.Fatalf("%d calls; the other process processed it", b.calls.Load())
	}
}

// TestReportingStaleClaim: the receiver that claimed the delivery died.
// Its claim holds for StaleAfter, then a retry takes it over, and the dead
// claim can no longer complete.
func TestReportingStaleClaim(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			const stale = time.Minute
			b := setupReporting(t, reportingOptions{staleAfter: stale, postgres: engine.postgres})
			report := deliveryReport(t)
			_, dead, err := protocol.InboxFor(b.store).Claim(t.Context(), inboxKey(t, report), stale)
			if err != nil {
				t.Fatal(err)
			}
			resp, out := b.post(t, report)
			wantInProgress(t, resp, out)
			b.clock.Advance(stale / 2)
			resp, out = b.post(t, report)
			wantInProgress(t, resp, out)

			b.clock.Advance(stale)
			b.postOK(t, report)
			if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 1 {
				t.Fatalf("%d inbox records, %d effects, %d calls; want one of each", inbox, effects, b.calls.Load())
			}
			tx, err := b.store.DB().BeginTxx(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			if err := protocol.InboxFor(b.store).CompleteClaim(t.Context(), tx, dead, nil); !errors.Is(err, courier.CodeLeaseLost) {
				t.Fatalf("the dead claim completed: %v", err)
			}
		})
	}
}

// TestReportingFailureIsRetried: the function fails, nothing is written,
// and the sender's retry processes the delivery.
func TestReportingFailureIsRetried(t *testing.T) {
	t.Parallel()
	var failed atomic.Bool
	b := setupReporting(t, reportingOptions{fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
		if err := recordDelivery(ctx, tx, n); err != nil {
			return err
		}
		if failed.CompareAndSwap(false, true) {
			return errors.New("application trouble")
		}
		return nil
	}})
	report := deliveryReport(t)
	resp, out := b.post(t, report)
	wantProblem(t, resp, out, http.StatusInternalServerError, courier.CodeHandlerFailed)
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 {
		t.Fatalf("a failure left %d inbox records, %d effects", inbox, effects)
	}
	b.postOK(t, report)
	if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 2 {
		t.Fatalf("%d inbox records, %d effects, %d calls", inbox, effects, b.calls.Load())
	}
}

// failsFirstTime is a reporting function that records the delivery and
// fails the first time it runs, as when the database goes away after the
// claim committed.
func failsFirstTime() handler.Func[ack.Reporting] {
	var failed atomic.Bool
	return func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
		if err := recordDelivery(ctx, tx, n); err != nil {
			return err
		}
		if failed.CompareAndSwap(false, true) {
			return errors.New("the database went away")
		}
		return nil
	}
}

// TestReportingReleaseIsRetried: the database goes away for a moment after
// the claim committed (a restart, a dropped connection), so processing
// fails, and so do the first tries to give the claim back (a trigger
// fails the inbox's first two deletes as a dropped connection would,
// SQLSTATE 08006: a trigger's own refusal, P0001, is a refused write).
// The release is tried again before the answer, so the sender's retry is
// processed, not answered 503 in_progress until the claim goes stale.
func TestReportingReleaseIsRetried(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{postgres: true, fn: failsFirstTime()})
	// A sequence, unlike a table, is not rolled back with the delete the
	// trigger fails.
	if _, err := b.store.DB().Exec(`
		CREATE SEQUENCE release_tries;
		CREATE FUNCTION fail_release() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('release_tries') <= 2 THEN
				RAISE EXCEPTION 'the database went away' USING ERRCODE = '08006'; -- connection_failure
			END IF;
			RETURN OLD;
		END $$;
		CREATE TRIGGER fail_release BEFORE DELETE ON courier_inbox FOR EACH ROW EXECUTE FUNCTION fail_release();
	`); err != nil {
		t.Fatal(err)
	}
	report := deliveryReport(t)
	resp, out := b.post(t, report)
	wantProblem(t, resp, out, http.StatusInternalServerError, courier.CodeHandlerFailed)
	var tries int
	if err := b.store.DB().Get(&tries, "SELECT last_value FROM release_tries"); err != nil {
		t.Fatal(err)
	}
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 || tries != 3 {
		t.Fatalf("after the failure: %d inbox records, %d effects, %d tries to release; want none left after 3 tries", inbox, effects, tries)
	}
	b.postOK(t, report)
	if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 2 {
		t.Fatalf("%d inbox records, %d effects, %d calls", inbox, effects, b.calls.Load())
	}
}

// TestReportingReleaseRemembered: a claim the receiver could not give
// back even after retrying (the database away longer than that) left the
// key in progress until StaleAfter: the sender's retry got 503 in_progress
// minutes long, and spent its attempts on it. The receiver remembers it,
// gives it back when the key comes again, and processes the retry.
func TestReportingReleaseRemembered(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{postgres: true, fn: failsFirstTime()})
	if _, err := b.store.DB().Exec(`
		CREATE TABLE release_blocked (x int);
		INSERT INTO release_blocked VALUES (1);
		CREATE FUNCTION fail_release() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF EXISTS (SELECT 1 FROM release_blocked) THEN
				RAISE EXCEPTION 'the database went away' USING ERRCODE = '08006'; -- connection_failure
			END IF;
			RETURN OLD;
		END $$;
		CREATE TRIGGER fail_release BEFORE DELETE ON courier_inbox FOR EACH ROW EXECUTE FUNCTION fail_release();
	`); err != nil {
		t.Fatal(err)
	}
	report := deliveryReport(t)
	resp, out := b.post(t, report)
	wantProblem(t, resp, out, http.StatusInternalServerError, courier.CodeHandlerFailed)
	if inbox, _ := b.written(t); inbox != 1 {
		t.Fatalf("%d inbox records after a release that failed throughout, want the claim left", inbox)
	}
	if _, err := b.store.DB().Exec(`DELETE FROM release_blocked`); err != nil {
		t.Fatal(err)
	}
	b.postOK(t, report)
	if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 2 {
		t.Fatalf("%d inbox records, %d effects, %d calls; want the retry processed", inbox, effects, b.calls.Load())
	}
}

func TestReportingRejection(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
		if err := recordDelivery(ctx, tx, n); err != nil {
			return err
		}
		return handler.Reject("unknown_operation", "no such operation")
	}})
	resp, out := b.post(t, deliveryReport(t))
	wantProblem(t, resp, out, http.StatusUnprocessableEntity, "unknown_operation")
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 {
		t.Fatalf("a rejection left %d inbox records, %d effects", inbox, effects)
	}
}

// TestReportingLeaseLost: when the claim is no longer this request's at
// completion (another request took it over meanwhile), the function's
// effects roll back and the answer is 503 in progress. The function
// itself deletes the record in its transaction, which CompleteClaim then
// sees as a claim that is no longer held.
func TestReportingLeaseLost(t *testing.T) {
	t.Parallel()
	report := deliveryReport(t)
	key := inboxKey(t, report)
	var lost atomic.Bool
	b := setupReporting(t, reportingOptions{fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
		if err := recordDelivery(ctx, tx, n); err != nil {
			return err
		}
		if lost.CompareAndSwap(false, true) {
			_, err := tx.ExecContext(ctx, tx.Rebind("DELETE FROM courier_inbox WHERE sender = ? AND dedupe_key = ?"), key.Sender, key.Key)
			return err
		}
		return nil
	}})
	resp, out := b.post(t, report)
	wantInProgress(t, resp, out)
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 {
		t.Fatalf("a lost claim left %d inbox records, %d effects", inbox, effects)
	}
	b.postOK(t, report)
	if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 2 {
		t.Fatalf("%d inbox records, %d effects, %d calls", inbox, effects, b.calls.Load())
	}
}

func TestReportingConfig(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key, _ := signature.GenerateJWK("k", signature.AlgEd25519)
	verifier, _ := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: "s", Keys: []signature.JWK{key.Public()}, Origin: "https://buyer.example"})
	fn := func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil }
	valid := handler.ReportingConfig{Store: s, Verifier: verifier}
	bad := []struct {
		name string
		edit func(c *handler.ReportingConfig)
		fn   handler.Func[ack.Reporting]
	}{
		{"no store", func(c *handler.ReportingConfig) { c.Store = nil }, fn},
		{"no verifier", func(c *handler.ReportingConfig) { c.Verifier = nil }, fn},
		{"negative body limit", func(c *handler.ReportingConfig) { c.Body.MaxBytes = -1 }, fn},
		{"negative retry horizon", func(c *handler.ReportingConfig) { c.RetryHorizon = -time.Hour }, fn},
		{"negative staleness", func(c *handler.ReportingConfig) { c.StaleAfter = -time.Second }, fn},
		{"no function", func(*handler.ReportingConfig) {}, nil},
	}
	for _, tt := range bad {
		c := valid
		tt.edit(&c)
		if _, err := handler.NewReporting(c, tt.fn); !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("%s: %v, want CodeConfigInvalid", tt.name, err)
		}
	}
	for _, tt := range []struct{ horizon, want time.Duration }{
		{0, 73 * time.Hour}, // a courier sender's, and its last attempt's Timeout: records kept 24 hours were gone before its last retries
		{time.Hour, 24 * time.Hour},
		{23 * time.Hour, 24 * time.Hour},
		{24 * time.Hour, 25 * time.Hour},
		{72 * time.Hour, 73 * time.Hour},
	} {
		c := valid
		c.RetryHorizon = tt.horizon
		rp, err := handler.NewReporting(c, fn)
		if err != nil {
			t.Fatal(err)
		}
		if got := rp.Retention(); got != tt.want {
			t.Errorf("Retention with a %s horizon = %s, want %s", tt.horizon, got, tt.want)
		}
	}
}

// A buyer's AdCP webhook endpoint: RFC 9421 signatures checked against the
// seller's key with the store's replay cache, each delivery processed once
// in the Inbox's transaction, retries answered 200 without processing.
func ExampleNewReporting() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "reporting")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "inbox.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	srv := httptest.NewUnstartedServer(nil)
	defer srv.Close()

	sellerKey, err := signature.GenerateJWK("seller-key-1", signature.AlgEd25519)
	if err != nil {
		panic(err)
	}
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender: "seller.example", Keys: []signature.JWK{sellerKey.Public()}, Replay: s.Replay,
		Origin: "http://" + srv.Listener.Addr().String(), // this receiver as senders address it: "https://buyer.example" in production
	})
	if err != nil {
		panic(err)
	}
	rcv, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: verifier, RetryHorizon: 72 * time.Hour},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
			fmt.Println("processing", n.TaskType, n.Status)
			return nil // write the task's outcome with tx
		})
	if err != nil {
		panic(err)
	}
	srv.Config.Handler = rcv
	srv.Start()

	// The seller's side: one delivery, sent twice.
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: sellerKey})
	if err != nil {
		panic(err)
	}
	body, err := json.Marshal(ack.Reporting{
		IdempotencyKey: ack.NewIdempotencyKey(), OperationID: "op_456", TaskID: "task_456",
		TaskType: "create_media_buy", Status: "completed", Timestamp: "2026-05-26T09:00:44Z",
	})
	if err != nil {
		panic(err)
	}
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/adcp/webhooks", bytes.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{Body: body, Time: time.Now()}); err != nil {
			panic(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	fmt.Println("prune records older than", rcv.Retention())
	// Output:
	// processing create_media_buy completed
	// 200
	// 200
	// prune records older than 73h0m0s
}

// TestReportingOtherNotificationFamilies: AdCP's notifications of other
// families than delivery reports (impairment, creative, account, …) carry
// a result.notification_type outside a delivery report's: the receiver
// passes them to the application. It refused them 400, for good.
func TestReportingOtherNotificationFamilies(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	body := []byte(`{"idempotency_key":"whk_01HW9D2T3VXQ5M7K9N1P3R5S7U","notification_id":"imp_123","operation_id":"op_1","task_id":"task_1","task_type":"media_buy_impairment","status":"completed","timestamp":"2026-05-26T09:00:44Z","result":{"notification_type":"impairment","impairment_id":"imp_123"}}`)
	b.postOK(t, body)
	if b.calls.Load() != 1 {
		t.Fatalf("%d calls of the application's function, want 1", b.calls.Load())
	}
}

// taskWebhook is an AdCP task webhook: a delivery under key of the task's
// status, carrying notificationID ("" for none).
func taskWebhook(key, notificationID, status string) []byte {
	id := ""
	if notificationID != "" {
		id = `"notification_id":"` + notificationID + `",`
	}
	return []byte(`{"idempotency_key":"` + key + `",` + id + `"operation_id":"op_456","task_id":"task_456","task_type":"create_media_buy","status":"` + status + `","timestamp":"2025-01-22T10:30:00Z"}`)
}

// reportingEngines are the engines a reporting test runs on.
var reportingEngines = []struct {
	name     string
	postgres bool
}{{"sqlite", false}, {"postgres", true}}

// TestReportingTerminalReEmissionIsADuplicate: AdCP
// (core/mcp-webhook-payload.json, notification_id): for a terminal task
// webhook, "different delivery keys carrying the same value are
// re-emissions and MUST NOT republish terminal effects". A re-emission of
// each terminal status under a fresh idempotency_key, and its retry, are
// answered 200 as duplicates without running the function again. The
// record that tells re-emissions apart is kept as long as the idempotency
// records, and pruned with them.
func TestReportingTerminalReEmissionIsADuplicate(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var outcomes []handler.Outcome
			b := setupReporting(t, reportingOptions{postgres: engine.postgres, hook: func(e handler.Event) {
				mu.Lock()
				defer mu.Unlock()
				outcomes = append(outcomes, e.Outcome)
			}})
			statuses := []string{"completed", "failed", "canceled", "rejected"}
			for i, status := range statuses {
				id := "task_" + status + ".terminal"
				first := taskWebhook(fmt.Sprintf("whk_first_%012d", i), id, status)
				again := taskWebhook(fmt.Sprintf("whk_again_%012d", i), id, status)
				b.postOK(t, first)
				b.postOK(t, again)
				b.postOK(t, again) // the re-emission's own retry
				if n := b.calls.Load(); n != int32(i+1) {
					t.Fatalf("%s: the terminal effect ran %d times for %d notification_ids", status, n, i+1)
				}
			}
			mu.Lock()
			got := slices.Clone(outcomes)
			mu.Unlock()
			want := slices.Repeat([]handler.Outcome{handler.OutcomeAccepted, handler.OutcomeDuplicate, handler.OutcomeDuplicate}, len(statuses))
			if !slices.Equal(got, want) {
				t.Fatalf("outcomes %v, want %v", got, want)
			}
			// Two idempotency records and one for the notification_id, per status.
			if inbox, effects := b.written(t); inbox != 3*len(statuses) || effects != len(statuses) {
				t.Fatalf("%d inbox records, %d effects; want %d and %d", inbox, effects, 3*len(statuses), len(statuses))
			}
			b.clock.Advance(b.rcv.Retention() - time.Minute)
			if n, err := b.store.Inbox.Prune(t.Context(), store.PruneParams{OlderThan: b.rcv.Retention()}); err != nil || n != 0 {
				t.Fatalf("Prune within Retention deleted %d (%v), want none", n, err)
			}
			b.postOK(t, taskWebhook("whk_later_000000000000", "task_completed.terminal", "completed"))
			if n := b.calls.Load(); n != int32(len(statuses)) {
				t.Fatalf("a re-emission within Retention ran the function (%d calls)", n)
			}
			b.clock.Advance(2 * time.Minute)
			if n, err := b.store.Inbox.Prune(t.Context(), store.PruneParams{OlderThan: b.rcv.Retention()}); err != nil || n != 3*len(statuses) {
				t.Fatalf("Prune past Retention deleted %d (%v), want the %d records of the first deliveries", n, err, 3*len(statuses))
			}
		})
	}
}

// TestReportingRetentionOutlastsTheLastAttempt: a courier sender may start
// an attempt until its retry horizon (72 hours after the first attempt
// was due) ends, and that attempt reaches the receiver as much later as
// the sender waits for an answer (a courier worker's Timeout, 15 seconds
// by default). A delivery processed as soon as it was due, whose answer
// the sender did not get, keeps its record through a Prune with
// Retention run before that last attempt arrives: the function runs once.
func TestReportingRetentionOutlastsTheLastAttempt(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			b := setupReporting(t, reportingOptions{postgres: engine.postgres})
			body := taskWebhook("whk_last_attempt_000000", "", "working")
			b.postOK(t, body) // the first attempt, as it falls due
			// The last attempt starts a second before the horizon ends and
			// arrives 14 seconds later, within its Timeout.
			b.clock.Advance(72*time.Hour - time.Second + 14*time.Second)
			if _, err := b.store.Inbox.Prune(t.Context(), store.PruneParams{OlderThan: b.rcv.Retention()}); err != nil {
				t.Fatal(err)
			}
			b.postOK(t, body)
			if n := b.calls.Load(); n != 1 {
				t.Fatalf("the function ran %d times for one delivery: Prune with Retention %s deleted its record before the sender's last attempt arrived", n, b.rcv.Retention())
			}
		})
	}
}

// TestReportingReEmissionOfATerminalStatusOnly: only a terminal status
// makes notification_id an effect's identity. Re-emissions of a status
// that is not terminal (working, input-required, …: the task goes on, and
// the same update may matter again) run the function each time, as
// deliveries without a notification_id do; the terminal re-emission that
// follows under the same notification_id does not.
func TestReportingReEmissionOfATerminalStatusOnly(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	const id = "task_456.update"
	for i, status := range []string{"submitted", "working", "input-required", "auth-required", "unknown"} {
		b.postOK(t, taskWebhook(fmt.Sprintf("whk_update_a_%010d", i), id, status))
		b.postOK(t, taskWebhook(fmt.Sprintf("whk_update_b_%010d", i), id, status))
	}
	b.postOK(t, taskWebhook("whk_no_id_a_0000000000", "", "completed"))
	b.postOK(t, taskWebhook("whk_no_id_b_0000000000", "", "completed"))
	if n := b.calls.Load(); n != 12 {
		t.Fatalf("%d calls, want 12: every delivery of a status that is not terminal, or without a notification_id, is processed", n)
	}
	b.postOK(t, taskWebhook("whk_terminal_a_00000000", id, "completed"))
	b.postOK(t, taskWebhook("whk_terminal_b_00000000", id, "completed"))
	if n := b.calls.Load(); n != 13 {
		t.Fatalf("%d calls, want 13: the terminal re-emission ran the function", n)
	}
}

// TestReportingReEmissionIsPerSender: the re-emission identity is scoped
// by the verified sender, as the idempotency_key is (AdCP: "the
// authenticated seller plus the bound task_id"): the same terminal
// notification_id from another seller on the same Inbox is another
// event, processed, and its own re-emission is not.
func TestReportingReEmissionIsPerSender(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			a := setupReporting(t, reportingOptions{postgres: engine.postgres})
			other := setupReporting(t, reportingOptions{store: a.store, sender: "other-seller.example"})
			const id = "task_456.terminal"
			a.postOK(t, taskWebhook("whk_seller_a_000000001", id, "completed"))
			other.postOK(t, taskWebhook("whk_seller_b_000000001", id, "completed"))
			if a.calls.Load() != 1 || other.calls.Load() != 1 {
				t.Fatalf("calls %d and %d, want the other seller's notification processed too", a.calls.Load(), other.calls.Load())
			}
			other.postOK(t, taskWebhook("whk_seller_b_000000002", id, "completed"))
			a.postOK(t, taskWebhook("whk_seller_a_000000002", id, "completed"))
			if a.calls.Load() != 1 || other.calls.Load() != 1 {
				t.Fatalf("calls %d and %d, want each seller's re-emission answered as a duplicate", a.calls.Load(), other.calls.Load())
			}
			if _, effects := a.written(t); effects != 2 {
				t.Fatalf("%d effects, want 2", effects)
			}
		})
	}
}

// TestReportingConcurrentReEmissions: a terminal re-emission arrives,
// under its own idempotency_key, while the first delivery's function
// runs. On PostgreSQL its record of the notification_id waits for the
// first's transaction (the test sees it wait for a lock) and then finds
// it: the function runs once. If the first rolls back, the waiting one
// records it and runs the function instead, and the first's retry is
// then the duplicate. On SQLite the first's transaction holds the one
// writer, so the re-emission waits for it before its claim.
func TestReportingConcurrentReEmissions(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		for _, firstFails := range []bool{false, true} {
			name := engine.name + "/first commits"
			if firstFails {
				name = engine.name + "/first rolls back"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				started, held := make(chan struct{}), make(chan struct{})
				release := sync.OnceFunc(func() { close(held) })
				var first atomic.Bool
				b := setupReporting(t, reportingOptions{postgres: engine.postgres, fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
					if err := recordDelivery(ctx, tx, n); err != nil {
						return err
					}
					if first.CompareAndSwap(false, true) {
						close(started)
						<-held
						if firstFails {
							return errors.New("application trouble")
						}
					}
					return nil
				}})
				t.Cleanup(release) // before the server closes, should the test fail first
				const id = "task_456.terminal"
				one := taskWebhook("whk_concurrent_0000001", id, "completed")
				two := taskWebhook("whk_concurrent_0000002", id, "completed")
				firstDone := make(chan int, 1)
				go func() {
					resp, _ := b.post(t, one)
					firstDone <- resp.StatusCode
				}()
				<-started
				secondDone := make(chan int, 1)
				go func() {
					resp, _ := b.post(t, two)
					secondDone <- resp.StatusCode
				}()
				if engine.postgres { // the re-emission's record waits for the first's
					waitForLockWaiter(t, b.store.DB())
				}
				release()
				wantFirst := http.StatusOK
				if firstFails {
					wantFirst = http.StatusInternalServerError
				}
				if status := <-firstDone; status != wantFirst {
					t.Fatalf("first: %d, want %d", status, wantFirst)
				}
				if status := <-secondDone; status != http.StatusOK {
					t.Fatalf("re-emission: %d, want 200", status)
				}
				wantCalls := int32(1)
				if firstFails {
					wantCalls = 2
					b.postOK(t, one) // the first's retry: now a re-emission of the second
				}
				if inbox, effects := b.written(t); effects != 1 || inbox != 3 || b.calls.Load() != wantCalls {
					t.Fatalf("%d inbox records, %d effects, %d calls; want 3, 1 and %d", inbox, effects, b.calls.Load(), wantCalls)
				}
			})
		}
	}
}

// waitForLockWaiter waits until an insert into the Inbox, in db's
// database, waits for a lock: condition-based, not a sleep for
// synchronization.
func waitForLockWaiter(t *testing.T, db *sqlx.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
			AND strpos(query, 'INSERT INTO courier_inbox') > 0`); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no backend waits for a lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestReportingNotificationOfAnotherFamilyIsNoReEmission: only a task
// webhook's terminal notification_id is one effect. A notification of
// another family (result.notification_type: impairment, creative, …)
// carries a notification_id of that family's own meaning, and the
// envelope's status says nothing of it: an impairment's notification_id is
// its impairment_id, the same on the fires while it is open and on the
// closing fire that says it is resolved. Each such fire under its own
// idempotency_key is processed, whatever the envelope's status.
func TestReportingNotificationOfAnotherFamilyIsNoReEmission(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	fire := func(key, state string) []byte {
		return []byte(`{"idempotency_key":"` + key + `","notification_id":"imp_123","operation_id":"op_1","task_id":"task_1","task_type":"media_buy_impairment","status":"completed","timestamp":"2026-05-26T09:00:44Z","result":{"notification_type":"impairment","impairment":{"impairment_id":"imp_123","state":"` + state + `"}}}`)
	}
	b.postOK(t, fire("whk_impairment_open_0001", "open"))
	b.postOK(t, fire("whk_impairment_closed_001", "resolved"))
	if n := b.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2: the impairment's closing fire was taken for a re-emission of its opening one", n)
	}
	// A task webhook's terminal re-emission still is one.
	b.postOK(t, taskWebhook("whk_terminal_a_00000001", "task_456.terminal", "completed"))
	b.postOK(t, taskWebhook("whk_terminal_b_00000001", "task_456.terminal", "completed"))
	if n := b.calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

// TestReportingReEmissionIsPerTask: the same notification_id on the
// terminal webhooks of two tasks is two terminal effects (AdCP's terminal
// identity is the sender and the bound task_id), each processed once.
func TestReportingReEmissionIsPerTask(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	terminal := func(key, task string) []byte {
		return []byte(`{"idempotency_key":"` + key + `","notification_id":"terminal","operation_id":"op_456","task_id":"` + task + `","task_type":"create_media_buy","status":"completed","timestamp":"2025-01-22T10:30:00Z"}`)
	}
	b.postOK(t, terminal("whk_task_a_terminal_0001", "task_a"))
	b.postOK(t, terminal("whk_task_b_terminal_0001", "task_b"))
	if n := b.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2: task_b's terminal webhook was taken for a re-emission of task_a's", n)
	}
	b.postOK(t, terminal("whk_task_b_terminal_0002", "task_b")) // task_b's re-emission
	if n := b.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2: task_b's re-emission ran the function again", n)
	}
}

// TestReportingTerminalResultNamingNoFamilyIsATask: a notification of
// another family names it in result.notification_type, a string (AdCP's
// notification-type enum). A terminal task webhook whose result merely has
// a member by that name, null, empty or not a string (a task result
// serialized from a type with an optional field, say), names no family:
// it is a task's terminal effect, and its re-emission under a fresh key
// must not run the function again. It was taken for another family's
// notification and republished.
func TestReportingTerminalResultNamingNoFamilyIsATask(t *testing.T) {
	t.Parallel()
	b := setupReporting(t, reportingOptions{})
	values := []string{`null`, `""`, `7`, `false`, `{}`, `["impairment"]`}
	for i, v := range values {
		terminal := func(key string) []byte {
			return fmt.Appendf(nil, `{"idempotency_key":"%s","notification_id":"task_%d.terminal","operation_id":"op_456","task_id":"task_%d","task_type":"create_media_buy","status":"completed","timestamp":"2025-01-22T10:30:00Z","result":{"media_buy_id":"mb_1","notification_type":%s}}`, key, i, i, v)
		}
		b.postOK(t, terminal(fmt.Sprintf("whk_first_%012d", i)))
		b.postOK(t, terminal(fmt.Sprintf("whk_again_%012d", i))) // the re-emission
		if n := b.calls.Load(); n != int32(i+1) {
			t.Fatalf("notification_type %s: the terminal effect ran %d times for %d tasks: its re-emission was republished", v, n, i+1)
		}
	}
}

// TestReportingTokenIsTheApplications: the envelope's token echoes the
// one the receiver configured for the subscription, which courier does
// not hold: the application compares it with its own. AdCP lets a
// receiver refuse a token whose length is out of bounds only once it knows
// the subscription configured one; courier refused one shorter than 16
// characters, or longer than 4096, for good (400 validation_failed), with
// no token configured at all, and the application never saw the
// delivery. It is delivered now, token and all, whatever its length.
func TestReportingTokenIsTheApplications(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []string
	)
	b := setupReporting(t, reportingOptions{fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, n.Token)
		return recordDelivery(ctx, tx, n)
	}})
	tokens := []string{"short", strings.Repeat("t", 4097)}
	for i, token := range tokens {
		body := []byte(`{"idempotency_key":"whk_token_0123456789_` + strconv.Itoa(i) + `","operation_id":"op_1","task_id":"task_1","task_type":"create_media_buy",` +
			`"status":"working","timestamp":"2026-05-26T09:00:44Z","token":"` + token + `"}`)
		b.postOK(t, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, tokens) {
		t.Fatalf("the application got tokens of lengths %d, want each of %d and %d", lens(got), len(tokens[0]), len(tokens[1]))
	}
}

// lens returns the lengths of ss.
func lens(ss []string) []int {
	n := make([]int, len(ss))
	for i, s := range ss {
		n[i] = len(s)
	}
	return n
}

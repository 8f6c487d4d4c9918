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
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The hostile-input battery: every receiver (Terminal, Reporting, Source,
// Publish) gets the same table of hostile requests over real HTTP, plus the
// cases only it has. Each case runs on a fresh store and checks the status,
// the problem's stable code, that nothing was stored (courier_inbox and
// the application's effect table, counted before and after), and that the
// handler did not panic.

// hostileMaxBody is every receiver's Body.MaxBytes here: large enough for a
// 10,000-level document to reach the JSON parser.
const hostileMaxBody = 64 << 10

// hostileMaxAnswer bounds every answer of the battery: a refusal names at
// most 100 fields, each by a path of at most 256 bytes, however many a
// body gets wrong.
const hostileMaxAnswer = 100*(256+64) + 512

// hostileManyUnknown is members enough to fill most of hostileMaxBody, each
// one unknown to every receiver: "u0":1,"u1":1,…
func hostileManyUnknown() string {
	var b strings.Builder
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"u%d":1`, i)
	}
	return b.String()
}

// hostileLongName is a member name of 60,000 bytes, and the path a
// refusal names it by.
var hostileLongName, hostileLongNamePath = strings.Repeat("k", 60000), strings.Repeat("k", 126) + "…" + strings.Repeat("k", 127)

// hostileEnv is one receiver on a fresh SQLite store behind a real server.
type hostileEnv struct {
	store  *store.Store
	server *httptest.Server
	// effects counts the application's effects.
	effects string
	// base sets the headers every request of this receiver carries.
	base func(r *http.Request)
	// sign signs r as the delivery id with body at the given time.
	// tampered: body is not the bytes sent (a bearer sends a wrong token).
	sign func(t *testing.T, r *http.Request, id string, body []byte, tampered bool, at time.Time)
	// last is the last request sent and its body, for replays.
	last     *http.Request
	lastBody []byte
}

// hostileSigCodes are a verifier's codes for the signature cases; an
// empty code skips the case (the scheme has no such notion).
type hostileSigCodes struct {
	header     string       // the header the signature travels in
	missing    courier.Code // header absent
	empty      courier.Code // header present and empty
	oversized  courier.Code // a 64 KiB header
	truncated  courier.Code // the header cut in half
	duplicated courier.Code // the header sent twice
	mismatch   courier.Code // signed bytes other than the body
	stale      courier.Code // signed 10 minutes ago
	replay     int          // status of the same request sent again
	replayCode courier.Code
}

// hostileTarget is one receiver under test.
type hostileTarget struct {
	name string
	// open serves the receiver, its body read within limits, on a fresh
	// store.
	open   func(t *testing.T, limits middleware.BodyLimits) *hostileEnv
	valid  func(t *testing.T) hostileValid
	ok     int // status of an accepted request
	sig    hostileSigCodes
	extras []hostileCase
}

// hostileValid is a valid request: its delivery id and body.
type hostileValid struct {
	id   string
	body []byte
}

// edit returns the body with fn applied to its top-level members.
func (v hostileValid) edit(fn func(m map[string]json.RawMessage)) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v.body, &m); err != nil {
		panic(err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// with returns the body with member field set to the raw JSON raw.
func (v hostileValid) with(field, raw string) []byte {
	return v.edit(func(m map[string]json.RawMessage) { m[field] = json.RawMessage(raw) })
}

// without returns the body without member field.
func (v hostileValid) without(field string) []byte {
	return v.edit(func(m map[string]json.RawMessage) { delete(m, field) })
}

// prepend returns the body with raw members inserted first.
func (v hostileValid) prepend(members string) []byte {
	return append([]byte("{"+members+","), v.body[1:]...)
}

// hostileRequest describes one request of a case.
type hostileRequest struct {
	method   string // default POST
	id       string // the signed delivery id; default the valid one
	body     []byte
	signed   []byte        // bytes signed; default body
	at       time.Duration // signing time offset from now
	unsigned bool
	replay   bool // send the previous request again, unchanged
	edit     func(r *http.Request)
}

// hostileCase is one hostile request and what it must get.
type hostileCase struct {
	name string
	// prepare runs before the counts are taken: deliveries accepted
	// earlier, for collisions and replays.
	prepare func(t *testing.T, e *hostileEnv, v hostileValid)
	build   func(v hostileValid) hostileRequest
	status  int
	code    courier.Code // the problem's code; empty for a success
	field   string       // a field the problem must list
	stored  int          // inbox rows the request may add (accepted ones)
	effects int          // effect rows the request may add
	wantKey string       // a dedupe key the Inbox must hold afterwards
	// bug names a known defect: the case is skipped, not failed, while it
	// still misbehaves, and fails once the defect is fixed so that the
	// marker is removed.
	bug string
}

func TestHostileInput(t *testing.T) {
	t.Parallel()
	for _, target := range hostileTargets() {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			cases := append(hostileCommonCases(target), target.extras...)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					runHostileCase(t, target, tc)
				})
			}
		})
	}
}

func runHostileCase(t *testing.T, target hostileTarget, tc hostileCase) {
	e := target.open(t, middleware.BodyLimits{MaxBytes: hostileMaxBody})
	v := target.valid(t)
	if tc.prepare != nil {
		tc.prepare(t, e, v)
	}
	inbox0, effects0 := e.written(t)
	resp, out := e.send(t, v, tc.build(v))
	inbox, effects := e.written(t)
	stored := inbox-inbox0 == tc.stored && effects-effects0 == tc.effects

	var p problemFields
	isProblem := resp.Header.Get("Content-Type") == "application/problem+json"
	if isProblem && resp.Request.Method != http.MethodHead {
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatalf("%d: body %q is not a problem: %v", resp.StatusCode, out, err)
		}
	}
	var wrong []string
	if resp.StatusCode != tc.status {
		wrong = append(wrong, "status")
	}
	if tc.status >= 300 {
		switch {
		case !isProblem:
			wrong = append(wrong, "content type")
		case resp.Request.Method == http.MethodHead:
		case p.Status != tc.status || p.Code != tc.code:
			wrong = append(wrong, "problem")
		case tc.field != "" && !p.lists(tc.field):
			wrong = append(wrong, "field errors")
		}
	}
	if tc.status == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != `Signature error="`+string(tc.code)+`"` {
		wrong = append(wrong, "WWW-Authenticate")
	}
	if tc.status == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != http.MethodPost {
		wrong = append(wrong, "Allow")
	}
	if len(out) > hostileMaxAnswer {
		wrong = append(wrong, fmt.Sprintf("answer size (%d bytes, over %d)", len(out), hostileMaxAnswer))
	}
	if !stored {
		wrong = append(wrong, fmt.Sprintf("writes (%d inbox rows and %d effects, want %d and %d)", inbox-inbox0, effects-effects0, tc.stored, tc.effects))
	}
	if tc.wantKey != "" {
		var keys []string
		if err := e.store.DB().Select(&keys, "SELECT dedupe_key FROM courier_inbox"); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(keys, tc.wantKey) {
			wrong = append(wrong, fmt.Sprintf("dedupe keys (%q, want %s)", keys, tc.wantKey))
		}
	}
	switch {
	case len(wrong) > 0 && tc.bug != "":
		t.Skipf("known bug (%s): wrong %s: got %d %s %q, want %d %s", tc.bug, strings.Join(wrong, ", "), resp.StatusCode, p.Code, out, tc.status, tc.code)
	case len(wrong) > 0:
		t.Fatalf("wrong %s: got %d %s (Content-Type %q, WWW-Authenticate %q) %q; want %d %s",
			strings.Join(wrong, ", "), resp.StatusCode, p.Code, resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"), out, tc.status, tc.code)
	case tc.bug != "":
		t.Fatalf("fixed? the case now passes; remove its bug marker (%s)", tc.bug)
	}
}

// problemFields is what the battery reads of a problem body.
type problemFields struct {
	Status int          `json:"status"`
	Code   courier.Code `json:"code"`
	Errors []struct {
		Field string `json:"field"`
		Rule  string `json:"rule"`
	} `json:"errors"`
}

func (p problemFields) lists(field string) bool {
	for _, f := range p.Errors {
		if f.Field == field {
			return true
		}
	}
	return false
}

// send builds, signs and sends hr, and returns the answer.
func (e *hostileEnv) send(t *testing.T, v hostileValid, hr hostileRequest) (*http.Response, []byte) {
	t.Helper()
	var req *http.Request
	var body []byte
	if hr.replay {
		if e.last == nil {
			t.Fatal("nothing to replay")
		}
		req, body = e.last.Clone(t.Context()), e.lastBody
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	} else {
		body = hr.body
		method := cmp(hr.method, http.MethodPost)
		var err error
		req, err = http.NewRequestWithContext(t.Context(), method, e.server.URL+"/hooks", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if e.base != nil {
			e.base(req)
		}
		if !hr.unsigned {
			signed := hr.signed
			if signed == nil {
				signed = body
			}
			e.sign(t, req, cmp(hr.id, v.id), signed, hr.signed != nil, time.Now().Add(hr.at))
		}
		if hr.edit != nil {
			hr.edit(req)
		}
	}
	e.last, e.lastBody = req.Clone(context.WithoutCancel(t.Context())), body
	resp, err := e.server.Client().Do(req)
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// written counts the Inbox records and the application's effects.
func (e *hostileEnv) written(t *testing.T) (inbox, effects int) {
	t.Helper()
	if err := e.store.DB().Get(&inbox, "SELECT COUNT(*) FROM courier_inbox"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.DB().Get(&effects, e.effects); err != nil {
		t.Fatal(err)
	}
	return inbox, effects
}

// accept sends v, freshly signed, and wants it accepted.
func (e *hostileEnv) accept(t *testing.T, v hostileValid, ok int) {
	t.Helper()
	resp, out := e.send(t, v, hostileRequest{body: v.body})
	if resp.StatusCode != ok {
		t.Fatalf("setup delivery: %d %s", resp.StatusCode, out)
	}
}

// hostileStore opens a fresh SQLite store with an effect table.
func hostileStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hostile.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().Exec("CREATE TABLE hostile_effects (id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return s
}

// hostileEffect is an application function that records one effect. It
// fails unless its context says the receiver holds the store's writer, so
// every accepted case checks the mark too.
func hostileEffect[T ack.Notification](ctx context.Context, tx *sqlx.Tx, n T) error {
	if !writerctx.Held(ctx) {
		return errors.New("the function's context is not marked as holding the writer")
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO hostile_effects (id) VALUES (?)", n.DedupeKey())
	return err
}

// hostileServe serves h on a fresh server, failing the test on any panic.
func hostileServe(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	return hostileServeAt(t, func(string) http.Handler { return h })
}

// hostileServeAt is hostileServe for a handler that needs the server's
// origin ("http://127.0.0.1:port") before it is built.
func hostileServeAt(t *testing.T, build func(origin string) http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	h := build("http://" + srv.Listener.Addr().String())
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel value itself
					panic(v)
				}
				t.Errorf("handler panicked on %s: %v\n%s", r.Method, v, debug.Stack())
				http.Error(w, "panic", http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
	srv.Start()
	return srv
}

// standardWebhooks returns a verifier and a signing function for sender.
func hostileStandardWebhooks(t *testing.T, sender string) (signature.Verifier, func(*testing.T, *http.Request, string, []byte, bool, time.Time)) {
	t.Helper()
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return verifier, func(t *testing.T, r *http.Request, id string, body []byte, _ bool, at time.Time) {
		t.Helper()
		if err := signer.Sign(r, signature.Message{ID: id, Body: body, Time: at}); err != nil {
			t.Fatal(err)
		}
	}
}

var standardWebhooksCodes = hostileSigCodes{
	header:     "webhook-signature",
	missing:    courier.CodeSignatureMissing,
	empty:      courier.CodeSignatureMissing,
	oversized:  courier.CodeSignatureMalformed,
	truncated:  courier.CodeSignatureMismatch,
	duplicated: courier.CodeSignatureMalformed,
	mismatch:   courier.CodeSignatureMismatch,
	stale:      courier.CodeSignatureTimestamp,
	replay:     http.StatusOK, // a redelivery: answered from the Inbox
}

func hostileTargets() []hostileTarget {
	return []hostileTarget{hostileTerminalTarget(), hostileReportingTarget(), hostileSourceTarget(), hostilePublishTarget()}
}

// --- Terminal -----------------------------------------------------------

func hostileTerminalTarget() hostileTarget {
	return hostileTarget{
		name: "Terminal",
		open: func(t *testing.T, limits middleware.BodyLimits) *hostileEnv {
			s := hostileStore(t)
			verifier, sign := hostileStandardWebhooks(t, "cms-host")
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Body: limits}, hostileEffect[ack.Terminal])
			if err != nil {
				t.Fatal(err)
			}
			return &hostileEnv{store: s, server: hostileServe(t, rcv), effects: "SELECT COUNT(*) FROM hostile_effects", sign: sign}
		},
		valid: func(t *testing.T) hostileValid {
			n, body := hostileTerminal(func(*ack.Terminal) {})
			return hostileValid{id: n.NotificationID, body: body}
		},
		ok:  http.StatusOK,
		sig: standardWebhooksCodes,
		extras: []hostileCase{
			{name: "wrong schema", build: body(func(v hostileValid) []byte { return v.with("schema", `"courier.other.v1"`) }), status: 400, code: courier.CodeValidation, field: "schema"},
			{name: "sequence is a string", build: body(func(v hostileValid) []byte { return v.with("source_sequence", `"3"`) }), status: 400, code: courier.CodeValidation, field: "source_sequence"},
			{name: "sequence is a float", build: body(func(v hostileValid) []byte { return v.with("source_sequence", `3.5`) }), status: 400, code: courier.CodeValidation, field: "source_sequence"},
			{name: "sequence with an exponent", build: body(func(v hostileValid) []byte { return v.with("source_sequence", `3e0`) }), status: 400, code: courier.CodeValidation, field: "source_sequence"},
			{name: "sequence negative", build: body(func(v hostileValid) []byte { return v.with("source_sequence", `-3`) }), status: 400, code: courier.CodeValidation, field: "source_sequence"},
			{name: "sequence zero", build: body(func(v hostileValid) []byte { return v.with("source_sequence", `0`) }), status: 400, code: courier.CodeValidation, field: "source_sequence"},
			{name: "sequence beyond int64", build: func(hostileValid) hostileRequest {
				n, body := hostileTerminal(func(n *ack.Terminal) { n.SourceSequence = "99999999999999999999" })
				return hostileRequest{id: n.NotificationID, body: body}
			}, status: 200, stored: 1, effects: 1, wantKey: "evt-1"},
			{name: "job count minus zero", build: body(func(v hostileValid) []byte { return v.with("job_count", `-0`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count 1e400", build: body(func(v hostileValid) []byte { return v.with("job_count", `1e400`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count zero", build: body(func(v hostileValid) []byte { return v.with("job_count", `0`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count is a string", build: body(func(v hostileValid) []byte { return v.with("job_count", `"2"`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count is a float", build: body(func(v hostileValid) []byte { return v.with("job_count", `2.5`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count with an exponent", build: body(func(v hostileValid) []byte { return v.with("job_count", `2e0`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count negative", build: body(func(v hostileValid) []byte { return v.with("job_count", `-2`) }), status: 400, code: courier.CodeValidation, field: "job_count"},
			{name: "job count beyond int64", build: func(hostileValid) hostileRequest {
				n, body := hostileTerminal(func(n *ack.Terminal) { n.JobCount = "99999999999999999999" })
				return hostileRequest{id: n.NotificationID, body: body}
			}, status: 200, stored: 1, effects: 1, wantKey: "evt-1"},
			{name: "site id is null", build: body(func(v hostileValid) []byte { return v.with("site_id", `null`) }), status: 400, code: courier.CodeValidation, field: "site_id"},
			{name: "site id is an object", build: body(func(v hostileValid) []byte { return v.with("site_id", `{"a":1}`) }), status: 400, code: courier.CodeValidation, field: "site_id"},
			{name: "missing site id", build: body(func(v hostileValid) []byte { return v.without("site_id") }), status: 400, code: courier.CodeValidation, field: "site_id"},
			{name: "missing lifecycle_sha256", build: body(func(v hostileValid) []byte { return v.without("lifecycle_sha256") }), status: 400, code: courier.CodeValidation, field: "lifecycle_sha256"},
			{name: "unknown status", build: body(func(v hostileValid) []byte { return v.with("terminal_status", `"exploded"`) }), status: 400, code: courier.CodeValidation, field: "terminal_status"},
			{name: "unknown member", build: body(func(v hostileValid) []byte { return v.with("extra", `1`) }), status: 400, code: courier.CodeValidation, field: "extra"},
			{name: "5000 unknown members", build: body(func(v hostileValid) []byte { return v.prepend(hostileManyUnknown()) }), status: 400, code: courier.CodeValidation, field: "u0"},
			{name: "unknown member with a long name", build: body(func(v hostileValid) []byte { return v.with(hostileLongName, `1`) }), status: 400, code: courier.CodeValidation, field: hostileLongNamePath},
			{name: "case-variant member", build: body(func(v hostileValid) []byte { return v.prepend(`"SITE_ID":"other"`) }), status: 400, code: courier.CodeValidation, field: "SITE_ID"},
			{name: "bad digest", build: body(func(v hostileValid) []byte { return v.with("change_sha256", `"`+strings.Repeat("G", 64)+`"`) }), status: 400, code: courier.CodeValidation, field: "change_sha256"},
			{name: "id not content-derived", build: body(func(v hostileValid) []byte {
				return v.with("notification_id", `"terminal-`+strings.Repeat("0", 64)+`"`)
			}), status: 400, code: courier.CodeValidation, field: "notification_id"},
			{name: "content changed under the id", build: body(func(v hostileValid) []byte { return v.with("job_count", `9`) }), status: 400, code: courier.CodeValidation, field: "notification_id"},
			{name: "webhook-id is another notification", build: func(v hostileValid) hostileRequest {
				other, _ := hostileTerminal(func(n *ack.Terminal) { n.EventID = "evt-other" })
				return hostileRequest{id: other.NotificationID, body: v.body}
			}, status: 400, code: courier.CodeValidation, field: "notification_id"},
			{name: "svix-id is another notification", build: func(v hostileValid) hostileRequest {
				other, _ := hostileTerminal(func(n *ack.Terminal) { n.EventID = "evt-other" })
				return hostileRequest{id: other.NotificationID, body: v.body, edit: svixBrand}
			}, status: 400, code: courier.CodeValidation, field: "notification_id"},
			// The identity is the canonical JSON: other bytes of the same
			// notification are a redelivery, answered from the Inbox.
			{name: "same notification, other bytes", prepare: accepted, build: body(func(v hostileValid) []byte { return append(bytes.Clone(v.body), ' ') }),
				status: 200},
			{name: "same notification, other order", prepare: accepted, build: body(func(v hostileValid) []byte {
				return hostileValid{body: v.without("website_version")}.prepend(`"website_version":"v1"`)
			}), status: 200},
			{name: "same notification, escaped", prepare: accepted, build: body(func(v hostileValid) []byte {
				return bytes.Replace(v.body, []byte(`"site-1"`), []byte(`"\u0073ite\u002d1"`), 1)
			}), status: 200},
			// It is keyed by its event: another one for the event collides.
			{name: "another notification for the event", prepare: accepted, build: func(hostileValid) hostileRequest {
				other, body := hostileTerminal(func(n *ack.Terminal) { n.JobCount = "9" })
				return hostileRequest{id: other.NotificationID, body: body}
			}, status: 409, code: courier.CodeIdempotencyCollision},
		},
	}
}

// hostileTerminal returns a valid terminal notification and its payload,
// edited by fn before its id is derived.
func hostileTerminal(fn func(*ack.Terminal)) (ack.Terminal, []byte) {
	lifecycle := ack.Digest([]byte("lifecycle"))
	n := ack.Terminal{
		EventID: "evt-1", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1",
		SourceSequence: "3", JobCount: "2", ChangeSHA256: ack.Digest([]byte("change")),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "published", LifecycleSHA256: &lifecycle,
	}
	fn(&n)
	n, err := ack.NewTerminal(n)
	if err != nil {
		panic(err)
	}
	p, err := n.Payload()
	if err != nil {
		panic(err)
	}
	return n, p
}

// --- Reporting ----------------------------------------------------------

const hostileIdempotencyKey = "whk_ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

func hostileReportingTarget() hostileTarget {
	return hostileTarget{
		name: "Reporting",
		open: func(t *testing.T, limits middleware.BodyLimits) *hostileEnv {
			s := hostileStore(t)
			key, err := signature.GenerateJWK("seller-key-1", signature.AlgEd25519)
			if err != nil {
				t.Fatal(err)
			}
			signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			server := hostileServeAt(t, func(origin string) http.Handler {
				verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: "seller.example", Keys: []signature.JWK{key.Public()}, Replay: s.Replay, Origin: origin})
				if err != nil {
					t.Fatal(err)
				}
				rcv, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: verifier, Body: limits}, hostileEffect[ack.Reporting])
				if err != nil {
					t.Fatal(err)
				}
				return rcv
			})
			return &hostileEnv{
				store: s, server: server, effects: "SELECT COUNT(*) FROM hostile_effects",
				sign: func(t *testing.T, r *http.Request, _ string, body []byte, _ bool, at time.Time) {
					t.Helper()
					if err := signer.Sign(r, signature.Message{Body: body, Time: at}); err != nil {
						t.Fatal(err)
					}
				},
			}
		},
		valid: func(*testing.T) hostileValid {
			return hostileValid{id: hostileIdempotencyKey, body: []byte(`{"idempotency_key":"` + hostileIdempotencyKey +
				`","operation_id":"op-1","task_id":"task-1","task_type":"media_buy_delivery","status":"completed","timestamp":"2026-01-02T03:04:05Z","result":{"a":1}}`)}
		},
		ok: http.StatusOK,
		sig: hostileSigCodes{
			header:     "Signature",
			missing:    courier.CodeWebhookHeaderMalformed,
			empty:      courier.CodeWebhookHeaderMalformed,
			oversized:  courier.CodeWebhookHeaderMalformed,
			truncated:  courier.CodeWebhookHeaderMalformed,
			duplicated: courier.CodeWebhookHeaderMalformed,
			mismatch:   courier.CodeWebhookDigestMismatch,
			stale:      courier.CodeWebhookWindowInvalid,
			replay:     http.StatusUnauthorized,
			replayCode: courier.CodeWebhookReplayed,
		},
		extras: []hostileCase{
			{name: "missing idempotency key", build: body(func(v hostileValid) []byte { return v.without("idempotency_key") }), status: 400, code: courier.CodeValidation, field: "idempotency_key"},
			{name: "short idempotency key", build: body(func(v hostileValid) []byte { return v.with("idempotency_key", `"whk_short"`) }), status: 400, code: courier.CodeValidation, field: "idempotency_key"},
			{name: "idempotency key with a space", build: body(func(v hostileValid) []byte { return v.with("idempotency_key", `"whk_ABCDEFGHIJKL MNOPQRSTUV"`) }), status: 400, code: courier.CodeValidation, field: "idempotency_key"},
			{name: "idempotency key is a number", build: body(func(v hostileValid) []byte { return v.with("idempotency_key", `12345678901234567890`) }), status: 400, code: courier.CodeValidation, field: "idempotency_key"},
			{name: "case-variant idempotency key", build: body(func(v hostileValid) []byte {
				return v.edit(func(m map[string]json.RawMessage) {
					m["IDEMPOTENCY_KEY"] = m["idempotency_key"]
					delete(m, "idempotency_key")
				})
			}), status: 400, code: courier.CodeValidation, field: "IDEMPOTENCY_KEY"},
			{name: "idempotency key twice, differing in case", build: body(func(v hostileValid) []byte {
				return append(bytes.Clone(v.body[:len(v.body)-1]), `,"Idempotency_Key":"whk_OTHEROTHEROTHEROTHER"}`...)
			}), status: 400, code: courier.CodeValidation, field: "Idempotency_Key"},
			{name: "unknown status", build: body(func(v hostileValid) []byte { return v.with("status", `"exploded"`) }), status: 400, code: courier.CodeValidation, field: "status"},
			{name: "timestamp not RFC 3339", build: body(func(v hostileValid) []byte { return v.with("timestamp", `"yesterday"`) }), status: 400, code: courier.CodeValidation, field: "timestamp"},
			{name: "missing task id", build: body(func(v hostileValid) []byte { return v.without("task_id") }), status: 400, code: courier.CodeValidation, field: "task_id"},
			// The token is the application's to check, its length too:
			// courier holds no token to check it against.
			{name: "short token", build: body(func(v hostileValid) []byte { return v.with("token", `"abc"`) }), status: 200, stored: 1, effects: 1},
			{name: "delivery report with a bad currency", build: body(func(v hostileValid) []byte {
				return v.with("result", `{"notification_type":"final","reporting_period":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z"},"currency":"usd","media_buy_deliveries":[]}`)
			}), status: 400, code: courier.CodeValidation, field: "result.currency"},
			{name: "delivery report with a sequence of 1e400", build: body(func(v hostileValid) []byte {
				return v.with("result", `{"notification_type":"final","sequence_number":1e400,"reporting_period":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z"},"currency":"USD","media_buy_deliveries":[]}`)
			}), status: 400, code: courier.CodeValidation, field: "result.sequence_number"},
			{name: "delivery report with a sequence of minus zero", build: body(func(v hostileValid) []byte {
				return v.with("result", `{"notification_type":"final","sequence_number":-0,"reporting_period":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z"},"currency":"USD","media_buy_deliveries":[]}`)
			}), status: 400, code: courier.CodeValidation, field: "result.sequence_number"},
			{name: "delivery report with a string sequence", build: body(func(v hostileValid) []byte {
				return v.with("result", `{"notification_type":"final","sequence_number":"1","reporting_period":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z"},"currency":"USD","media_buy_deliveries":[]}`)
			}), status: 400, code: courier.CodeValidation, field: "result.sequence_number"},
			{name: "same key, other body", prepare: accepted, build: body(func(v hostileValid) []byte { return v.with("task_id", `"task-2"`) }),
				status: 409, code: courier.CodeIdempotencyCollision},
			{name: "same key, re-serialized", prepare: accepted, build: body(func(v hostileValid) []byte { return v.edit(func(map[string]json.RawMessage) {}) }),
				status: 200},
		},
	}
}

// --- Source -------------------------------------------------------------

var hostileCapabilities = strings.Repeat("c", 64)

func hostileSourceTarget() hostileTarget {
	return hostileTarget{
		name: "Source",
		open: func(t *testing.T, limits middleware.BodyLimits) *hostileEnv {
			s := hostileStore(t)
			verifier, sign := hostileStandardWebhooks(t, "host")
			src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: hostileCapabilities, Body: limits}, hostileEffect[ack.Command])
			if err != nil {
				t.Fatal(err)
			}
			return &hostileEnv{
				store: s, server: hostileServe(t, src), effects: "SELECT COUNT(*) FROM hostile_effects", sign: sign,
				base: func(r *http.Request) { r.Header.Set(ack.AttemptHeader, "1") },
			}
		},
		valid: func(*testing.T) hostileValid {
			return hostileValid{id: "change:r1", body: hostileCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r1", SourceMaxAttempts: 2, CapabilitiesSHA256: hostileCapabilities, Body: json.RawMessage(`{"a":1}`)})}
		},
		ok:  http.StatusOK,
		sig: standardWebhooksCodes,
		extras: []hostileCase{
			{name: "no attempt header", build: header(ack.AttemptHeader, ""), status: 400, code: courier.CodeValidation, field: ack.AttemptHeader},
			{name: "attempt zero", build: header(ack.AttemptHeader, "0"), status: 400, code: courier.CodeValidation, field: ack.AttemptHeader},
			{name: "attempt not a number", build: header(ack.AttemptHeader, "1e3"), status: 400, code: courier.CodeValidation, field: ack.AttemptHeader},
			{name: "attempt over 1000", build: header(ack.AttemptHeader, "1001"), status: 400, code: courier.CodeValidation, field: ack.AttemptHeader},
			{name: "attempt beyond the budget", build: header(ack.AttemptHeader, "3"), status: 422, code: courier.CodeSourceAttemptsExhausted},
			// Two attempt lines name no one attempt: read as the first, a
			// request passed or failed the budget by which line came first.
			{name: "attempt header twice", build: func(v hostileValid) hostileRequest {
				return hostileRequest{body: v.body, edit: func(r *http.Request) { r.Header.Add(ack.AttemptHeader, "3") }}
			}, status: 400, code: courier.CodeValidation, field: ack.AttemptHeader},
			{name: "attempt header twice, the same", build: func(v hostileValid) hostileRequest {
				return hostileRequest{body: v.body, edit: func(r *http.Request) { r.Header.Add(ack.AttemptHeader, r.Header.Get(ack.AttemptHeader)) }}
			}, status: 400, code: courier.CodeValidation, field: ack.AttemptHeader},
			{name: "wrong schema", build: body(func(v hostileValid) []byte { return v.with("schema", `"courier.source-command.v2"`) }), status: 400, code: courier.CodeValidation, field: "schema"},
			{name: "unknown operation", build: body(func(v hostileValid) []byte { return v.with("operation", `"explode"`) }), status: 400, code: courier.CodeValidation, field: "operation"},
			{name: "budget is a float", build: body(func(v hostileValid) []byte { return v.with("source_max_attempts", `1.5`) }), status: 400, code: courier.CodeValidation, field: "source_max_attempts"},
			{name: "budget is a string", build: body(func(v hostileValid) []byte { return v.with("source_max_attempts", `"2"`) }), status: 400, code: courier.CodeValidation, field: "source_max_attempts"},
			{name: "budget over the maximum", build: body(func(v hostileValid) []byte { return v.with("source_max_attempts", `21`) }), status: 400, code: courier.CodeValidation, field: "source_max_attempts"},
			{name: "budget minus zero", build: body(func(v hostileValid) []byte { return v.with("source_max_attempts", `-0`) }), status: 400, code: courier.CodeValidation, field: "source_max_attempts"},
			{name: "budget 1e400", build: body(func(v hostileValid) []byte { return v.with("source_max_attempts", `1e400`) }), status: 400, code: courier.CodeValidation, field: "source_max_attempts"},
			{name: "budget 1e0", build: body(func(v hostileValid) []byte { return v.with("source_max_attempts", `1e0`) }), status: 400, code: courier.CodeValidation, field: "source_max_attempts"},
			{name: "change with a null body", build: body(func(v hostileValid) []byte { return v.with("body", `null`) }), status: 400, code: courier.CodeValidation, field: "body"},
			{name: "missing body", build: body(func(v hostileValid) []byte { return v.without("body") }), status: 400, code: courier.CodeValidation, field: "body"},
			{name: "unknown member", build: body(func(v hostileValid) []byte { return v.with("x", `1`) }), status: 400, code: courier.CodeValidation, field: "x"},
			{name: "5000 unknown members", build: body(func(v hostileValid) []byte { return v.prepend(hostileManyUnknown()) }), status: 400, code: courier.CodeValidation, field: "u0"},
			{name: "unknown member with a long name", build: body(func(v hostileValid) []byte { return v.with(hostileLongName, `1`) }), status: 400, code: courier.CodeValidation, field: hostileLongNamePath},
			{name: "case-variant member", build: body(func(v hostileValid) []byte { return v.prepend(`"Request_ID":"r2"`) }), status: 400, code: courier.CodeValidation, field: "Request_ID"},
			{name: "other contract", build: body(func(v hostileValid) []byte { return v.with("capabilities_sha256", `"`+strings.Repeat("f", 64)+`"`) }), status: 409, code: courier.CodeContractChanged},
			{name: "webhook-id is another command", build: func(v hostileValid) hostileRequest { return hostileRequest{id: "change:r2", body: v.body} },
				status: 400, code: courier.CodeValidation, field: "notification_id"},
			{name: "svix-id is another command", build: func(v hostileValid) hostileRequest {
				return hostileRequest{id: "change:r2", body: v.body, edit: svixBrand}
			}, status: 400, code: courier.CodeValidation, field: "notification_id"},
			{name: "same identity, other body", prepare: accepted, build: body(func(v hostileValid) []byte { return v.with("body", `{"a":2}`) }),
				status: 409, code: courier.CodeIdempotencyCollision},
		},
	}
}

func hostileCommand(c ack.Command) []byte {
	c, err := ack.NewCommand(c)
	if err != nil {
		panic(err)
	}
	b, err := c.Payload()
	if err != nil {
		panic(err)
	}
	return b
}

// --- Publish ------------------------------------------------------------

const hostilePublishToken = "publisher-token-0123456789abcdefghijklmnop"

func hostilePublishTarget() hostileTarget {
	return hostileTarget{
		name: "Publish",
		open: func(t *testing.T, limits middleware.BodyLimits) *hostileEnv {
			s := hostileStore(t)
			token, err := signature.ParseSecret("orders-service", hostilePublishToken)
			if err != nil {
				t.Fatal(err)
			}
			verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "orders-service", Tokens: []signature.Secret{token}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: verifier, Authorize: allowPublish, Body: limits})
			if err != nil {
				t.Fatal(err)
			}
			return &hostileEnv{
				store: s, server: hostileServe(t, p), effects: "SELECT COUNT(*) FROM courier_outbox",
				base: func(r *http.Request) { r.Header.Set("Idempotency-Key", "req-0001") },
				sign: func(_ *testing.T, r *http.Request, _ string, _ []byte, tampered bool, _ time.Time) {
					token := hostilePublishToken
					if tampered {
						token = "another-token-0123456789abcdefghijklmnopq" // "signed" other bytes: a wrong token
					}
					r.Header.Set("Authorization", "Bearer "+token)
				},
			}
		},
		valid: func(*testing.T) hostileValid {
			return hostileValid{id: "n-1", body: hostilePublishSigned}
		},
		ok: http.StatusAccepted,
		sig: hostileSigCodes{
			header:     "Authorization",
			missing:    courier.CodeSignatureMissing,
			empty:      courier.CodeSignatureMissing,
			oversized:  courier.CodeSignatureMalformed,
			truncated:  courier.CodeSignatureMismatch,
			duplicated: courier.CodeSignatureMalformed,
			mismatch:   courier.CodeSignatureMismatch,
			replay:     http.StatusAccepted, // the same Idempotency-Key and body: the same answer
		},
		extras: []hostileCase{
			{name: "bad idempotency key", build: header("Idempotency-Key", "a b"), status: 400, code: courier.CodeValidation},
			{name: "idempotency key twice", build: func(v hostileValid) hostileRequest {
				return hostileRequest{body: v.body, edit: func(r *http.Request) { r.Header.Add("Idempotency-Key", "req-0002") }}
			}, status: 400, code: courier.CodeValidation},
			{name: "idempotency key too long", build: header("Idempotency-Key", strings.Repeat("k", 257)), status: 400, code: courier.CodeValidation},
			{name: "missing payload", build: body(func(v hostileValid) []byte { return v.without("payload") }), status: 400, code: courier.CodeValidation, field: "payload"},
			{name: "null payload", build: body(func(v hostileValid) []byte { return v.with("payload", `null`) }), status: 400, code: courier.CodeValidation, field: "payload"},
			{name: "payload an array", build: body(func(v hostileValid) []byte { return v.with("payload", `[1]`) }), status: 400, code: courier.CodeValidation, field: "payload"},
			{name: "payload a string", build: body(func(v hostileValid) []byte { return v.with("payload", `"{}"`) }), status: 400, code: courier.CodeValidation, field: "payload"},
			{name: "payload with a huge number", build: body(func(v hostileValid) []byte { return v.with("payload", `{"a":1e400}`) }), status: 400, code: courier.CodeValidation, field: "payload"},
			{name: "both targets", build: body(func(v hostileValid) []byte { return v.with("tenant", `"acme"`) }), status: 400, code: courier.CodeValidation},
			{name: "endpoint not a URL", build: body(func(v hostileValid) []byte { return v.with("endpoint", `"not a url"`) }), status: 400, code: courier.CodeValidation, field: "endpoint"},
			{name: "endpoint a number", build: body(func(v hostileValid) []byte { return v.with("endpoint", `7`) }), status: 400, code: courier.CodeValidation, field: "endpoint"},
			{name: "notification id with a space", build: body(func(v hostileValid) []byte { return v.with("notification_id", `"n 1"`) }), status: 400, code: courier.CodeValidation, field: "notification_id"},
			{name: "tenant without an event", build: body(func(v hostileValid) []byte {
				return v.edit(func(m map[string]json.RawMessage) {
					delete(m, "endpoint")
					delete(m, "notification_id")
					m["tenant"] = json.RawMessage(`"acme"`)
				})
			}), status: 400, code: courier.CodeValidation, field: "event_type"},
			{name: "unknown member", build: body(func(v hostileValid) []byte { return v.with("x", `1`) }), status: 400, code: courier.CodeValidation, field: "x"},
			{name: "5000 unknown members", build: body(func(v hostileValid) []byte { return v.prepend(hostileManyUnknown()) }), status: 400, code: courier.CodeValidation, field: "u0"},
			{name: "unknown member with a long name", build: body(func(v hostileValid) []byte { return v.with(hostileLongName, `1`) }), status: 400, code: courier.CodeValidation, field: hostileLongNamePath},
			{name: "case-variant payload", build: body(func(v hostileValid) []byte {
				return v.edit(func(m map[string]json.RawMessage) { m["PAYLOAD"] = m["payload"]; delete(m, "payload") })
			}), status: 400, code: courier.CodeValidation, field: "PAYLOAD"},
			{name: "payload twice, differing in case", build: body(func(v hostileValid) []byte {
				return append(bytes.Clone(v.body[:len(v.body)-1]), `,"PAYLOAD":{"evil":true}}`...)
			}), status: 400, code: courier.CodeValidation, field: "PAYLOAD"},
			{name: "same key, other body", prepare: accepted, build: body(func(v hostileValid) []byte { return v.with("payload", `{"a":2}`) }),
				status: 409, code: courier.CodeIdempotencyCollision},
			{name: "same notification, other payload", prepare: accepted, build: func(v hostileValid) hostileRequest {
				return hostileRequest{body: v.with("payload", `{"a":2}`), edit: func(r *http.Request) { r.Header.Del("Idempotency-Key") }}
			}, status: 409, code: courier.CodeIdempotencyCollision},
		},
	}
}

// hostilePublishSigned is the valid publish body.
var hostilePublishSigned = []byte(`{"endpoint":"https://x.example/h","notification_id":"n-1","payload":{"a":1}}`)

// --- Cases every receiver gets ------------------------------------------

// body builds a case that sends the bytes fn returns, correctly signed.
func body(fn func(v hostileValid) []byte) func(hostileValid) hostileRequest {
	return func(v hostileValid) hostileRequest { return hostileRequest{body: fn(v)} }
}

// raw builds a case that sends b, correctly signed.
func raw(b string) func(hostileValid) hostileRequest {
	return func(hostileValid) hostileRequest { return hostileRequest{body: []byte(b)} }
}

// header builds a case that sends the valid body with header name set to
// value (deleted when empty).
func header(name, value string) func(hostileValid) hostileRequest {
	return func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, edit: func(r *http.Request) {
			if value == "" {
				r.Header.Del(name)
				return
			}
			r.Header.Set(name, value)
		}}
	}
}

// accepted is a prepare step: the valid delivery, accepted once.
func accepted(t *testing.T, e *hostileEnv, v hostileValid) {
	t.Helper()
	ok := http.StatusOK
	if e.effects == "SELECT COUNT(*) FROM courier_outbox" {
		ok = http.StatusAccepted
	}
	e.accept(t, v, ok)
}

func hostileCommonCases(target hostileTarget) []hostileCase {
	var cases []hostileCase
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions} {
		cases = append(cases, hostileCase{name: "method " + m, build: func(v hostileValid) hostileRequest { return hostileRequest{method: m, body: v.body} },
			status: 405, code: courier.CodeMethodNotAllowed})
	}
	for _, ct := range []struct{ name, value string }{
		{"no content type", ""},
		{"text/plain", "text/plain"},
		{"application/xml", "application/xml"},
		{"multipart", "multipart/form-data; boundary=xyz"},
		{"latin-1 JSON", "application/json; charset=latin1"},
		{"garbage media type", "}}{{;;=="},
		{"json suffix type", "application/problem+json"},
		{"two media types", "application/json, text/plain"},
	} {
		cases = append(cases, hostileCase{name: "content type " + ct.name, build: header("Content-Type", ct.value),
			status: 415, code: courier.CodeUnsupportedMediaType})
	}
	// Content-Type is a singleton: two field lines are one list of media
	// types, as "two media types" above sends on one line. The second line
	// is added after signing, so that a signature covering the field is
	// not what refuses the request.
	for _, second := range []string{"text/plain", "application/json", ""} {
		cases = append(cases, hostileCase{name: "content type twice, then " + cmp(second, "empty"), build: func(v hostileValid) hostileRequest {
			return hostileRequest{body: v.body, edit: func(r *http.Request) { r.Header.Add("Content-Type", second) }}
		}, status: 415, code: courier.CodeUnsupportedMediaType})
	}
	padded := func(b []byte, n int) []byte { return append(bytes.Clone(b), bytes.Repeat([]byte(" "), n-len(b))...) }
	over := func(v hostileValid) []byte { return padded(v.body, hostileMaxBody+1) }
	cases = append(cases,
		hostileCase{name: "empty body", build: raw(""), status: 400, code: courier.CodeMalformedJSON},
		hostileCase{name: "whitespace body", build: raw(" \r\n\t"), status: 400, code: courier.CodeMalformedJSON},
		hostileCase{name: "malformed at exactly the limit", build: func(hostileValid) hostileRequest {
			return hostileRequest{body: padded([]byte("{"), hostileMaxBody)}
		}, status: 400, code: courier.CodeMalformedJSON},
		hostileCase{name: "valid at exactly the limit", build: body(func(v hostileValid) []byte { return padded(v.body, hostileMaxBody) }),
			status: target.ok, stored: 1, effects: 1},
		hostileCase{name: "one over the limit", build: body(over), status: 413, code: courier.CodeBodyTooLarge},
		hostileCase{name: "one over the limit, no Content-Length", build: func(v hostileValid) hostileRequest {
			return hostileRequest{body: over(v), edit: func(r *http.Request) {
				r.ContentLength = -1
				r.Body = io.NopCloser(bytes.NewReader(over(v))) // no GetBody: the client cannot know the length
				r.GetBody = nil
			}}
		}, status: 413, code: courier.CodeBodyTooLarge},
		hostileCase{name: "chunked, far over the limit", build: func(v hostileValid) hostileRequest {
			big := padded(v.body, 4*hostileMaxBody)
			return hostileRequest{body: big, edit: func(r *http.Request) {
				r.ContentLength = -1
				r.TransferEncoding = []string{"chunked"}
				r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(big)))
				r.GetBody = nil
			}}
		}, status: 413, code: courier.CodeBodyTooLarge},
	)
	sig := target.sig
	sigCase := func(name string, code courier.Code, build func(v hostileValid) hostileRequest) {
		if code != "" {
			cases = append(cases, hostileCase{name: name, build: build, status: 401, code: code})
		}
	}
	sigCase("signature header missing", sig.missing, header(sig.header, ""))
	sigCase("signature header empty", sig.empty, func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, edit: func(r *http.Request) { r.Header[http.CanonicalHeaderKey(sig.header)] = []string{""} }}
	})
	sigCase("signature header of 64 KiB", sig.oversized, func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, edit: func(r *http.Request) {
			h := r.Header.Get(sig.header)
			r.Header.Set(sig.header, h+strings.Repeat("A", 64<<10-len(h)))
		}}
	})
	sigCase("signature header truncated", sig.truncated, func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, edit: func(r *http.Request) {
			h := r.Header.Get(sig.header)
			r.Header.Set(sig.header, h[:len(h)/2])
		}}
	})
	sigCase("signature header twice", sig.duplicated, func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, edit: func(r *http.Request) { r.Header.Add(sig.header, r.Header.Get(sig.header)) }}
	})
	sigCase("signature over other bytes", sig.mismatch, func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, signed: append(bytes.Clone(v.body), ' ')}
	})
	sigCase("stale signature", sig.stale, func(v hostileValid) hostileRequest {
		return hostileRequest{body: v.body, at: -10 * time.Minute}
	})
	cases = append(cases,
		hostileCase{name: "unsigned", build: func(v hostileValid) hostileRequest { return hostileRequest{body: v.body, unsigned: true} },
			status: 401, code: sig.missing},
		hostileCase{name: "replayed request", prepare: accepted, build: func(hostileValid) hostileRequest { return hostileRequest{replay: true} },
			status: sig.replay, code: sig.replayCode},
	)

	malformed := func(name string, build func(v hostileValid) hostileRequest) {
		cases = append(cases, hostileCase{name: name, build: build, status: 400, code: courier.CodeMalformedJSON})
	}
	malformed("truncated JSON", body(func(v hostileValid) []byte { return v.body[:len(v.body)-3] }))
	malformed("truncated inside a string", body(func(v hostileValid) []byte { return v.body[:4] }))
	malformed("trailing garbage", body(func(v hostileValid) []byte { return append(bytes.Clone(v.body), "garbage"...) }))
	malformed("a second document", body(func(v hostileValid) []byte { return append(bytes.Clone(v.body), "{}"...) }))
	malformed("NaN", body(func(v hostileValid) []byte { return v.prepend(`"nan":NaN`) }))
	malformed("Infinity", body(func(v hostileValid) []byte { return v.prepend(`"inf":-Infinity`) }))
	malformed("single quotes", body(func(v hostileValid) []byte { return bytes.ReplaceAll(v.body, []byte(`"`), []byte(`'`)) }))
	malformed("trailing comma", body(func(v hostileValid) []byte { return append(bytes.Clone(v.body[:len(v.body)-1]), ",}"...) }))
	malformed("a comment", body(func(v hostileValid) []byte { return append([]byte("/* c */"), v.body...) }))
	malformed("byte order mark", body(func(v hostileValid) []byte { return append([]byte("\xef\xbb\xbf"), v.body...) }))
	malformed("leading zero", body(func(v hostileValid) []byte { return v.prepend(`"n":01`) }))
	malformed("hex number", body(func(v hostileValid) []byte { return v.prepend(`"n":0x10`) }))
	malformed("10,000 nested objects", raw(strings.Repeat(`{"a":`, 10_000)+"1"+strings.Repeat("}", 10_000)))
	malformed("10,000 nested arrays", raw(strings.Repeat("[", 10_000)+strings.Repeat("]", 10_000)))
	malformed("nested 101 deep in a member", body(func(v hostileValid) []byte {
		return v.prepend(`"deep":` + strings.Repeat("[", strictjson.MaxDepth) + strings.Repeat("]", strictjson.MaxDepth))
	}))
	malformed("non-UTF-8 in a string", body(func(v hostileValid) []byte { return v.prepend("\"x\":\"\xff\xfe\"") }))
	malformed("non-UTF-8 in a key", body(func(v hostileValid) []byte { return v.prepend("\"\xc3\x28\":1") }))
	malformed("overlong UTF-8", body(func(v hostileValid) []byte { return v.prepend("\"x\":\"\xc0\xaf\"") }))
	malformed("UTF-8 surrogate bytes", body(func(v hostileValid) []byte { return v.prepend("\"x\":\"\xed\xa0\x80\"") }))
	malformed("lone high surrogate", body(func(v hostileValid) []byte { return v.prepend(`"x":"\ud800"`) }))
	malformed("lone low surrogate", body(func(v hostileValid) []byte { return v.prepend(`"x":"\udc00"`) }))
	malformed("high surrogate before a letter", body(func(v hostileValid) []byte { return v.prepend(`"x":"\ud800\u0041"`) }))
	malformed("raw control character", body(func(v hostileValid) []byte { return v.prepend("\"x\":\"a\nb\"") }))
	malformed("invalid escape", body(func(v hostileValid) []byte { return v.prepend(`"x":"\x41"`) }))
	malformed("short unicode escape", body(func(v hostileValid) []byte { return v.prepend(`"x":"\u12"`) }))
	malformed("signed unicode escape", body(func(v hostileValid) []byte { return v.prepend(`"x":"\u+123"`) }))

	dup := func(name string, build func(v hostileValid) hostileRequest) {
		cases = append(cases, hostileCase{name: name, build: build, status: 400, code: courier.CodeDuplicateKey})
	}
	dup("duplicate top-level key", body(func(v hostileValid) []byte {
		first := string(v.body[1 : bytes.IndexByte(v.body[2:], '"')+3]) // the body's first key, quoted
		return v.prepend(first + `:"x"`)
	}))
	dup("duplicate nested key", body(func(v hostileValid) []byte { return v.prepend(`"nested":{"a":1,"b":[{"c":1,"c":2}]}`) }))
	dup("duplicate key at the deepest level", body(func(v hostileValid) []byte {
		wrap := strictjson.MaxDepth - 2 // the body, then the wrappers, then the object with the duplicate
		return v.prepend(`"deep":` + strings.Repeat(`{"a":`, wrap) + `{"k":1,"k":2}` + strings.Repeat("}", wrap))
	}))
	dup("duplicate key by escape", body(func(v hostileValid) []byte { return v.prepend(`"nested":{"a":1,"\u0061":2}`) }))
	dup("duplicate key in a large object", body(func(v hostileValid) []byte {
		var b strings.Builder
		b.WriteString(`"nested":{`)
		for i := range 40 {
			b.WriteString(`"k` + strconv.Itoa(i) + `":1,`)
		}
		b.WriteString(`"k0":2}`)
		return v.prepend(b.String())
	}))
	for _, doc := range []struct{ name, body string }{
		{"top-level array", `[]`}, {"top-level string", `"x"`}, {"top-level null", `null`},
		{"top-level number", `7`}, {"top-level true", `true`}, {"empty object", `{}`},
	} {
		cases = append(cases, hostileCase{name: doc.name, build: raw(doc.body), status: 400, code: courier.CodeValidation})
	}
	return cases
}

package handler_test

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/codetest"
	"github.com/courier-go/courier/internal/rawhttp"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The receivers fuzzed end to end: each target serves one receiver over
// real HTTP on one SQLite file store, opened once per fuzz process and
// kept across inputs, and sends each input as a raw HTTP/1.1 request:
// a body signed correctly, then mutated on the way (method, Content-Type,
// Content-Encoding, Content-Length, the signature's headers). Whatever
// arrives, the receiver must answer as the package promises:
//
//   - 2xx only for a valid notification that arrived as it was signed;
//   - otherwise a 4xx or 5xx problem+json body whose code is courier's,
//     the one the Hook reports, with no Inbox record and no effect written;
//   - an accepted request sent again gets the same answer byte for byte,
//     and the application's function never runs twice for one key.

// fuzzInput is one fuzz input: the body, and how the request carrying it
// departs from a valid one.
type fuzzInput struct {
	body []byte
	// method picks from fuzzMethods; POST is 0.
	method uint8
	// contentType is sent as the Content-Type; "" sends none.
	contentType string
	// contentEncoding is sent as Content-Encoding when not "".
	contentEncoding string
	// framing picks how the body is framed (see fuzzFraming*); short cuts
	// a Content-Length that lies.
	framing, short uint8
	// twice sends a header a second time: bit 0 the signature's, bit 1
	// the id's, bit 2 the timestamp's, bit 3 Content-Type.
	twice uint8
	// skew is the signing time, in seconds from now.
	skew int32
	// Splices into the id, timestamp and signature headers after signing:
	// at pos (modulo the length), cut bytes removed, ins inserted.
	idPos, tsPos, sigPos uint16
	idCut, tsCut, sigCut uint8
	idIns, tsIns, sigIns string
	extra                string // Source: the attempt header; Publish: Idempotency-Key
}

// fuzzToken is a courier token: an Idempotency-Key's form.
var fuzzToken = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,256}$`)

var fuzzMethods = []string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodHead, http.MethodDelete, http.MethodPatch, http.MethodOptions, "post", "PROPFIND"}

// Framings of the body.
const (
	fuzzFramingLength  = iota // Content-Length, exact
	fuzzFramingChunked        // Transfer-Encoding: chunked
	fuzzFramingShort          // a Content-Length short of the body
	fuzzFramingLong           // a Content-Length past the body, then EOF
	fuzzFramingNone           // neither: an empty body to net/http
	fuzzFramings
)

// fuzzRig is one receiver under fuzz, and what the fuzz function needs to
// sign for it and judge its answers.
type fuzzRig struct {
	store *store.Store
	srv   *rawhttp.Server
	addr  string // host:port of the server
	codes map[courier.Code]bool

	// events gets each answered request's Event. The Hook runs when the
	// handler returns, which for a refusal that lingers over the rest of
	// the body is after the answer went out: it is waited for.
	events chan handler.Event

	// effects counts the application's effects; keyEffects those of one key.
	effects, keyEffects string
	// sign signs h for a request of method to the server carrying body,
	// as the message id (Standard Webhooks) at the time at.
	sign func(h http.Header, method, id string, body []byte, at time.Time) error
	// sigHeader, idHeader and tsHeader name the headers the scheme signs
	// by; idHeader and tsHeader are "" where it has none.
	sigHeader, idHeader, tsHeader string
	// sigCore is what of the signature header a request must keep to be
	// valid (Standard Webhooks takes any one matching signature of a list).
	sigCore func(v string) string
	// sureSkew says whether a signature made skew seconds from now is
	// surely valid or surely not; either is fine in between.
	sureSkew func(skew int32) (valid, sure bool)
	// id is the message id body is signed as; key is the key the
	// application's effect is recorded under, "" when it has none; valid
	// says whether body is a notification to accept, given the extra
	// header.
	id, key func(body []byte) string
	valid   func(body []byte, extra string) bool
	// resign: a request sent again must be signed anew (a nonce).
	resign bool
	// bearer: the scheme signs no body (a Bearer token), so the bytes
	// that arrive are judged, whatever was meant to be sent.
	bearer bool
	// extraHeader carries the input's extra, when the receiver has one.
	extraHeader string
}

func (rg *fuzzRig) hook(e handler.Event) {
	select {
	case rg.events <- e:
	default: // a backlog: lastEvent finds the wrong Event first
	}
}

// newFuzzRig returns a rig on a fresh store, whose application records its
// effects as effects counts them, and keyEffects those of one key.
func newFuzzRig(f *testing.F, effects, keyEffects string) *fuzzRig {
	f.Helper()
	return &fuzzRig{store: fuzzStore(f), codes: codetest.Set(f), effects: effects, keyEffects: keyEffects, events: make(chan handler.Event, 8)}
}

// noPanic fails t if the handler panicked.
func (rg *fuzzRig) noPanic(t *testing.T) { rg.srv.NoPanic(t) }

// lastEvent returns the Event of the request just answered.
func (rg *fuzzRig) lastEvent(t *testing.T) handler.Event {
	t.Helper()
	select {
	case e := <-rg.events:
		rg.noPanic(t)
		return e
	case <-time.After(10 * time.Second):
	}
	rg.noPanic(t)
	t.Fatal("no Event reported for the request answered")
	return handler.Event{}
}

func (rg *fuzzRig) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := rg.store.DB().Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// fuzzStore opens the fuzz process's store, with an effect table.
func fuzzStore(f *testing.F) *store.Store {
	f.Helper()
	s, err := sqlite.Open(f.Context(), filepath.Join(f.TempDir(), "fuzz.db"), store.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	if _, err := s.DB().Exec("CREATE TABLE hostile_effects (id TEXT NOT NULL)"); err != nil {
		f.Fatal(err)
	}
	return s
}

// serve starts the server for the handler build makes, given its origin.
func (rg *fuzzRig) serve(f *testing.F, build func(origin string) http.Handler) {
	f.Helper()
	rg.srv = rawhttp.Serve(f, build)
	rg.addr = rg.srv.Addr
}

// standardWebhooksRig fills in what signing with Standard Webhooks needs.
func standardWebhooksRig(f *testing.F, rg *fuzzRig, sender string) signature.Verifier {
	f.Helper()
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		f.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		f.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		f.Fatal(err)
	}
	rg.sign = func(h http.Header, _, id string, body []byte, at time.Time) error {
		r := &http.Request{Header: h, URL: &url.URL{Scheme: "http", Host: rg.addr, Path: "/hooks"}}
		return signer.Sign(r, signature.Message{ID: id, Body: body, Time: at})
	}
	rg.sigHeader, rg.idHeader, rg.tsHeader = "webhook-signature", "webhook-id", "webhook-timestamp"
	rg.sigCore = func(v string) string { return v }
	rg.sureSkew = func(skew int32) (bool, bool) {
		switch a := abs32(skew); {
		case a <= 280:
			return true, true
		case a >= 320:
			return false, true
		}
		return false, false
	}
	return verifier
}

func abs32(v int32) int64 {
	if v < 0 {
		return -int64(v)
	}
	return int64(v)
}

// member returns body's top-level member name as a string, or "".
func member(body []byte, name string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[name], &s) != nil {
		return ""
	}
	return s
}

// --- The targets --------------------------------------------------------

// fuzzTerminalRig serves a Receiver[ack.Terminal].
func fuzzTerminalRig(f *testing.F) *fuzzRig {
	rg := newFuzzRig(f, "SELECT COUNT(*) FROM hostile_effects", "SELECT COUNT(*) FROM hostile_effects WHERE id = ?")
	verifier := standardWebhooksRig(f, rg, "cms-host")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: rg.store, Verifier: verifier, Body: middleware.BodyLimits{MaxBytes: hostileMaxBody}, Hook: rg.hook}, hostileEffect[ack.Terminal])
	if err != nil {
		f.Fatal(err)
	}
	rg.serve(f, func(string) http.Handler { return rcv })
	rg.id = func(body []byte) string { return member(body, "notification_id") }
	rg.key = func(body []byte) string { return member(body, "event_id") }
	rg.valid = func(body []byte, _ string) bool {
		var n ack.Terminal
		return fuzzStrict(body, &n) && n.Check() == nil
	}
	return rg
}

// fuzzStrict reports whether body is one JSON document that decodes into
// v with no member unknown to it.
func fuzzStrict(body []byte, v any) bool {
	if !json.Valid(body) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil
}

func FuzzTerminalReceiver(f *testing.F) {
	rg := fuzzTerminalRig(f)
	_, valid := hostileTerminal(func(*ack.Terminal) {})
	_, cancelled := hostileTerminal(func(n *ack.Terminal) { n.EventID, n.TerminalStatus, n.LifecycleSHA256 = "evt-2", "cancelled", nil })
	fuzzSeeds(f, [][]byte{valid, cancelled}, "")
	f.Fuzz(func(t *testing.T, body []byte, method uint8, contentType, contentEncoding string, framing, short, twice uint8, skew int32,
		idPos uint16, idCut uint8, idIns string, tsPos uint16, tsCut uint8, tsIns string, sigPos uint16, sigCut uint8, sigIns string, extra string) {
		rg.check(t, fuzzInput{body, method, contentType, contentEncoding, framing, short, twice, skew, idPos, tsPos, sigPos, idCut, tsCut, sigCut, idIns, tsIns, sigIns, extra})
	})
}

// fuzzReportingRig serves a Reporting receiver, signed with RFC 9421.
func fuzzReportingRig(f *testing.F) *fuzzRig {
	rg := newFuzzRig(f, "SELECT COUNT(*) FROM hostile_effects", "SELECT COUNT(*) FROM hostile_effects WHERE id = ?")
	rg.resign = true
	key, err := signature.GenerateJWK("seller-key-1", signature.AlgEd25519)
	if err != nil {
		f.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		f.Fatal(err)
	}
	rg.serve(f, func(origin string) http.Handler {
		verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: "seller.example", Keys: []signature.JWK{key.Public()}, Replay: rg.store.Replay, Origin: origin})
		if err != nil {
			f.Fatal(err)
		}
		rcv, err := handler.NewReporting(handler.ReportingConfig{Store: rg.store, Verifier: verifier, Body: middleware.BodyLimits{MaxBytes: hostileMaxBody}, Hook: rg.hook}, hostileEffect[ack.Reporting])
		if err != nil {
			f.Fatal(err)
		}
		return rcv
	})
	rg.sign = func(h http.Header, method, _ string, body []byte, at time.Time) error {
		r := &http.Request{Method: method, Header: h, URL: &url.URL{Scheme: "http", Host: rg.addr, Path: "/hooks"}, Host: rg.addr}
		return signer.Sign(r, signature.Message{Body: body, Time: at})
	}
	rg.sigHeader, rg.tsHeader = "Signature", "Signature-Input"
	rg.sigCore = func(v string) string { return v }
	rg.sureSkew = func(skew int32) (bool, bool) {
		switch {
		case skew <= 0 && skew >= -200:
			return true, true
		case abs32(skew) >= 700:
			return false, true
		}
		return false, false
	}
	rg.id = func([]byte) string { return "" }
	rg.key = func(body []byte) string { return member(body, "idempotency_key") }
	rg.valid = func(body []byte, _ string) bool {
		var n ack.Reporting
		return json.Valid(body) && json.Unmarshal(body, &n) == nil && n.Check() == nil
	}
	return rg
}

func FuzzReportingReceiver(f *testing.F) {
	rg := fuzzReportingRig(f)
	valid := []byte(`{"idempotency_key":"` + hostileIdempotencyKey + `","operation_id":"op-1","task_id":"task-1","task_type":"media_buy_delivery","status":"completed","timestamp":"2026-01-02T03:04:05Z","result":{"a":1}}`)
	report := []byte(`{"idempotency_key":"whk_REPORTREPORTREPORT01","operation_id":"op-2","task_id":"task-2","task_type":"media_buy_delivery","status":"working","timestamp":"2026-01-02T03:04:05Z",` +
		`"result":{"notification_type":"final","sequence_number":1,"reporting_period":{"start":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z"},"currency":"USD","media_buy_deliveries":[]}}`)
	fuzzSeeds(f, [][]byte{valid, report}, "")
	f.Fuzz(func(t *testing.T, body []byte, method uint8, contentType, contentEncoding string, framing, short, twice uint8, skew int32,
		idPos uint16, idCut uint8, idIns string, tsPos uint16, tsCut uint8, tsIns string, sigPos uint16, sigCut uint8, sigIns string, extra string) {
		rg.check(t, fuzzInput{body, method, contentType, contentEncoding, framing, short, twice, skew, idPos, tsPos, sigPos, idCut, tsCut, sigCut, idIns, tsIns, sigIns, extra})
	})
}

// fuzzSourceRig serves a Source.
func fuzzSourceRig(f *testing.F) *fuzzRig {
	rg := newFuzzRig(f, "SELECT COUNT(*) FROM hostile_effects", "SELECT COUNT(*) FROM hostile_effects WHERE id = ?")
	rg.extraHeader = ack.AttemptHeader
	verifier := standardWebhooksRig(f, rg, "host")
	src, err := handler.NewSource(handler.SourceConfig{Store: rg.store, Verifier: verifier, CapabilitiesSHA256: hostileCapabilities, Body: middleware.BodyLimits{MaxBytes: hostileMaxBody}, Hook: rg.hook}, hostileEffect[ack.Command])
	if err != nil {
		f.Fatal(err)
	}
	rg.serve(f, func(string) http.Handler { return src })
	rg.id = func(body []byte) string { return member(body, "operation") + ":" + member(body, "request_id") }
	rg.key = rg.id
	rg.valid = func(body []byte, attempt string) bool {
		var c ack.Command
		n, err := strconv.Atoi(attempt)
		if err != nil || n < 1 || n > 1000 || strconv.Itoa(n) != attempt || !fuzzStrict(body, &c) || c.Check() != nil {
			return false
		}
		// A command applied before is answered from its record, whatever
		// the attempt; a new one only within its budget and contract.
		var known int
		if err := rg.store.DB().Get(&known, "SELECT COUNT(*) FROM courier_inbox WHERE dedupe_key = ?", c.DedupeKey()); err != nil {
			panic(err)
		}
		return known > 0 || n <= c.SourceMaxAttempts && c.CapabilitiesSHA256 == hostileCapabilities
	}
	return rg
}

func FuzzSourceReceiver(f *testing.F) {
	rg := fuzzSourceRig(f)
	change := hostileCommand(ack.Command{Operation: ack.OperationChange, RequestID: "r1", SourceMaxAttempts: 2, CapabilitiesSHA256: hostileCapabilities, Body: json.RawMessage(`{"a":1}`)})
	fuzzSeeds(f, [][]byte{change}, "1")
	f.Fuzz(func(t *testing.T, body []byte, method uint8, contentType, contentEncoding string, framing, short, twice uint8, skew int32,
		idPos uint16, idCut uint8, idIns string, tsPos uint16, tsCut uint8, tsIns string, sigPos uint16, sigCut uint8, sigIns string, extra string) {
		rg.check(t, fuzzInput{body, method, contentType, contentEncoding, framing, short, twice, skew, idPos, tsPos, sigPos, idCut, tsCut, sigCut, idIns, tsIns, sigIns, extra})
	})
}

// fuzzPublishRig serves a Publish with a bearer token.
func fuzzPublishRig(f *testing.F) *fuzzRig {
	rg := newFuzzRig(f, "SELECT COUNT(*) FROM courier_outbox", "")
	rg.extraHeader, rg.bearer = "Idempotency-Key", true
	token, err := signature.ParseSecret("orders-service", hostilePublishToken)
	if err != nil {
		f.Fatal(err)
	}
	verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "orders-service", Tokens: []signature.Secret{token}})
	if err != nil {
		f.Fatal(err)
	}
	p, err := handler.NewPublish(handler.PublishConfig{Store: rg.store, Verifier: verifier, Authorize: allowPublish, Body: middleware.BodyLimits{MaxBytes: hostileMaxBody}, Hook: rg.hook})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := rg.store.Subscriptions.Create(f.Context(), rg.store.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://ra.example/h", EventTypes: []string{"*"}, KeyID: "k"}); err != nil {
		f.Fatal(err)
	}
	rg.serve(f, func(string) http.Handler { return p })
	rg.sign = func(h http.Header, _, _ string, _ []byte, _ time.Time) error {
		h.Set("Authorization", "Bearer "+hostilePublishToken)
		return nil
	}
	rg.sigHeader = "Authorization"
	rg.sigCore = func(string) string { return hostilePublishToken }
	rg.sureSkew = func(int32) (bool, bool) { return true, true }
	rg.id = func([]byte) string { return "" }
	rg.key = func([]byte) string { return "" }
	rg.valid = func(body []byte, key string) bool {
		var req struct {
			Endpoint       string          `json:"endpoint"`
			Tenant         string          `json:"tenant"`
			NotificationID string          `json:"notification_id"`
			EventType      string          `json:"event_type"`
			EventID        string          `json:"event_id"`
			Payload        json.RawMessage `json:"payload"`
		}
		return (key == "" || fuzzToken.MatchString(key)) && fuzzStrict(body, &req) && bytes.HasPrefix(bytes.TrimLeft(req.Payload, " \t\r\n"), []byte("{"))
	}
	return rg
}

func FuzzPublishReceiver(f *testing.F) {
	rg := fuzzPublishRig(f)
	fanout := []byte(`{"tenant":"acme","event_type":"order.created","event_id":"e-1","payload":{"b":[1,2]}}`)
	fuzzSeeds(f, [][]byte{hostilePublishSigned, fanout}, "req-0001")
	f.Fuzz(func(t *testing.T, body []byte, method uint8, contentType, contentEncoding string, framing, short, twice uint8, skew int32,
		idPos uint16, idCut uint8, idIns string, tsPos uint16, tsCut uint8, tsIns string, sigPos uint16, sigCut uint8, sigIns string, extra string) {
		rg.check(t, fuzzInput{body, method, contentType, contentEncoding, framing, short, twice, skew, idPos, tsPos, sigPos, idCut, tsCut, sigCut, idIns, tsIns, sigIns, extra})
	})
}

// fuzzSeeds adds each valid body as it is sent, and the ways a request of
// the first departs from a valid one.
func fuzzSeeds(f *testing.F, valid [][]byte, extra string) {
	add := func(in fuzzInput) {
		f.Add(in.body, in.method, in.contentType, in.contentEncoding, in.framing, in.short, in.twice, in.skew,
			in.idPos, in.idCut, in.idIns, in.tsPos, in.tsCut, in.tsIns, in.sigPos, in.sigCut, in.sigIns, in.extra)
	}
	ok := func(body []byte) fuzzInput {
		return fuzzInput{body: body, contentType: "application/json", extra: extra}
	}
	for _, b := range valid {
		add(ok(b))
	}
	v := valid[0]
	for _, edit := range []func(in *fuzzInput){
		func(in *fuzzInput) { in.method = 1 },
		func(in *fuzzInput) { in.method = 3 },
		func(in *fuzzInput) { in.contentType = "text/plain" },
		func(in *fuzzInput) { in.contentType = "application/json; charset=UTF-8" },
		func(in *fuzzInput) { in.contentEncoding = "gzip" },
		func(in *fuzzInput) { in.contentEncoding = "identity" },
		func(in *fuzzInput) { in.framing = fuzzFramingChunked },
		func(in *fuzzInput) { in.framing, in.short = fuzzFramingShort, 3 },
		func(in *fuzzInput) { in.framing, in.short = fuzzFramingLong, 3 },
		func(in *fuzzInput) { in.twice = 1 },
		func(in *fuzzInput) { in.twice = 8 },
		func(in *fuzzInput) { in.skew = -600 },
		func(in *fuzzInput) { in.idPos, in.idIns = 3, "x" },
		func(in *fuzzInput) { in.tsPos, in.tsCut = 40, 1 },
		func(in *fuzzInput) { in.sigPos, in.sigCut, in.sigIns = 9, 1, "A" },
		func(in *fuzzInput) { in.sigPos, in.sigIns = 999, " v1,AAAA" },
		func(in *fuzzInput) { in.extra = "" },
		func(in *fuzzInput) { in.body = append(bytes.Clone(v), ' ') },
		func(in *fuzzInput) { in.body = append([]byte(`{"x":1,`), v[1:]...) },
	} {
		in := ok(v)
		edit(&in)
		add(in)
	}
}

// --- The properties -----------------------------------------------------

// fuzzRequest is one request as it goes on the wire.
type fuzzRequest struct {
	method string
	header http.Header // every field but Host, Connection and the framing's
	body   []byte
	// length is the Content-Length sent, or rawhttp.Chunked or Unframed.
	length int
	// unedited says which of the id, timestamp and signature fields (bits
	// 0, 1, 2) an edit was asked of and left as signed: the character cut
	// was the one put back. A field signed anew (a nonce, a randomized
	// signature) may differ there, so a request sent again drops those.
	unedited uint8
}

// check sends in and holds the receiver's answer to the properties above.
func (rg *fuzzRig) check(t *testing.T, in fuzzInput) {
	req, valid, ok := rg.build(t, in)
	if !ok {
		return // a request net/http would not read as one: not the receiver's to answer
	}
	inbox0 := rg.count(t, "SELECT COUNT(*) FROM courier_inbox")
	effects0 := rg.count(t, rg.effects)
	status, header, out := rg.roundTrip(t, req)
	e := rg.lastEvent(t)
	inbox1 := rg.count(t, "SELECT COUNT(*) FROM courier_inbox")
	effects1 := rg.count(t, rg.effects)
	if e.HTTPStatus != status {
		t.Fatalf("Event says %d, answered %d %q", e.HTTPStatus, status, out)
	}
	if status < 200 || status >= 300 {
		rg.refused(t, req, status, header, out, e)
		if inbox1 != inbox0 || effects1 != effects0 {
			t.Fatalf("refused %d %s, yet wrote %d Inbox records and %d effects", status, e.Code, inbox1-inbox0, effects1-effects0)
		}
		return
	}
	if valid != nil && !*valid {
		t.Fatalf("accepted %d %q an input that is no valid notification as sent: %s %q, headers %q", status, out, req.method, req.body, req.header)
	}
	if e.Code != "" {
		t.Fatalf("accepted with Event code %q", e.Code)
	}
	key := rg.key(req.body)
	switch e.Outcome {
	case handler.OutcomeAccepted:
		if rg.keyEffects != "" && effects1-effects0 != 1 {
			t.Fatalf("accepted as fresh, with %d effects", effects1-effects0)
		}
	case handler.OutcomeDuplicate:
		if effects1 != effects0 || inbox1 != inbox0 {
			t.Fatalf("a duplicate wrote %d Inbox records and %d effects", inbox1-inbox0, effects1-effects0)
		}
	default:
		t.Fatalf("2xx reported as %q", e.Outcome)
	}
	if rg.keyEffects != "" && key != "" && rg.count(t, rg.keyEffects, key) > 1 {
		t.Fatalf("the function ran %d times for key %q", rg.count(t, rg.keyEffects, key), key)
	}

	// Again: the same answer, byte for byte, nothing run or written.
	if rg.resign {
		in.skew = 0
		for field, edit := range []struct {
			cut *uint8
			ins *string
		}{{&in.idCut, &in.idIns}, {&in.tsCut, &in.tsIns}, {&in.sigCut, &in.sigIns}} {
			if req.unedited&(1<<field) != 0 {
				*edit.cut, *edit.ins = 0, "" // as accepted: no edit
			}
		}
		if req, _, ok = rg.build(t, in); !ok {
			t.Fatal("the request could not be signed again")
		}
	}
	status2, _, out2 := rg.roundTrip(t, req)
	e2 := rg.lastEvent(t)
	if status2 != status || !bytes.Equal(out2, out) {
		t.Fatalf("sent again: %d %q, first %d %q", status2, out2, status, out)
	}
	// A publish without an Idempotency-Key has no record to answer it
	// from: it is published again, idempotently, as an Outcome accepted.
	republish := rg.extraHeader == "Idempotency-Key" && in.extra == ""
	if e2.Outcome != handler.OutcomeDuplicate && !(republish && e2.Outcome == handler.OutcomeAccepted) {
		t.Fatalf("sent again: Outcome %q, want duplicate", e2.Outcome)
	}
	if n, m := rg.count(t, "SELECT COUNT(*) FROM courier_inbox"), rg.count(t, rg.effects); n != inbox1 || m != effects1 {
		t.Fatalf("sent again: wrote %d Inbox records and %d effects", n-inbox1, m-effects1)
	}
}

// refused checks a refusal's answer: a problem of courier's code, the
// status and code the Hook got.
func (rg *fuzzRig) refused(t *testing.T, req fuzzRequest, status int, header http.Header, out []byte, e handler.Event) {
	t.Helper()
	if status < 400 || status > 599 {
		t.Fatalf("answered %d %q", status, out)
	}
	if ct := header.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/problem+json" {
		t.Fatalf("answered %d with Content-Type %q, want application/problem+json: %q", status, ct, out)
	}
	if req.method == http.MethodHead {
		return
	}
	var p problemFields
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("%d: %q is not a problem: %v", status, out, err)
	}
	if p.Status != status || !rg.codes[p.Code] || p.Code != e.Code {
		t.Fatalf("answered %d with problem %q (status %d, code %q), Event code %q: want a code courier declares", status, out, p.Status, p.Code, e.Code)
	}
}

// build makes the request in says, and whether it is a valid notification
// as sent (nil: it cannot be said, the input is not judged on it). It
// reports false for a request net/http's server refuses itself, or
// cannot be written.
func (rg *fuzzRig) build(t *testing.T, in fuzzInput) (req fuzzRequest, valid *bool, ok bool) {
	t.Helper()
	method := fuzzMethods[int(in.method)%len(fuzzMethods)]
	h := http.Header{}
	signCT := in.contentType
	if strings.TrimSpace(signCT) == "" {
		signCT = "application/json" // RFC 9421 signs one; it is not what is sent
	}
	h.Set("Content-Type", signCT)
	if rg.extraHeader != "" && in.extra != "" {
		h.Set(rg.extraHeader, in.extra)
	}
	id := rg.id(in.body)
	if id == "" || len(id) > 256 {
		id = "fuzz-id"
	}
	at := time.Now().Add(time.Duration(in.skew) * time.Second)
	if err := rg.sign(h, method, id, in.body, at); err != nil {
		id = "fuzz-id" // an id the scheme cannot sign: the body's is not the one signed
		if err := rg.sign(h, method, id, in.body, at); err != nil {
			return req, nil, false
		}
	}
	if in.contentType == "" {
		h.Del("Content-Type")
	}
	intact := true
	var unedited uint8
	splice := func(field uint8, name string, pos uint16, cut uint8, ins string) {
		if name == "" || (cut == 0 && ins == "") {
			return
		}
		v := h.Get(name)
		p := 0
		if len(v) > 0 {
			p = int(pos) % (len(v) + 1)
		}
		end := min(len(v), p+int(cut))
		nv := v[:p] + ins + v[end:]
		if nv == v {
			unedited |= 1 << field
		}
		h.Set(name, nv)
		if name == rg.sigHeader {
			intact = intact && strings.Contains(nv, rg.sigCore(v))
		} else {
			intact = intact && fuzzTrim(nv) == v
		}
	}
	splice(0, rg.idHeader, in.idPos, in.idCut, in.idIns)
	splice(1, rg.tsHeader, in.tsPos, in.tsCut, in.tsIns)
	splice(2, rg.sigHeader, in.sigPos, in.sigCut, in.sigIns)
	for i, name := range []string{rg.sigHeader, rg.idHeader, rg.tsHeader, "Content-Type"} {
		if in.twice&(1<<i) != 0 && name != "" {
			h.Add(name, h.Get(name))
			intact = false
		}
	}
	if in.contentEncoding != "" {
		h.Set("Content-Encoding", in.contentEncoding)
	}
	for _, vs := range h {
		for _, v := range vs {
			if !fuzzHeaderValue(v) || len(v) > 32<<10 {
				return req, nil, false
			}
		}
	}

	req = fuzzRequest{method: method, header: h, body: in.body, unedited: unedited}
	delivered := in.body
	switch int(in.framing) % fuzzFramings {
	case fuzzFramingLength:
		req.length = len(in.body)
	case fuzzFramingChunked:
		req.length = rawhttp.Chunked
	case fuzzFramingShort:
		if len(in.body) == 0 {
			return req, nil, false
		}
		req.length = len(in.body) - 1 - int(in.short)%len(in.body)
		delivered = in.body[:req.length]
	case fuzzFramingLong:
		req.length = len(in.body) + 1 + int(in.short)
		delivered = nil
		intact = false
	case fuzzFramingNone:
		req.length = rawhttp.Unframed
		delivered = nil
	}
	if !bytes.Equal(delivered, in.body) && !rg.bearer {
		intact = false // a signature over other bytes than arrive
	}

	// Whether it is valid as it arrives: judged where sure.
	v := intact && method == http.MethodPost && fuzzJSONType(h) && !fuzzCoded(h) && rg.valid(delivered, fuzzTrim(in.extra))
	good, sure := rg.sureSkew(in.skew)
	if v && !sure {
		return req, nil, true
	}
	v = v && good
	if rg.idHeader != "" && rg.id(in.body) != id {
		v = false // signed as fuzz-id: the body names no id, or another
	}
	return req, &v, true
}

// fuzzTrim is a field value as net/http's server reads it: without the
// spaces and tabs around it.
func fuzzTrim(v string) string { return strings.Trim(v, " \t") }

// fuzzHeaderValue reports whether net/http's server reads v as a field
// value: no control characters but tab, no DEL.
func fuzzHeaderValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// fuzzJSONType reports whether h declares JSON on one line, what every
// receiver accepts: application/json, its charset, if named, UTF-8 (other
// parameters mean nothing to it).
func fuzzJSONType(h http.Header) bool {
	ct := h.Values("Content-Type")
	if len(ct) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(ct[0])
	cs, named := params["charset"]
	return err == nil && mt == "application/json" && (!named || strings.EqualFold(cs, "utf-8"))
}

// fuzzCoded reports whether h declares a content coding other than
// identity.
func fuzzCoded(h http.Header) bool {
	for _, line := range h.Values("Content-Encoding") {
		for c := range strings.SplitSeq(line, ",") {
			if c = strings.Trim(c, " \t"); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// roundTrip writes req on a new connection, exactly as built, and reads
// the answer.
func (rg *fuzzRig) roundTrip(t *testing.T, req fuzzRequest) (int, http.Header, []byte) {
	t.Helper()
	return rg.srv.RoundTrip(t, rawhttp.Request{Method: req.method, Target: "/hooks", Header: req.header, Body: req.body, Length: req.length}, 30*time.Second)
}

// Package tracing is how courier's parts use a courier.Tracer: the span
// names and attribute keys they share, a nil Tracer that traces nothing,
// the guard that drops a Tracer's panics (Guard), and the checks a trace
// context passes before it is stored or sent.
package tracing

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/recovered"
)

// Span names (see courier.Tracer).
const (
	SpanEnqueue = "courier.enqueue"
	SpanClaim   = "courier.claim"
	SpanSettle  = "courier.settle"
	SpanHandle  = "courier.handle"
	// SpanHTTP names the spans of an attempt and of a receiver's answer
	// to a sender: the HTTP semantic conventions name a span without a
	// route by its method, and courier sends and accepts POST only. A
	// receiver's answer to another method (a refusal) is named by that
	// method, or SpanHTTPOther for one HTTP does not define.
	SpanHTTP      = "POST"
	SpanHTTPOther = "HTTP"
)

// Attribute keys: the HTTP semantic conventions' where they apply,
// courier.* for the rest.
const (
	AttrHTTPMethod     = "http.request.method"
	AttrHTTPStatus     = "http.response.status_code"
	AttrServerAddress  = "server.address"
	AttrServerPort     = "server.port"
	AttrURLFull        = "url.full" // always endpoint.Redact's form
	AttrURLScheme      = "url.scheme"
	AttrURLPath        = "url.path" // "/" or "/…": a path may hold a credential
	AttrErrorType      = "error.type"
	AttrEndpointRef    = "courier.endpoint.ref" // endpoint.Ref's form
	AttrDeliveryID     = "courier.delivery.id"
	AttrNotificationID = "courier.notification.id"
	AttrAttempt        = "courier.attempt"
	AttrOutcome        = "courier.outcome" // an attempt's result, a receiver's outcome
	AttrCode           = "courier.code"
	AttrRemoteCode     = "courier.remote_code"
	AttrExisted        = "courier.enqueue.existed"
	AttrBatchSize      = "courier.batch.size"
	AttrBatchLimit     = "courier.batch.limit"
)

// Headers that carry a trace context.
const (
	HeaderParent = "traceparent"
	HeaderState  = "tracestate"
)

// maxState bounds a stored or sent tracestate: the W3C limit of 32 list
// members leaves most vendors well under it, and a longer one is dropped
// whole (the specification lets a propagator drop tracestate).
const maxState = 512

// Start is t.Start, or a span that records nothing when t is nil.
func Start(t courier.Tracer, ctx context.Context, name string, kind courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	if t == nil {
		return ctx, noSpan{}
	}
	return t.Start(ctx, name, kind, attrs...)
}

// Inject is t.Inject, checked (see Check); the zero TraceContext when t is
// nil.
func Inject(t courier.Tracer, ctx context.Context) courier.TraceContext {
	if t == nil {
		return courier.TraceContext{}
	}
	return Check(t.Inject(ctx))
}

// Extract is t.Extract for a valid tc; ctx as it is otherwise.
func Extract(t courier.Tracer, ctx context.Context, tc courier.TraceContext) context.Context {
	if tc = Check(tc); t == nil || tc.Parent == "" {
		return ctx
	}
	return t.Extract(ctx, tc)
}

// Check returns tc if its traceparent is well formed, with its tracestate
// when that is printable ASCII and tabs (the whitespace a list may have
// around its members) within maxState bytes; the zero TraceContext
// otherwise. What courier stores and sends passes it, so a tracer, a
// header or a stored row cannot put anything else in a header.
func Check(tc courier.TraceContext) courier.TraceContext {
	if !validParent(tc.Parent) {
		return courier.TraceContext{}
	}
	if len(tc.State) > maxState || !stateChars(tc.State) {
		tc.State = ""
	}
	return tc
}

// validParent reports whether p is a W3C traceparent: version 00 exactly,
// a later version with what it may add after the four fields.
func validParent(p string) bool {
	if len(p) < 55 || !isHex(p[0:2]) || p[0:2] == "ff" || p[2] != '-' || !isHex(p[3:35]) || p[35] != '-' ||
		!isHex(p[36:52]) || p[52] != '-' || !isHex(p[53:55]) {
		return false
	}
	if p[3:35] == "00000000000000000000000000000000" || p[36:52] == "0000000000000000" {
		return false
	}
	switch {
	case len(p) == 55:
		return true
	case p[0:2] == "00":
		return false
	}
	return len(p) <= maxState && p[55] == '-' && printable(p)
}

// isHex reports whether s is lowercase hex.
func isHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// stateChars reports whether s is printable ASCII and tabs, what a
// tracestate may hold.
func stateChars(s string) bool {
	for i := range len(s) {
		if c := s[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Server returns the server.address and server.port attributes of the
// endpoint raw: its host and port (the scheme's default when none is
// written). An endpoint that does not parse has none.
func Server(raw string) []slog.Attr {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 443
		if u.Scheme == "http" {
			port = 80
		}
	}
	return []slog.Attr{slog.String(AttrServerAddress, u.Hostname()), slog.Int(AttrServerPort, port)}
}

// Once is a span ended once: by End, or, when the goroutine that owns it
// ended (runtime.Goexit in a callback of the application's) before End, by
// a deferred EndUnended. A span never ended is never exported, and the
// spans under it are left without their parent. A nil *Once is no span:
// its owner does not trace.
type Once struct {
	courier.Span
	ended bool
}

// End ends the span.
func (o *Once) End() {
	o.ended = true
	o.Span.End()
}

// EndUnended ends the span, failed with internal_error, unless End did.
func (o *Once) EndUnended() {
	if o == nil || o.ended {
		return
	}
	o.Fail(courier.CodeInternal)
	o.End()
}

// noSpan is the span of a nil Tracer.
type noSpan struct{}

func (noSpan) SetAttributes(...slog.Attr) {}
func (noSpan) Fail(courier.Code)          {}
func (noSpan) End()                       {}

// Code is the code a span fails with for err: its courier code, or
// internal_error for an error without one (whose text is never recorded).
func Code(err error) courier.Code {
	if c := courier.CodeOf(err); c != "" {
		return c
	}
	return courier.CodeInternal
}

// Guard returns t with its panics dropped; nil when t is nil. A Tracer is
// the application's code run on courier's goroutines, a worker's attempts
// among them, where a panic would end the process: as a Hook's, a
// Tracer's panic is logged at Error on slog's default logger, without its
// value (which may hold anything), and dropped. Start then returns ctx
// and a span that records nothing, Inject the zero TraceContext, Extract
// ctx as it is, and a span's method returns as if it had run. A Start or
// an Extract that returns a nil context is taken to have returned ctx.
func Guard(t courier.Tracer) courier.Tracer {
	if t == nil {
		return nil
	}
	if g, ok := t.(guarded); ok {
		return g
	}
	return guarded{t}
}

// guarded is what Guard returns.
type guarded struct{ t courier.Tracer }

func (g guarded) Start(ctx context.Context, name string, kind courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	var started context.Context
	var span courier.Span
	if dropped("Start", func() { started, span = g.t.Start(ctx, name, kind, attrs...) }) {
		return ctx, noSpan{}
	}
	if started == nil { // the span is still the caller's to end
		started = ctx
	}
	if span == nil {
		return started, noSpan{}
	}
	return started, guardedSpan{span}
}

func (g guarded) Inject(ctx context.Context) (tc courier.TraceContext) {
	if dropped("Inject", func() { tc = g.t.Inject(ctx) }) {
		return courier.TraceContext{}
	}
	return tc
}

func (g guarded) Extract(ctx context.Context, tc courier.TraceContext) context.Context {
	var extracted context.Context
	if dropped("Extract", func() { extracted = g.t.Extract(ctx, tc) }) || extracted == nil {
		return ctx
	}
	return extracted
}

// guardedSpan is the span a guarded Tracer starts.
type guardedSpan struct{ s courier.Span }

func (g guardedSpan) SetAttributes(attrs ...slog.Attr) {
	dropped("Span.SetAttributes", func() { g.s.SetAttributes(attrs...) })
}
func (g guardedSpan) Fail(code courier.Code) { dropped("Span.Fail", func() { g.s.Fail(code) }) }
func (g guardedSpan) End()                   { dropped("Span.End", func() { g.s.End() }) }

// dropped runs fn, the Tracer's method named method, and reports whether
// it panicked, logging the panic.
func dropped(method string, fn func()) bool {
	if _, _, panicked := recovered.Run(fn); !panicked {
		return false
	}
	slog.Error("store: Tracer "+method+" panicked; the panic was dropped", slog.Bool(logkey.Panic, true))
	return true
}

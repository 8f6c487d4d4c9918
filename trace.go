package courier

import (
	"context"
	"log/slog"
)

// TraceContext is a W3C trace context (https://www.w3.org/TR/trace-context/)
// as it travels between processes: the values of the traceparent and
// tracestate headers. The zero value is no trace.
//
// A delivery carries the trace context of the transaction that enqueued
// it (store.Config.Tracer), and every attempt sends it on in those
// headers, so the receiver's work continues the trace of the business
// transaction, across retries and worker processes. The headers are not
// signed: no signing scheme covers them, and a receiver trusts them no
// more than any tracing header.
type TraceContext struct {
	// Parent is the traceparent value: version-traceid-parentid-flags,
	// e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.
	Parent string
	// State is the tracestate value: the tracing vendors' entries, often
	// empty.
	State string
}

// Tracer connects courier to a tracing system. It is set on a Store
// (store.Config.Tracer) and traces everything built on that Store: its
// enqueues, the workers that deliver its outbox and the receivers that
// record into its inbox; nil traces nothing. The
// module github.com/courier-go/courier/contrib/otelcourier implements it
// with OpenTelemetry, so courier itself depends on no tracing library.
//
// Courier starts these spans: "courier.enqueue" (internal) around each
// delivery an Outbox writes, whose trace context the delivery keeps;
// "courier.claim" and "courier.settle" (internal) around a worker's
// claim and settle batches (an idle worker traces the first of its claims
// that find nothing, not every poll); "POST" (client, HTTP semantic conventions)
// around each attempt, a child of the delivery's trace context, ended
// once the attempt is settled; "POST"
// (server) around each request a receiver answers, continuing the
// request's traceparent (a request of another method, refused, is named
// by it, or "HTTP" for one HTTP does not define); and "courier.handle"
// (internal) around the application's function. Attributes are
// identities, counts, codes and redacted URLs (see contrib/otelcourier for
// the list), never a payload, a header or a secret.
type Tracer interface {
	// Start starts a span named name, of kind kind, as a child of the span
	// or remote trace context ctx carries, and returns ctx carrying the new
	// span.
	Start(ctx context.Context, name string, kind SpanKind, attrs ...slog.Attr) (context.Context, Span)
	// Inject returns the trace context of the span ctx carries, to store
	// with a delivery or send with an attempt; the zero TraceContext when
	// there is none.
	Inject(ctx context.Context) TraceContext
	// Extract returns ctx carrying tc as a remote parent, so that a span
	// started from it continues tc's trace.
	Extract(ctx context.Context, tc TraceContext) context.Context
}

// Span is a span a Tracer started.
type Span interface {
	// SetAttributes adds attributes to the span.
	SetAttributes(attrs ...slog.Attr)
	// Fail marks the span as failed, with the stable code that says why
	// (a Code, never an error's text).
	Fail(code Code)
	// End ends the span.
	End()
}

// SpanKind says what part a span plays, as OpenTelemetry's span kinds do.
type SpanKind int

// Span kinds.
const (
	SpanInternal SpanKind = iota // work inside a process: enqueue, claim, settle, the application's function
	SpanClient                   // an outgoing request: an attempt
	SpanServer                   // an incoming request: a receiver's answer
)

// Package otelcourier traces courier with OpenTelemetry, in a module of its
// own so courier itself depends on no tracing library. Its Tracer is a
// courier.Tracer: set it on a Store (store.Config.Tracer), and the Store's
// enqueues, the workers that deliver its outbox and the receivers that
// record into its inbox all trace with it:
//
//	t := otelcourier.New(otelcourier.Config{}) // the global TracerProvider and propagator
//	s, _ := sqlite.Open(ctx, path, store.Config{Tracer: t})
//	w, _ := client.NewWorker(client.Config{Store: s, Signer: signer})
//	inbox, _ := sqlite.Open(ctx, inboxPath, store.Config{Tracer: t})
//	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: v}, fn)
//
// One trace then runs from the application's request that enqueues a
// notification to the receiver's function that applies it, across retries
// and worker processes: the delivery keeps the W3C trace context
// (traceparent, tracestate) of its enqueue, every attempt sends it on, and
// the receiver continues it.
//
// Spans:
//
//	courier.enqueue  internal  each delivery an Outbox writes, a child of the caller's span
//	courier.claim    internal  each claim of a worker that leases or fails, and the first of an idle
//	                           stretch that finds nothing (a trace of its own; see client.Worker)
//	POST             client    each attempt, a child of the delivery's courier.enqueue span, ended
//	                           once the attempt is settled (so its time includes the settle's)
//	courier.settle   internal  each batch of settled attempts (a trace of its own)
//	POST             server    each request a receiver answers, continuing its traceparent (a refused
//	                           request of another method is named by it, or HTTP for one HTTP
//	                           does not define)
//	courier.handle   internal  the application's function, a child of the receiver's span
//
// Attributes (the HTTP semantic conventions' where they apply):
//
//	http.request.method        POST (the server span: the request's method, or _OTHER)
//	http.response.status_code  the receiver's status
//	server.address, server.port  the endpoint's host and port (client span)
//	url.full                   the endpoint as scheme://host ("/…" for a path): no userinfo, path,
//	                           query or fragment, any of which may hold a credential
//	courier.endpoint.ref       the endpoint's opaque ref (as the ops page shows it)
//	url.scheme                 http or https (server span)
//	url.path                   "/", or "/…" for any other path, which may hold a credential (server span)
//	error.type                 the stable code of a failed span, also its status description
//	courier.delivery.id        the outbox row
//	courier.notification.id    the notification's identity
//	courier.attempt            the attempt's number, from 1
//	courier.outcome            what an attempt came to once settled (succeeded, retry, failed: a
//	                           retry the store ended is failed, as the worker's Hook has it; or
//	                           released: not sent, its lease given back) or a receiver's outcome
//	                           (accepted, duplicate, rejected, failed)
//	courier.code               courier's stable code for the outcome
//	courier.remote_code        the code of the receiver's problem+json refusal
//	courier.enqueue.existed    the enqueue found the same delivery already written
//	courier.batch.size, courier.batch.limit  a claim's or settle's batch
//
// No attribute holds a payload, a header, a key or a secret; an error's text
// is never recorded, only its code. Every string is UTF-8, as OTLP requires:
// a byte that is not (in a code an application made up) is recorded as
// U+FFFD.
//
// The receiver's server span is a child of the span the request's context
// already carries when a tracing middleware (otelhttp) wraps the handler,
// and continues the request's traceparent and tracestate headers itself
// otherwise, each header's lines read as one field: a tracestate sent in
// several lines is one list, and a traceparent sent twice is ignored.
package otelcourier

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/courier-go/courier"
)

// ScopeName is the instrumentation scope of courier's spans.
const ScopeName = "github.com/courier-go/courier/contrib/otelcourier"

// Config configures a Tracer. The zero value uses OpenTelemetry's globals.
type Config struct {
	// TracerProvider makes courier's tracer. Defaults to the global one
	// (otel.GetTracerProvider), looked up when New is called; set the
	// global before, or pass the provider.
	TracerProvider trace.TracerProvider
	// Propagator writes and reads the trace context a delivery keeps and
	// its attempts send. Courier keeps the W3C trace context (traceparent,
	// tracestate): a propagator that writes neither, such as the global
	// default before the application sets one, is replaced by
	// propagation.TraceContext. Defaults to the global one
	// (otel.GetTextMapPropagator), which follows later changes.
	Propagator propagation.TextMapPropagator
}

// Tracer is a courier.Tracer over OpenTelemetry. It is safe for concurrent
// use. The zero Tracer traces as New(Config{}) does, with OpenTelemetry's
// globals; a nil *Tracer traces nothing (a Store given one keeps no trace
// context), as a nil courier.Tracer does.
type Tracer struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

var _ courier.Tracer = (*Tracer)(nil)

// New returns a Tracer for cfg.
func New(cfg Config) *Tracer {
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	if cfg.Propagator == nil {
		cfg.Propagator = otel.GetTextMapPropagator()
	}
	return &Tracer{tracer: cfg.TracerProvider.Tracer(ScopeName), propagator: cfg.Propagator}
}

// Start implements courier.Tracer.
func (t *Tracer) Start(ctx context.Context, name string, kind courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	if t == nil {
		return ctx, otelSpan{trace.SpanFromContext(context.Background())} // records nothing
	}
	ctx, s := t.otelTracer().Start(ctx, name, trace.WithSpanKind(spanKind(kind)), trace.WithAttributes(keyValues(attrs)...))
	return ctx, otelSpan{s}
}

// Inject implements courier.Tracer.
func (t *Tracer) Inject(ctx context.Context) courier.TraceContext {
	if t == nil {
		return courier.TraceContext{}
	}
	c := propagation.MapCarrier{}
	t.w3c().Inject(ctx, c)
	return courier.TraceContext{Parent: c.Get("traceparent"), State: c.Get("tracestate")}
}

// Extract implements courier.Tracer.
func (t *Tracer) Extract(ctx context.Context, tc courier.TraceContext) context.Context {
	if t == nil {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tc.Parent}
	if tc.State != "" {
		c["tracestate"] = tc.State
	}
	return t.w3c().Extract(ctx, c)
}

// otelTracer is the tracer t starts spans with: the global provider's for
// the zero Tracer.
func (t *Tracer) otelTracer() trace.Tracer {
	if t.tracer == nil {
		return otel.GetTracerProvider().Tracer(ScopeName)
	}
	return t.tracer
}

// w3c returns the propagator (the global one for the zero Tracer), or W3C
// trace context when it writes no traceparent.
func (t *Tracer) w3c() propagation.TextMapPropagator {
	p := t.propagator
	if p == nil {
		p = otel.GetTextMapPropagator()
	}
	if slices.Contains(p.Fields(), "traceparent") {
		return p
	}
	return propagation.TraceContext{}
}

// otelSpan is a courier.Span over an OpenTelemetry span.
type otelSpan struct{ span trace.Span }

// SetAttributes implements courier.Span.
func (s otelSpan) SetAttributes(attrs ...slog.Attr) { s.span.SetAttributes(keyValues(attrs)...) }

// Fail implements courier.Span: the span's status is Error, described by
// code, which is also its error.type.
func (s otelSpan) Fail(code courier.Code) {
	c := utf8String(string(code))
	s.span.SetStatus(codes.Error, c)
	s.span.SetAttributes(attribute.String("error.type", c))
}

// utf8String is s with each run of bytes that is not UTF-8 replaced by
// U+FFFD: OTLP's encoding refuses a string that is not UTF-8, and its
// exporter drops the whole batch of spans that holds one. A code an
// application made up (handler.Reject's, say) may be anything.
func utf8String(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// End implements courier.Span.
func (s otelSpan) End() { s.span.End() }

func spanKind(k courier.SpanKind) trace.SpanKind {
	switch k {
	case courier.SpanClient:
		return trace.SpanKindClient
	case courier.SpanServer:
		return trace.SpanKindServer
	}
	return trace.SpanKindInternal
}

// keyValues converts courier's attributes; a group's members are named
// group.member.
func keyValues(attrs []slog.Attr) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		out = appendKeyValue(out, "", a)
	}
	return out
}

func appendKeyValue(out []attribute.KeyValue, prefix string, a slog.Attr) []attribute.KeyValue {
	key := prefix + a.Key
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return append(out, attribute.String(key, utf8String(v.String())))
	case slog.KindInt64:
		return append(out, attribute.Int64(key, v.Int64()))
	case slog.KindUint64:
		return append(out, attribute.Int64(key, int64(min(v.Uint64(), 1<<63-1))))
	case slog.KindFloat64:
		return append(out, attribute.Float64(key, v.Float64()))
	case slog.KindBool:
		return append(out, attribute.Bool(key, v.Bool()))
	case slog.KindDuration:
		return append(out, attribute.Float64(key, v.Duration().Seconds()))
	case slog.KindGroup:
		for _, m := range v.Group() {
			out = appendKeyValue(out, key+".", m)
		}
		return out
	}
	return append(out, attribute.String(key, utf8String(v.String())))
}

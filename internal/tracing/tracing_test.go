package tracing

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logtest"
)

// TestCheckKeepsOnlyWellFormedTraceContexts: what courier stores and sends
// as traceparent is a W3C traceparent, and its tracestate printable and
// bounded; anything else is dropped, never passed on into a header.
func TestCheckKeepsOnlyWellFormedTraceContexts(t *testing.T) {
	t.Parallel()
	const good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name string
		in   courier.TraceContext
		want courier.TraceContext
	}{
		{"version 00", courier.TraceContext{Parent: good, State: "congo=t61rcWkgMzE"}, courier.TraceContext{Parent: good, State: "congo=t61rcWkgMzE"}},
		{"later version, more fields", courier.TraceContext{Parent: "cc" + good[2:] + "-what-comes"}, courier.TraceContext{Parent: "cc" + good[2:] + "-what-comes"}},
		{"version 00 with more", courier.TraceContext{Parent: good + "-x"}, courier.TraceContext{}},
		{"version ff", courier.TraceContext{Parent: "ff" + good[2:]}, courier.TraceContext{}},
		{"upper case", courier.TraceContext{Parent: strings.ToUpper(good)}, courier.TraceContext{}},
		{"zero trace id", courier.TraceContext{Parent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, courier.TraceContext{}},
		{"zero parent id", courier.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"}, courier.TraceContext{}},
		{"header injection", courier.TraceContext{Parent: good[:54] + "\r\nX: 1"}, courier.TraceContext{}},
		{"empty", courier.TraceContext{}, courier.TraceContext{}},
		{"state with spaces and tabs around its members", courier.TraceContext{Parent: good, State: "foo=1 \t , \t bar=2"}, courier.TraceContext{Parent: good, State: "foo=1 \t , \t bar=2"}},
		{"state with a newline", courier.TraceContext{Parent: good, State: "a=b\nX: 1"}, courier.TraceContext{Parent: good}},
		{"state too long", courier.TraceContext{Parent: good, State: strings.Repeat("a", 513)}, courier.TraceContext{Parent: good}},
	}
	for _, tt := range tests {
		if got := Check(tt.in); got != tt.want {
			t.Errorf("%s: Check(%q) = %q, want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// TestNilTracerTracesNothing: a nil Tracer starts spans that record
// nothing, injects nothing and leaves contexts alone.
func TestNilTracerTracesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	got, span := Start(nil, ctx, SpanEnqueue, courier.SpanInternal)
	span.Fail(courier.CodeInternal)
	span.End()
	if got != ctx {
		t.Fatal("Start with a nil Tracer changed the context")
	}
	if tc := Inject(nil, ctx); tc != (courier.TraceContext{}) {
		t.Fatalf("Inject = %v", tc)
	}
	if Extract(nil, ctx, courier.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}) != ctx {
		t.Fatal("Extract with a nil Tracer changed the context")
	}
}

// brokenTracer starts spans that panic in every method, or panics itself
// when panics is set; its Start returns a nil context when nilContext is.
type brokenTracer struct{ panics, nilContext bool }

type brokenSpan struct{}

func (brokenSpan) SetAttributes(...slog.Attr) { panic("span: SetAttributes") }
func (brokenSpan) Fail(courier.Code)          { panic("span: Fail") }
func (brokenSpan) End()                       { panic("span: End") }

func (b brokenTracer) Start(ctx context.Context, _ string, _ courier.SpanKind, _ ...slog.Attr) (context.Context, courier.Span) {
	if b.panics {
		panic("tracer: Start")
	}
	if b.nilContext {
		return nil, brokenSpan{}
	}
	return context.WithValue(ctx, brokenTracer{}, true), brokenSpan{}
}

func (b brokenTracer) Inject(context.Context) courier.TraceContext {
	if b.panics {
		panic("tracer: Inject")
	}
	return courier.TraceContext{Parent: "p"}
}

func (b brokenTracer) Extract(ctx context.Context, _ courier.TraceContext) context.Context {
	if b.panics {
		panic("tracer: Extract")
	}
	return nil
}

// TestGuardDropsATracersPanics: what Guard returns never panics, and
// answers as a Tracer that traces nothing where the Tracer's method
// panicked or returned no context; what the Tracer returned otherwise is
// passed on. Nil stays nil, and a guarded Tracer is not wrapped twice.
func TestGuardDropsATracersPanics(t *testing.T) {
	logs := logtest.AsDefault(t)
	if Guard(nil) != nil {
		t.Error("Guard(nil) is not nil")
	}
	if g := Guard(brokenTracer{}); Guard(g) != g {
		t.Error("Guard of a guarded Tracer wrapped it again")
	}
	ctx := context.Background()

	g := Guard(brokenTracer{panics: true})
	if got, span := g.Start(ctx, "s", courier.SpanInternal); got != ctx || span != (noSpan{}) {
		t.Errorf("Start that panicked = %v, %T; want ctx and a span that records nothing", got, span)
	}
	if tc := g.Inject(ctx); tc != (courier.TraceContext{}) {
		t.Errorf("Inject that panicked = %+v, want the zero TraceContext", tc)
	}
	if got := g.Extract(ctx, courier.TraceContext{}); got != ctx {
		t.Errorf("Extract that panicked = %v, want ctx", got)
	}

	g = Guard(brokenTracer{})
	started, span := g.Start(ctx, "s", courier.SpanInternal)
	if started.Value(brokenTracer{}) != true {
		t.Error("Start's context is not the Tracer's")
	}
	span.SetAttributes(slog.Int("n", 1)) // each panics in the span, dropped
	span.Fail(courier.CodeInternal)
	span.End()
	if tc := g.Inject(ctx); tc.Parent != "p" {
		t.Errorf("Inject = %+v, want the Tracer's", tc)
	}
	if got := g.Extract(ctx, courier.TraceContext{}); got != ctx {
		t.Errorf("Extract that returned nil = %v, want ctx", got)
	}
	if got, span := Guard(brokenTracer{nilContext: true}).Start(ctx, "s", courier.SpanInternal); got != ctx || span == (noSpan{}) {
		t.Errorf("Start that returned a nil context and a span = %v, %T; want ctx and the span, for the caller to end", got, span)
	}
	want := []string{
		"store: Tracer Start panicked; the panic was dropped",
		"store: Tracer Inject panicked; the panic was dropped",
		"store: Tracer Extract panicked; the panic was dropped",
		"store: Tracer Span.SetAttributes panicked; the panic was dropped",
		"store: Tracer Span.Fail panicked; the panic was dropped",
		"store: Tracer Span.End panicked; the panic was dropped",
	}
	if got := logs.Messages(slog.LevelError); !slices.Equal(got, want) {
		t.Errorf("logged at Error:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

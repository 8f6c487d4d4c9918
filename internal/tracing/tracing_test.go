package tracing

import (
	"strings"
	"testing"

	"github.com/courier-go/courier"
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

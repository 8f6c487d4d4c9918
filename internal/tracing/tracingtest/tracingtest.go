// Package tracingtest is a courier.Tracer for courier's own tests: it
// records every span in memory, with W3C identifiers of its own, so a
// test can check names, kinds, parents and attributes without a tracing
// library.
package tracingtest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/courier-go/courier"
)

// Recorder is a courier.Tracer that records spans. Its zero value is ready.
type Recorder struct {
	// OnEnd, when not nil, is called with each span as it ends, after it
	// is marked ended: a test acts at that moment (a claim ended; an
	// enqueue's insert done).
	OnEnd func(*Span)

	mu    sync.Mutex
	spans []*Span
	ids   uint64
}

var _ courier.Tracer = (*Recorder)(nil)

// Span is a recorded span.
type Span struct {
	Name    string
	Kind    courier.SpanKind
	Context courier.TraceContext // its own
	Parent  courier.TraceContext // its parent's (a span's or a remote one), zero for a root
	Failed  courier.Code

	r     *Recorder
	attrs []slog.Attr
	ended bool
}

type key struct{}

// Start implements courier.Tracer.
func (r *Recorder) Start(ctx context.Context, name string, kind courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	parent, _ := ctx.Value(key{}).(courier.TraceContext)
	r.mu.Lock()
	r.ids++
	traceID := fmt.Sprintf("%032x", r.ids)
	if parent.Parent != "" {
		traceID = parent.Parent[3:35]
	}
	s := &Span{Name: name, Kind: kind, Parent: parent, r: r, attrs: slices.Clone(attrs),
		Context: courier.TraceContext{Parent: fmt.Sprintf("00-%s-%016x-01", traceID, r.ids), State: parent.State}}
	r.spans = append(r.spans, s)
	r.mu.Unlock()
	return context.WithValue(ctx, key{}, s.Context), s
}

// Inject implements courier.Tracer.
func (r *Recorder) Inject(ctx context.Context) courier.TraceContext {
	tc, _ := ctx.Value(key{}).(courier.TraceContext)
	return tc
}

// Extract implements courier.Tracer.
func (r *Recorder) Extract(ctx context.Context, tc courier.TraceContext) context.Context {
	return context.WithValue(ctx, key{}, tc)
}

// Spans returns the spans recorded so far, in the order they started.
func (r *Recorder) Spans() []*Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Named returns the recorded spans named name.
func (r *Recorder) Named(name string) []*Span {
	var out []*Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// SetAttributes implements courier.Span.
func (s *Span) SetAttributes(attrs ...slog.Attr) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.attrs = append(s.attrs, attrs...)
}

// Fail implements courier.Span.
func (s *Span) Fail(code courier.Code) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.Failed = code
}

// End implements courier.Span.
func (s *Span) End() {
	s.r.mu.Lock()
	s.ended = true
	s.r.mu.Unlock()
	if s.r.OnEnd != nil {
		s.r.OnEnd(s)
	}
}

// Ended reports whether End was called.
func (s *Span) Ended() bool {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.ended
}

// Attrs returns the span's attributes by key, the last value set winning.
func (s *Span) Attrs() map[string]slog.Value {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	out := make(map[string]slog.Value, len(s.attrs))
	for _, a := range s.attrs {
		out[a.Key] = a.Value
	}
	return out
}

// TraceID is the trace id of tc's traceparent.
func TraceID(tc courier.TraceContext) string {
	if len(tc.Parent) < 35 {
		return ""
	}
	return tc.Parent[3:35]
}

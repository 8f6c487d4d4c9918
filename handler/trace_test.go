package handler_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

type tracedNote struct {
	ID   string `json:"id" validate:"required,courier_token"`
	Verb string `json:"verb"`
}

func (n tracedNote) DedupeKey() string { return n.ID }

// tracedReceiver is a Receiver of tracedNote running fn, on a SQLite
// inbox whose Store traces into rec, and the keys its requests are
// signed with.
func tracedReceiver(t *testing.T, rec *tracingtest.Recorder, fn handler.Func[tracedNote]) (*handler.Receiver[tracedNote], couriertest.Keys) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{Tracer: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	keys := couriertest.StandardWebhooksKeys("sender")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier}, fn)
	if err != nil {
		t.Fatal(err)
	}
	return rcv, keys
}

// TestReceiverSpansContinueTheSendersTrace: a traced receiver answers each
// request in a server span continuing the request's traceparent, with its
// status, outcome and code, and runs the application's function in a
// courier.handle span under it, which the function's context carries;
// failures fail the spans they belong to, and nothing of the body or
// headers becomes an attribute.
func TestReceiverSpansContinueTheSendersTrace(t *testing.T) {
	t.Parallel()
	rec := &tracingtest.Recorder{}
	var inFunc []courier.TraceContext
	rcv, keys := tracedReceiver(t, rec, func(ctx context.Context, _ *sqlx.Tx, n tracedNote) error {
		inFunc = append(inFunc, rec.Inject(ctx))
		switch n.Verb {
		case "fail":
			return errors.New("application trouble")
		case "reject":
			return handler.Reject("plan_unknown", "no such plan")
		}
		return nil
	})
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	serve := func(id, verb, traceparent string, ctx context.Context) (int, *tracingtest.Span) {
		t.Helper()
		before := len(rec.Spans())
		req := couriertest.NewRequest("https://receiver.example/hooks", id, []byte(`{"id":"`+id+`","verb":"`+verb+`"}`), keys.Signer)
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
			req.Header.Set("tracestate", "vendor=v1")
		}
		w := httptest.NewRecorder()
		rcv.ServeHTTP(w, req.WithContext(ctx))
		var server *tracingtest.Span
		for _, sp := range rec.Spans()[before:] {
			if sp.Kind == courier.SpanServer && sp.Name == tracing.SpanHTTP {
				server = sp
			}
		}
		if server == nil || !server.Ended() {
			t.Fatalf("%s: no ended server span", id)
		}
		return w.Code, server
	}
	handles := func() []*tracingtest.Span { return rec.Named(tracing.SpanHandle) }

	// Accepted: the server span continues the header, the handle span is
	// its child and the function's context carries it.
	code, server := serve("n-1", "ok", parent, t.Context())
	if code != 200 || server.Parent != (courier.TraceContext{Parent: parent, State: "vendor=v1"}) || server.Failed != "" {
		t.Fatalf("accepted: %d, server span parent %v failed %q", code, server.Parent, server.Failed)
	}
	if a := server.Attrs(); a[tracing.AttrHTTPStatus].Int64() != 200 || a[tracing.AttrOutcome].String() != string(handler.OutcomeAccepted) ||
		a[tracing.AttrHTTPMethod].String() != "POST" || a[tracing.AttrURLScheme].String() != "https" || a["url.path"].String() != "/…" {
		t.Fatalf("accepted: server span attributes %v", a)
	}
	if h := handles(); len(h) != 1 || h[0].Parent != server.Context || h[0].Failed != "" || !h[0].Ended() || inFunc[0] != h[0].Context {
		t.Fatalf("accepted: handle spans %v, the function saw %v", h, inFunc)
	}
	// A duplicate is answered without the function: no handle span.
	if code, server := serve("n-1", "ok", parent, t.Context()); code != 200 || server.Attrs()[tracing.AttrOutcome].String() != string(handler.OutcomeDuplicate) || len(handles()) != 1 {
		t.Fatalf("duplicate: %d, outcome %v, %d handle spans", code, server.Attrs()[tracing.AttrOutcome], len(handles()))
	}
	// The function fails: both spans fail.
	if code, server := serve("n-2", "fail", parent, t.Context()); code != 500 || server.Failed != courier.CodeHandlerFailed || handles()[1].Failed != courier.CodeHandlerFailed {
		t.Fatalf("failing function: %d, server span failed %q, handle span failed %q", code, server.Failed, handles()[1].Failed)
	}
	// A refusal fails the function's span with its code; a 4xx answer is
	// no failure of the server's.
	if code, server := serve("n-3", "reject", parent, t.Context()); code != 422 || server.Failed != "" || handles()[2].Failed != "plan_unknown" ||
		server.Attrs()[tracing.AttrCode].String() != "plan_unknown" {
		t.Fatalf("refusal: %d, server span failed %q attrs %v, handle span failed %q", code, server.Failed, server.Attrs(), handles()[2].Failed)
	}
	// A malformed traceparent is ignored: the span starts a trace.
	if _, server := serve("n-4", "ok", "00-zz-\r\n", t.Context()); server.Parent != (courier.TraceContext{}) {
		t.Fatalf("malformed traceparent: server span parent %v, want none", server.Parent)
	}
	// A span a tracing middleware started in front is the parent.
	mctx, mspan := rec.Start(t.Context(), "middleware", courier.SpanServer)
	defer mspan.End()
	if _, server := serve("n-5", "ok", parent, mctx); server.Parent != rec.Inject(mctx) {
		t.Fatalf("behind middleware: server span parent %v, want the middleware's %v", server.Parent, rec.Inject(mctx))
	}
	// Unsigned: refused before any function, in a span of its own.
	req := httptest.NewRequest(http.MethodPost, "https://receiver.example/hooks", strings.NewReader(`{"id":"n-6"}`))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	rcv.ServeHTTP(w, req)
	if last := rec.Spans()[len(rec.Spans())-1]; w.Code != 401 || last.Kind != courier.SpanServer || last.Attrs()[tracing.AttrHTTPStatus].Int64() != 401 {
		t.Fatalf("unsigned: %d, last span %s %v", w.Code, last.Name, last.Attrs())
	}
	for _, sp := range rec.Spans() {
		if text := fmt.Sprint(sp.Attrs()); strings.Contains(text, "verb") || strings.Contains(text, "webhook") || strings.Contains(text, "/hooks") {
			t.Errorf("span %s records request content: %s", sp.Name, text)
		}
	}
}

// TestReceiverReadsEachTraceHeaderAsOneField: a receiver reads traceparent
// and tracestate as HTTP reads a header sent in several lines, one field
// of their values joined by commas. A tracestate sent in two lines is one
// list, all of which the server span's parent keeps; two traceparents are
// no traceparent, and the span starts a trace. A later version's
// traceparent is continued; version ff, upper case hex and zero ids are
// not.
func TestReceiverReadsEachTraceHeaderAsOneField(t *testing.T) {
	t.Parallel()
	rec := &tracingtest.Recorder{}
	rcv, keys := tracedReceiver(t, rec, func(context.Context, *sqlx.Tx, tracedNote) error { return nil })
	const (
		parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		other  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		later  = "cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-the-future-will-be-like"
	)
	tests := []struct {
		name   string
		parent []string
		state  []string
		want   courier.TraceContext
	}{
		{"one line each", []string{parent}, []string{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
			courier.TraceContext{Parent: parent, State: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}},
		{"tracestate in two lines", []string{parent}, []string{"rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"},
			courier.TraceContext{Parent: parent, State: "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}},
		{"tracestate with tabs", []string{parent}, []string{"rojo=00f067aa0ba902b7 \t ,\tcongo=t61rcWkgMzE"},
			courier.TraceContext{Parent: parent, State: "rojo=00f067aa0ba902b7 \t ,\tcongo=t61rcWkgMzE"}},
		{"two traceparents", []string{parent, other}, []string{"rojo=00f067aa0ba902b7"}, courier.TraceContext{}},
		{"the same traceparent twice", []string{parent, parent}, nil, courier.TraceContext{}},
		{"a later version", []string{later}, nil, courier.TraceContext{Parent: later}},
		{"version ff", []string{"ff" + parent[2:]}, nil, courier.TraceContext{}},
		{"upper case", []string{strings.ToUpper(parent)}, nil, courier.TraceContext{}},
		{"zero trace id", []string{"00-00000000000000000000000000000000-b7ad6b7169203331-01"}, nil, courier.TraceContext{}},
		{"zero parent id", []string{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"}, nil, courier.TraceContext{}},
	}
	for i, tt := range tests {
		id := fmt.Sprintf("h-%d", i)
		req := couriertest.NewRequest("https://receiver.example/hooks", id, []byte(`{"id":"`+id+`"}`), keys.Signer)
		for _, v := range tt.parent {
			req.Header.Add("Traceparent", v)
		}
		for _, v := range tt.state {
			req.Header.Add("Tracestate", v)
		}
		before := len(rec.Spans())
		w := httptest.NewRecorder()
		rcv.ServeHTTP(w, req)
		var server *tracingtest.Span
		for _, sp := range rec.Spans()[before:] {
			if sp.Kind == courier.SpanServer {
				server = sp
			}
		}
		if w.Code != http.StatusOK || server == nil {
			t.Fatalf("%s: answered %d, server span %v", tt.name, w.Code, server)
		}
		if server.Parent != tt.want {
			t.Errorf("%s: server span parent %q, want %q", tt.name, server.Parent, tt.want)
		}
	}
}

// TestReceiverSpanEndsWhenTheFunctionEndsItsGoroutine: a function that
// ends its goroutine (runtime.Goexit, as t.FailNow does) answers nothing,
// and the receiver reports nothing for it; its server span ends anyway,
// failed with internal_error like the courier.handle span under it: a span
// never ended is never exported, and the handle span would be left
// without its parent.
func TestReceiverSpanEndsWhenTheFunctionEndsItsGoroutine(t *testing.T) {
	t.Parallel()
	rec := &tracingtest.Recorder{}
	rcv, keys := tracedReceiver(t, rec, func(context.Context, *sqlx.Tx, tracedNote) error { runtime.Goexit(); return nil })
	req := couriertest.NewRequest("https://receiver.example/hooks", "n-1", []byte(`{"id":"n-1"}`), keys.Signer)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rcv.ServeHTTP(httptest.NewRecorder(), req)
	}()
	<-done
	for _, name := range []string{tracing.SpanHTTP, tracing.SpanHandle} {
		spans := rec.Named(name)
		if len(spans) != 1 || !spans[0].Ended() || spans[0].Failed != courier.CodeInternal {
			for _, sp := range spans {
				t.Logf("%s span: ended %v, failed %q", name, sp.Ended(), sp.Failed)
			}
			t.Errorf("%d %s spans; want one, ended and failed with internal_error", len(spans), name)
		}
	}
}

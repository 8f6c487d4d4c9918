package otelcourier_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/otelcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

type order struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Status string `json:"status"`
}

func (o order) DedupeKey() string { return o.ID }

// TestOneTraceFromTheEnqueuingRequestToTheReceiversFunction: the
// application's request enqueues a notification; a worker's first attempt
// is answered 503, another worker (another process, its own Store and Tracer)
// delivers the second; the receiver applies it. All of it is one trace:
// request → courier.enqueue → both attempts (HTTP client spans) → the
// receiver's server span under the second → courier.handle, in which the
// application's function runs. The attributes say method, redacted URL,
// statuses, outcomes and codes, and hold no payload and no credential.
func TestOneTraceFromTheEnqueuingRequestToTheReceiversFunction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := func() *otelcourier.Tracer {
		return otelcourier.New(otelcourier.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
	}

	senderPath := filepath.Join(t.TempDir(), "sender.db")
	sender := openTraced(t, senderPath, tracer())
	inbox := openTraced(t, filepath.Join(t.TempDir(), "receiver.db"), tracer())
	keys := couriertest.StandardWebhooksKeys("shop")
	var inFunc trace.SpanContext
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, _ *sqlx.Tx, o order) error {
			inFunc = trace.SpanContextFromContext(ctx)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	t.Cleanup(srv.Close)

	// The application's request: it writes its order and enqueues, in one
	// transaction, inside its own span.
	const payload = `{"id":"o-1","status":"PAID-MARKER-7731"}`
	endpoint := strings.Replace(srv.URL, "http://", "http://alice:pa55word@", 1) + "/hooks/orders?token=SECRET-TOKEN-42"
	reqCtx, request := tp.Tracer("shop").Start(ctx, "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	tx, err := sender.Begin(reqCtx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sender.Outbox.Enqueue(reqCtx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: endpoint, Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	request.End()

	// Two worker processes: the first attempt (503) by one, the retry by
	// the other.
	for i := range 2 {
		s := sender
		if i > 0 {
			if s, err = sqlite.Open(ctx, senderPath, store.Config{Tracer: tracer()}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
		}
		w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Owner: fmt.Sprintf("worker-%d", i),
			Transport: srv.Guard().Transport(), Backoff: func(int, time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.Work(ctx); err != nil || n != 1 {
			t.Fatalf("worker %d: Work = %d, %v; want one attempt", i, n, err)
		}
	}
	if d, err := sender.Outbox.Lookup(ctx, "o-1", endpoint); err != nil || d.Status != courier.StatusSucceeded || d.Attempts != 2 {
		t.Fatalf("delivery = %+v, %v; want succeeded in 2 attempts", d, err)
	}

	spans := exporter.GetSpans()
	traceID := request.SpanContext().TraceID()
	var enqueue, receive, handle *tracetest.SpanStub
	var attempts []*tracetest.SpanStub
	for i := range spans {
		s := &spans[i]
		switch {
		case s.Name == "courier.enqueue":
			enqueue = s
		case s.Name == "POST" && s.SpanKind == trace.SpanKindClient:
			attempts = append(attempts, s)
		case s.Name == "POST" && s.SpanKind == trace.SpanKindServer:
			receive = s
		case s.Name == "courier.handle":
			handle = s
		}
	}
	if enqueue == nil || receive == nil || handle == nil || len(attempts) != 2 {
		t.Fatalf("spans %v: want an enqueue, two attempts, a receive and a handle", names(spans))
	}
	chain := []struct {
		name   string
		span   *tracetest.SpanStub
		parent trace.SpanContext
	}{
		{"enqueue", enqueue, request.SpanContext()},
		{"attempt 1", attempts[0], enqueue.SpanContext},
		{"attempt 2", attempts[1], enqueue.SpanContext},
		{"receive", receive, attempts[1].SpanContext},
		{"handle", handle, receive.SpanContext},
	}
	for _, c := range chain {
		if c.span.SpanContext.TraceID() != traceID || c.span.Parent.SpanID() != c.parent.SpanID() {
			t.Errorf("%s: trace %s parent %s; want trace %s parent %s", c.name,
				c.span.SpanContext.TraceID(), c.span.Parent.SpanID(), traceID, c.parent.SpanID())
		}
	}
	if !receive.Parent.IsRemote() {
		t.Error("the receiver's span does not continue a remote parent")
	}
	if inFunc.SpanID() != handle.SpanContext.SpanID() {
		t.Errorf("the application's function ran in span %s, want courier.handle's %s", inFunc.SpanID(), handle.SpanContext.SpanID())
	}

	want := []map[attribute.Key]attribute.Value{
		{"http.request.method": attribute.StringValue("POST"), "url.full": attribute.StringValue(srv.URL + "/…"),
			"http.response.status_code": attribute.IntValue(503), "courier.attempt": attribute.IntValue(1),
			"courier.outcome": attribute.StringValue("retry"), "courier.notification.id": attribute.StringValue("o-1")},
		{"http.request.method": attribute.StringValue("POST"), "url.full": attribute.StringValue(srv.URL + "/…"),
			"http.response.status_code": attribute.IntValue(200), "courier.attempt": attribute.IntValue(2),
			"courier.outcome": attribute.StringValue("succeeded")},
	}
	for i, s := range attempts {
		got := attrs(s)
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("attempt %d: %s = %v, want %v", i+1, k, got[k].String(), v.String())
			}
		}
	}
	if attempts[0].Status.Code != codes.Error || attrs(attempts[0])["error.type"].AsString() == "" || attempts[1].Status.Code == codes.Error {
		t.Errorf("attempt statuses = %v, %v; want the 503 failed with its code, the 200 not", attempts[0].Status, attempts[1].Status)
	}
	if got := attrs(receive); got["http.response.status_code"] != attribute.IntValue(200) || got["courier.outcome"] != attribute.StringValue("accepted") {
		t.Errorf("receive attributes = %v", got)
	}
	if len(find(spans, "courier.claim")) < 2 || len(find(spans, "courier.settle")) != 2 {
		t.Errorf("spans %v: want a claim per Work and a settle per attempt", names(spans))
	}
	for _, s := range spans {
		for _, kv := range s.Attributes {
			v := kv.Value.String()
			for _, secret := range []string{"PAID-MARKER", "SECRET-TOKEN", "pa55word", "alice", "whsec_", "v1,"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %s attribute %s = %q holds %q", s.Name, kv.Key, v, secret)
				}
			}
		}
		if strings.Contains(s.Status.Description, "PAID") {
			t.Errorf("span %s status %q holds the payload", s.Name, s.Status.Description)
		}
	}
}

// TestGlobalPropagatorWithoutTraceContextStillPropagatesW3C: a Tracer
// on OpenTelemetry's defaults, whose global propagator propagates nothing
// until the application sets one, still keeps and sends W3C trace context.
func TestGlobalPropagatorWithoutTraceContextStillPropagatesW3C(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := otelcourier.New(otelcourier.Config{TracerProvider: tp})
	ctx, span := tr.Start(t.Context(), "x", courier.SpanInternal)
	defer span.End()
	tc := tr.Inject(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; tc.Parent != want {
		t.Fatalf("Inject = %q, want %q", tc.Parent, want)
	}
	back := trace.SpanContextFromContext(tr.Extract(context.Background(), tc))
	if !back.IsRemote() || back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() {
		t.Fatalf("Extract = %v, want the remote %v", back, sc)
	}
}

// TestReceiverSpanIsNamedByTheRequestsMethod: a receiver's server span is
// named as the HTTP conventions name a span without a route, by the
// request's method, or HTTP for a method HTTP does not define: a GET a
// scanner sends is refused in a span named GET, not POST, its method
// recorded as it came (or _OTHER).
func TestReceiverSpanIsNamedByTheRequestsMethod(t *testing.T) {
	t.Parallel()
	srv, exporter, _ := tracedReceiver(t, func(context.Context, *sqlx.Tx, order) error { return nil })
	for _, c := range []struct{ method, name, attr string }{
		{http.MethodGet, "GET", "GET"},
		{http.MethodPut, "PUT", "PUT"},
		{"PROPFIND", "HTTP", "_OTHER"},
		{http.MethodPost, "POST", "POST"}, // unsigned: refused 401
	} {
		exporter.Reset()
		req, err := http.NewRequestWithContext(t.Context(), c.method, srv.URL+"/hooks", strings.NewReader(`{"id":"o-1"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		spans := exporter.GetSpans()
		if len(spans) != 1 || spans[0].SpanKind != trace.SpanKindServer {
			t.Fatalf("%s: spans %v, want one server span", c.method, names(spans))
		}
		if got := attrs(&spans[0])["http.request.method"].AsString(); spans[0].Name != c.name || got != c.attr {
			t.Errorf("%s answered %d: span %q with http.request.method %q, want %q with %q", c.method, resp.StatusCode, spans[0].Name, got, c.name, c.attr)
		}
	}
}

func attrs(s *tracetest.SpanStub) map[attribute.Key]attribute.Value {
	out := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value
	}
	return out
}

func find(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name + "/" + s.SpanKind.String()
	}
	return out
}

// TestReceiverSpanContinuesTheRequestsTraceContext: a receiver's server
// span, over a real connection, has the attributes the HTTP conventions
// require of a server span (http.request.method, url.scheme, url.path,
// http.response.status_code), its path shown as "/…" since it may hold a
// credential, and continues the request's trace context: the tracestate
// of all its header lines, whitespace around its members as it may be.
func TestReceiverSpanContinuesTheRequestsTraceContext(t *testing.T) {
	t.Parallel()
	srv, exporter, keys := tracedReceiver(t, func(context.Context, *sqlx.Tx, order) error { return nil })

	for i, c := range []struct {
		name  string
		state []string
		want  string
	}{
		{"tracestate in two lines", []string{"rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"}, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{"tracestate with tabs", []string{"foo=1 \t , \t bar=2, \t baz=3"}, "foo=1,bar=2,baz=3"},
	} {
		exporter.Reset()
		id := fmt.Sprintf("o-%d", i)
		req := couriertest.NewRequest(srv.URL+"/hooks/SECRET-TOKEN-42?key=SECRET-KEY-9", id, []byte(`{"id":"`+id+`"}`), keys.Signer)
		req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		for _, v := range c.state {
			req.Header.Add("tracestate", v)
		}
		resp, err := srv.Client().Do(req.WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		spans := exporter.GetSpans()
		var server *tracetest.SpanStub
		for i := range spans {
			if spans[i].SpanKind == trace.SpanKindServer {
				server = &spans[i]
			}
		}
		if resp.StatusCode != http.StatusOK || server == nil {
			t.Fatalf("%s: answered %d, spans %v; want 200 in a server span", c.name, resp.StatusCode, names(spans))
		}
		got := attrs(server)
		for k, v := range map[attribute.Key]attribute.Value{
			"http.request.method": attribute.StringValue("POST"), "url.scheme": attribute.StringValue("http"),
			"url.path": attribute.StringValue("/…"), "http.response.status_code": attribute.IntValue(200),
		} {
			if got[k] != v {
				t.Errorf("%s: server span %s = %q, want %q", c.name, k, got[k].String(), v.String())
			}
		}
		for _, kv := range server.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "SECRET") || strings.Contains(v, "hooks") {
				t.Errorf("%s: server span %s = %q holds the request's path or query", c.name, kv.Key, v)
			}
		}
		p := server.Parent
		if !p.IsRemote() || p.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || p.SpanID().String() != "b7ad6b7169203331" {
			t.Errorf("%s: server span parent %v, want the request's traceparent", c.name, p)
		}
		if ts := p.TraceState().String(); ts != c.want {
			t.Errorf("%s: server span parent's tracestate %q, want %q", c.name, ts, c.want)
		}
	}
}

package otelcourier_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/otelcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestHostileTraceHeadersAreIgnored: a receiver answers a request whose
// trace headers are malformed or hostile as it answers one without them,
// never 500: a traceparent too long, of version ff, of version 00 with
// more after it, not hex, or sent twice starts a trace of its own; a tracestate too long, of more than 32 list
// members, or with a member that is not one is dropped, and the request's
// traceparent is continued without it.
func TestHostileTraceHeadersAreIgnored(t *testing.T) {
	t.Parallel()
	srv, exporter, keys := tracedReceiver(t, func(context.Context, *sqlx.Tx, order) error { return nil })

	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		parent  = "00-" + traceID + "-b7ad6b7169203331-01"
	)
	var many []string
	for i := range 33 {
		many = append(many, fmt.Sprintf("v%d=x", i))
	}
	tests := []struct {
		name      string
		parent    []string
		state     string
		continued bool // the span continues parent
	}{
		{"traceparent of 8 KiB", []string{"cc-" + traceID + "-b7ad6b7169203331-01-" + strings.Repeat("a", 8<<10)}, "", false},
		{"version ff", []string{"ff" + parent[2:]}, "", false},
		{"version 00 with more", []string{parent + "-extra"}, "", false},
		{"traceparent twice", []string{parent, parent}, "", false},
		{"not hex", []string{"00-" + strings.Repeat("z", 32) + "-b7ad6b7169203331-01"}, "", false},
		{"tracestate of 8 KiB", []string{parent}, "k=" + strings.Repeat("v", 8<<10), true},
		{"tracestate of 33 members", []string{parent}, strings.Join(many, ","), true},
		{"tracestate not a list", []string{parent}, "no equals sign", true},
	}
	for i, tt := range tests {
		exporter.Reset()
		id := fmt.Sprintf("h-%d", i)
		req := couriertest.NewRequest(srv.URL+"/hooks", id, []byte(`{"id":"`+id+`"}`), keys.Signer)
		for _, v := range tt.parent {
			req.Header.Add("traceparent", v)
		}
		if tt.state != "" {
			req.Header.Set("tracestate", tt.state)
		}
		resp, err := srv.Client().Do(req.WithContext(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var server *tracetest.SpanStub
		spans := exporter.GetSpans()
		for i := range spans {
			if spans[i].SpanKind == trace.SpanKindServer {
				server = &spans[i]
			}
		}
		if resp.StatusCode != http.StatusOK || server == nil {
			t.Errorf("%s: answered %d, spans %v; want 200 in a server span", tt.name, resp.StatusCode, names(spans))
			continue
		}
		p := server.Parent
		if continued := p.IsValid() && p.TraceID().String() == traceID; continued != tt.continued {
			t.Errorf("%s: server span parent %v, continued %v, want %v", tt.name, p, continued, tt.continued)
		}
		if ts := p.TraceState().String(); ts != "" {
			t.Errorf("%s: server span parent's tracestate %q, want none", tt.name, ts)
		}
	}
}

// TestBaggageNeverLeavesTheProcess: with the propagator applications set
// as OpenTelemetry's global (W3C trace context and baggage), a delivery
// keeps and sends the trace context of its enqueue and nothing of the
// enqueuing request's baggage (which holds whatever the application put
// there: a user's id, an email), and a receiver takes no baggage from a
// request into the application's function: only traceparent and
// tracestate cross.
func TestBaggageNeverLeavesTheProcess(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := otelcourier.New(otelcourier.Config{TracerProvider: tp,
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})})
	senderPath := filepath.Join(t.TempDir(), "sender.db")
	sender := openTraced(t, senderPath, tr)
	inbox := openTraced(t, filepath.Join(t.TempDir(), "receiver.db"), tr)
	keys := couriertest.StandardWebhooksKeys("shop")
	var mu sync.Mutex
	var headers []http.Header
	var inFunc []baggage.Baggage
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, _ *sqlx.Tx, o order) error {
			mu.Lock()
			defer mu.Unlock()
			inFunc = append(inFunc, baggage.FromContext(ctx))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		first := len(headers) == 1
		mu.Unlock()
		if first { // retried by the next worker
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rcv.ServeHTTP(w, r)
	}), nil)
	t.Cleanup(srv.Close)

	member, err := baggage.NewMember("user.email", "alice-7731")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	reqCtx, request := tp.Tracer("shop").Start(baggage.ContextWithBaggage(ctx, bag), "POST /orders")
	tx, err := sender.Begin(reqCtx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sender.Outbox.Enqueue(reqCtx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{"id":"o-1"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	request.End()
	// A worker process with no tracer sends what the delivery kept (and
	// is answered 503); one with it, its attempt span's context.
	for _, traced := range []bool{false, true} {
		s := sender
		if !traced {
			if s, err = sqlite.Open(ctx, senderPath, store.Config{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
		}
		w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Transport: srv.Guard().Transport(),
			Backoff: func(int, time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := w.Work(ctx); n != 1 || err != nil {
			t.Fatalf("Work (traced %v) = %d, %v; want one attempt", traced, n, err)
		}
	}
	// A sender's own baggage header reaches no function either.
	req := couriertest.NewRequest(srv.URL+"/hooks", "o-2", []byte(`{"id":"o-2"}`), keys.Signer)
	req.Header.Set("baggage", "user.email=bob-4410")
	resp, err := srv.Client().Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	if len(headers) != 3 || len(inFunc) != 2 {
		t.Fatalf("%d requests, %d calls of the function; want 3 and 2", len(headers), len(inFunc))
	}
	for i, h := range headers[:2] {
		if h.Get("traceparent") == "" || !strings.Contains(h.Get("traceparent"), request.SpanContext().TraceID().String()) {
			t.Errorf("attempt %d: traceparent %q, want one of the enqueuing request's trace", i+1, h.Get("traceparent"))
		}
		for name, vs := range h {
			if v := strings.Join(vs, ","); strings.Contains(v, "alice") || strings.EqualFold(name, "baggage") {
				t.Errorf("attempt %d sent %s: %q", i+1, name, v)
			}
		}
	}
	for i, b := range inFunc {
		if b.Len() != 0 {
			t.Errorf("the function's call %d had baggage %q", i+1, b.String())
		}
	}
	for _, s := range exporter.GetSpans() {
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, "alice") || strings.Contains(v, "bob") {
				t.Errorf("span %s: %s = %q holds baggage", s.Name, kv.Key, v)
			}
		}
	}
}

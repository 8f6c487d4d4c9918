package otelcourier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/otelcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// One Tracer for the sender's store and worker and for the receiver: the
// receiver's function runs in the trace of the request that enqueued the
// notification. A real application sets its TracerProvider (with an OTLP
// exporter) and the W3C propagator as OpenTelemetry's globals, and
// otelcourier.New(otelcourier.Config{}) takes them.
func Example() {
	ctx := context.Background()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer tp.Shutdown(ctx)
	tracer := otelcourier.New(otelcourier.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})

	dir, _ := os.MkdirTemp("", "otelcourier")
	defer os.RemoveAll(dir)
	sender, _ := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Tracer: tracer})
	defer sender.Close()
	inbox, _ := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{Tracer: tracer})
	defer inbox.Close()
	keys := couriertest.StandardWebhooksKeys("shop")
	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(context.Context, *sqlx.Tx, order) error { return nil })
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()

	// The application's request span, and the enqueue inside it.
	reqCtx, span := tp.Tracer("shop").Start(ctx, "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	tx, _ := sender.Begin(reqCtx)
	sender.Outbox.Enqueue(reqCtx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{"id":"o-1"}`)})
	tx.Commit()
	span.End()

	w, _ := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	couriertest.Drain(ctx, w)

	byID := map[string]string{}
	for _, s := range exporter.GetSpans() {
		byID[s.SpanContext.SpanID().String()] = s.Name + " (" + s.SpanKind.String() + ")"
	}
	for _, want := range []string{"courier.enqueue (internal)", "POST (client)", "POST (server)", "courier.handle (internal)"} {
		for _, s := range exporter.GetSpans() {
			if s.Name+" ("+s.SpanKind.String()+")" == want && s.SpanContext.TraceID() == span.SpanContext().TraceID() {
				fmt.Printf("%s (%s) <- %s\n", s.Name, s.SpanKind, byID[s.Parent.SpanID().String()])
			}
		}
	}
	// Output:
	// courier.enqueue (internal) <- POST /orders (server)
	// POST (client) <- courier.enqueue (internal)
	// POST (server) <- POST (client)
	// courier.handle (internal) <- POST (server)
}

// readmeSample is the README's: the application's globals, one Tracer for
// every part of courier.
func readmeSample(ctx context.Context, signer signature.Signer, v signature.Verifier, fn func(context.Context, *sqlx.Tx, order) error) error {
	// readme:otel
	tracer := otelcourier.New(otelcourier.Config{})                    // otel's global TracerProvider and propagator
	s, err := sqlite.Open(ctx, "app.db", store.Config{Tracer: tracer}) // enqueue spans; each delivery keeps the trace context
	if err != nil {
		return err
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer}) // traced by its Store: claim, attempt (traceparent sent), settle
	if err != nil {
		return err
	}
	inbox, err := sqlite.Open(ctx, "inbox.db", store.Config{Tracer: tracer})
	if err != nil {
		return err
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: v}, fn) // continues the trace
	// readme:end
	_, _ = w, rcv
	return err
}

var _ = readmeSample // compiled for the README, not run

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
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// orderPaid is the receiver's notification type.
type orderPaid struct {
	ID string `json:"id" validate:"required,courier_token"`
}

func (o orderPaid) DedupeKey() string { return o.ID }

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

	dir, err := os.MkdirTemp("", "otelcourier")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	sender, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Tracer: tracer})
	if err != nil {
		panic(err)
	}
	defer sender.Close()
	inbox, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{Tracer: tracer})
	if err != nil {
		panic(err)
	}
	defer inbox.Close()
	keys := couriertest.StandardWebhooksKeys("shop")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(context.Context, *sqlx.Tx, orderPaid) error { return nil })
	if err != nil {
		panic(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()

	// The application's request span, and the enqueue inside it.
	reqCtx, span := tp.Tracer("shop").Start(ctx, "POST /orders", trace.WithSpanKind(trace.SpanKindServer))
	tx, err := sender.Begin(reqCtx)
	if err != nil {
		panic(err)
	}
	if _, err := sender.Outbox.Enqueue(reqCtx, tx, store.EnqueueParams{
		NotificationID: "o-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{"id":"o-1"}`),
	}); err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	span.End()

	w, err := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}

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

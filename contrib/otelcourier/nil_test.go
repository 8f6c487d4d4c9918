package otelcourier_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/otelcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestNilAndZeroTracersDeliver: a *Tracer left nil (an application that
// declares one and sets it only when tracing is on) traces nothing, and a
// zero Tracer (new(otelcourier.Tracer)) traces as New(Config{}) does, with
// OpenTelemetry's globals; with either, a Store's enqueue, its worker and
// a receiver work. Both panicked: in the application's Enqueue, inside its
// transaction, in every attempt, and in every request a receiver was
// sent, before it could answer.
func TestNilAndZeroTracersDeliver(t *testing.T) {
	t.Parallel()
	for name, tr := range map[string]*otelcourier.Tracer{"nil": nil, "zero": new(otelcourier.Tracer)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sender := openTraced(t, filepath.Join(t.TempDir(), "sender.db"), tr)
			inbox := openTraced(t, filepath.Join(t.TempDir(), "receiver.db"), tr)
			keys := couriertest.StandardWebhooksKeys("shop")
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
				func(context.Context, *sqlx.Tx, order) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			srv := couriertest.NewServer(rcv, nil)
			t.Cleanup(srv.Close)
			tx, err := sender.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sender.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{"id":"o-1"}`)}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			w, err := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Transport: srv.Guard().Transport(),
				Backoff: func(int, time.Duration) time.Duration { return 0 }})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := couriertest.Drain(ctx, w); err != nil {
				t.Fatal(err)
			}
			if d, err := sender.Outbox.Lookup(ctx, "o-1", srv.URL+"/hooks"); err != nil || d.Status != courier.StatusSucceeded || d.Attempts != 1 {
				t.Fatalf("delivery = %+v, %v; want succeeded at its first attempt", d, err)
			}
		})
	}
}

// openTraced opens a SQLite store at path traced by tr, closed at cleanup.
func openTraced(t *testing.T, path string, tr courier.Tracer) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, store.Config{Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tracedReceiver serves fn with a receiver for the "shop" sender's
// Standard Webhooks keys, on a SQLite inbox traced by an otelcourier
// Tracer that records its spans in the exporter it returns: the server,
// the exporter and the keys a sender signs with.
func tracedReceiver(t *testing.T, fn func(context.Context, *sqlx.Tx, order) error) (*httptest.Server, *tracetest.InMemoryExporter, couriertest.Keys) {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := otelcourier.New(otelcourier.Config{TracerProvider: tp, Propagator: propagation.TraceContext{}})
	inbox := openTraced(t, filepath.Join(t.TempDir(), "receiver.db"), tr)
	keys := couriertest.StandardWebhooksKeys("shop")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier}, fn)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	return srv, exporter, keys
}

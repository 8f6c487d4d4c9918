package otelcourier_test

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/otelcourier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

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

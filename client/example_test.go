package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// shipment is the receiver's notification type.
type shipment struct {
	ID    string `json:"id" validate:"required,courier_token"`
	Order string `json:"order" validate:"required"`
}

func (s shipment) DedupeKey() string { return s.ID }

// setupBothEnds opens a sender's outbox with one delivery enqueued and a
// receiver that sends what it applies to applied, on SQLite files in a
// temporary folder; done closes everything and removes the folder.
func setupBothEnds(ctx context.Context, applied chan<- string) (outbox *store.Store, srv *couriertest.Server, keys couriertest.Keys, done func()) {
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	outbox, err = sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	inbox, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	keys = couriertest.StandardWebhooksKeys("shop")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(_ context.Context, _ *sqlx.Tx, s shipment) error { applied <- s.ID; return nil })
	if err != nil {
		panic(err)
	}
	srv = couriertest.NewServer(rcv, nil)
	tx, _ := outbox.Begin(ctx)
	if _, err := outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: "ship-1", Endpoint: srv.URL + "/shipments", Payload: []byte(`{"id":"ship-1","order":"order-1"}`),
	}); err != nil {
		panic(err)
	}
	tx.Commit()
	return outbox, srv, keys, func() { srv.Close(); outbox.Close(); inbox.Close(); os.RemoveAll(dir) }
}

// Run delivers until its context ends; the worker is woken within
// milliseconds of a committed enqueue. (The Guard is opened for the test
// server: by default a worker sends only https to public addresses.)
func ExampleWorker_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	applied := make(chan string, 1)
	outbox, srv, keys, done := setupBothEnds(ctx, applied)
	defer done()

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		panic(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	fmt.Println("applied:", <-applied)
	cancel()
	fmt.Println("run returned:", <-stopped)
	// Output:
	// applied: ship-1
	// run returned: <nil>
}

// Work delivers one batch and returns once every attempt is settled: for
// tests, and for schedulers of one's own.
func ExampleWorker_Work() {
	ctx := context.Background()
	applied := make(chan string, 1)
	outbox, srv, keys, done := setupBothEnds(ctx, applied)
	defer done()

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		panic(err)
	}
	n, err := w.Work(ctx)
	fmt.Println("claimed:", n, err, "applied:", <-applied)
	n, err = w.Work(ctx)
	fmt.Println("claimed:", n, err)
	// Output:
	// claimed: 1 <nil> applied: ship-1
	// claimed: 0 <nil>
}

// Stop is the soft shutdown (SIGTERM): no more claims, the attempts in
// flight finish and settle, and what was claimed but not started is given
// back unspent; Run then returns. Cancelling Run's context instead cuts
// the attempts short.
func ExampleWorker_Stop() {
	ctx := context.Background()
	applied := make(chan string, 1)
	outbox, srv, keys, done := setupBothEnds(ctx, applied)
	defer done()

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		panic(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	fmt.Println("applied:", <-applied)

	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second) // how long in-flight attempts may take
	defer cancel()
	fmt.Println("stop:", w.Stop(stopCtx), "run returned:", <-stopped)
	_, err = w.Work(ctx)
	fmt.Println("work after stop:", err)
	// Output:
	// applied: ship-1
	// stop: <nil> run returned: <nil>
	// work after stop: worker_stopped
}

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// Run delivers until its context ends; the worker is woken within
// milliseconds of a committed enqueue. (The Guard is opened for the test
// server: by default a worker sends only https to public addresses.)
func ExampleWorker_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer outbox.Close()

	applied := make(chan string, 1)
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var shipment struct{ ID string }
		if err := json.NewDecoder(r.Body).Decode(&shipment); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		applied <- shipment.ID
		w.WriteHeader(http.StatusNoContent) // a plain webhook receiver: the none profile takes any 2xx
	}), nil)
	defer srv.Close()
	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "ship-1", Endpoint: srv.URL + "/shipments", Payload: []byte(`{"id":"ship-1","order":"order-1"}`),
		Profile: ack.ProfileNone,
	}); err != nil {
		panic(err)
	}
	keys := couriertest.StandardWebhooksKeys("shop")

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
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer outbox.Close()

	applied := make(chan string, 1)
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var shipment struct{ ID string }
		if err := json.NewDecoder(r.Body).Decode(&shipment); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		applied <- shipment.ID
		w.WriteHeader(http.StatusNoContent) // a plain webhook receiver: the none profile takes any 2xx
	}), nil)
	defer srv.Close()
	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "ship-1", Endpoint: srv.URL + "/shipments", Payload: []byte(`{"id":"ship-1","order":"order-1"}`),
		Profile: ack.ProfileNone,
	}); err != nil {
		panic(err)
	}
	keys := couriertest.StandardWebhooksKeys("shop")

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
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer outbox.Close()

	applied := make(chan string, 1)
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var shipment struct{ ID string }
		if err := json.NewDecoder(r.Body).Decode(&shipment); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		applied <- shipment.ID
		w.WriteHeader(http.StatusNoContent) // a plain webhook receiver: the none profile takes any 2xx
	}), nil)
	defer srv.Close()
	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "ship-1", Endpoint: srv.URL + "/shipments", Payload: []byte(`{"id":"ship-1","order":"order-1"}`),
		Profile: ack.ProfileNone,
	}); err != nil {
		panic(err)
	}
	keys := couriertest.StandardWebhooksKeys("shop")

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

package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/signature"
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

// Hook hears of every attempt, with its outcome, the delivery's status
// after it, and its codes: the place for metrics of one's own. Here the
// receiver's first answer is a 503; the worker retries (at once: the
// Backoff here waits for nothing) and the second attempt succeeds.
func ExampleConfig_hook() {
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
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	defer srv.Close()
	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "ship-1", Endpoint: srv.URL + "/shipments", Payload: []byte(`{"id":"ship-1"}`), Profile: ack.ProfileNone,
	}); err != nil {
		panic(err)
	}
	keys := couriertest.StandardWebhooksKeys("shop")

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Backoff: func(int, time.Duration) time.Duration { return 0 },
		Hook: func(e client.Event) {
			fmt.Printf("attempt %d of %s: %s, HTTP %d, now %s %q\n", e.Attempt, e.NotificationID, e.Outcome, e.HTTPStatus, e.Status, e.Code)
		},
	})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	// Output:
	// attempt 1 of ship-1: retry, HTTP 503, now retry_wait "receiver_unavailable"
	// attempt 2 of ship-1: succeeded, HTTP 204, now succeeded ""
}

// SignerFor signs each attempt with the key its delivery names
// (store.EnqueueParams.KeyID), asked afresh for every attempt, so that
// keys can be looked up, and rotated, while the worker runs. Its context
// bounds the lookup; an error that wraps courier.CodeConfigInvalid says
// the key is gone for good, and the delivery fails signing_failed.
func ExampleConfig_signerFor() {
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
	orders := couriertest.StandardWebhooksKeys("shop") // the key the receiver holds for "orders"
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := orders.Verifier.Verify(r.Context(), r, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), nil)
	defer srv.Close()
	for _, key := range []string{"orders", "retired"} {
		if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
			NotificationID: "n-" + key, Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`), Profile: ack.ProfileNone, KeyID: key,
		}); err != nil {
			panic(err)
		}
	}
	signers := map[string]signature.Signer{"orders": orders.Signer} // a key store of the application's

	w, err := client.NewWorker(client.Config{Store: outbox, Transport: srv.Guard().Transport(),
		SignerFor: func(ctx context.Context, keyID string) (signature.Signer, error) {
			if s, ok := signers[keyID]; ok {
				return s, nil
			}
			return nil, fmt.Errorf("no key %q: %w", keyID, courier.CodeConfigInvalid)
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	for _, id := range []string{"n-orders", "n-retired"} {
		page, err := outbox.Outbox.List(ctx, store.ListParams{NotificationID: id})
		if err != nil {
			panic(err)
		}
		d := page.Deliveries[0]
		fmt.Printf("%s: %s %q\n", id, d.Status, d.LastErrorCode)
	}
	// Output:
	// n-orders: succeeded ""
	// n-retired: failed "signing_failed"
}

// Classify is the application's say in what an unacknowledged answer
// means. This receiver answers 409 while another write to the same order
// is settling, which it knows to be transient: retried, under a code of
// the application's own; every other answer is judged as DefaultClassify
// judges it (a 422 fails for good). RetryClientErrors, in its place,
// would retry every 4xx but 401 and 410.
func ExampleConfig_classify() {
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
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var shipment struct{ Order string }
		if err := json.NewDecoder(r.Body).Decode(&shipment); err != nil || shipment.Order == "" {
			http.Error(w, "no order", http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}), couriertest.Sequence(couriertest.Fault{Status: http.StatusConflict})) // every first attempt: 409
	defer srv.Close()
	shipments := []store.EnqueueParams{
		{NotificationID: "ship-1", Payload: []byte(`{"id":"ship-1","order":"order-1"}`)},
		{NotificationID: "ship-2", Payload: []byte(`{"id":"ship-2"}`)}, // no order: the receiver refuses it
	}
	ids := make([]int64, len(shipments))
	for i, p := range shipments {
		p.Endpoint, p.Profile = srv.URL+"/shipments", ack.ProfileNone
		e, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), p)
		if err != nil {
			panic(err)
		}
		ids[i] = e.ID
	}
	keys := couriertest.StandardWebhooksKeys("shop")

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Classify: func(resp *http.Response, err error) client.Verdict {
			if resp != nil && resp.StatusCode == http.StatusConflict {
				return client.Verdict{Retry: true, Code: "order_busy"}
			}
			return client.DefaultClassify(resp, err)
		},
		Backoff: func(int, time.Duration) time.Duration { return 0 }, // retry at once, for the example
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	for i, id := range ids {
		attempts, err := outbox.Outbox.Attempts(ctx, id) // the attempts log, oldest first
		if err != nil {
			panic(err)
		}
		for _, a := range attempts {
			fmt.Printf("%s attempt %d: HTTP %d, %s %q\n", shipments[i].NotificationID, a.Attempt, a.HTTPStatus, a.Outcome, a.ErrorCode)
		}
	}
	// Output:
	// ship-1 attempt 1: HTTP 409, retry "order_busy"
	// ship-1 attempt 2: HTTP 204, succeeded ""
	// ship-2 attempt 1: HTTP 409, retry "order_busy"
	// ship-2 attempt 2: HTTP 422, failed "receiver_rejected"
}

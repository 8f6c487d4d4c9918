package couriertest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// A worker reaches an httptest server only through a Guard opened for it.
func ExampleGuard() {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	g := couriertest.Guard(srv.URL)
	fmt.Println(g.AllowHTTP, len(g.AllowPorts), len(g.AllowPrefixes))
	// Output: true 1 1
}

// Each test its own PostgreSQL database, migrated; call couriertest.Main
// from TestMain so the throwaway server stops after the tests.
func ExamplePostgresStore() {
	var t *testing.T // a test's own
	s := couriertest.PostgresStore(t, store.Config{})
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("orders").Signer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(t.Context(), w); err != nil {
		t.Fatal(err)
	}
}

// Several worker processes competing for one PostgreSQL outbox: each its
// own Store, with a pool of its own, over the same fresh database. Each
// Run ends with the test (t.Context ends before its cleanups run), and a
// cleanup registered after the Stores' waits for it: cleanups run last
// registered first, so no worker outlives the Stores it claims from.
func ExamplePostgresStores() {
	var t *testing.T // a test's own
	signer := couriertest.StandardWebhooksKeys("orders").Signer
	for i, s := range couriertest.PostgresStores(t, 3, store.Config{}) {
		w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Owner: fmt.Sprint("process-", i)})
		if err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- w.Run(t.Context()) }()
		t.Cleanup(func() { <-stopped })
	}
}

// A package whose tests use PostgresURL or PostgresStore stops the
// throwaway server they started from its TestMain:
//
//	func TestMain(m *testing.M) { couriertest.Main(m) }
func ExampleMain() {
	testMain := func(m *testing.M) { couriertest.Main(m) }
	_ = testMain
}

// Drain delivers what is due, retries that come due included, and says how
// many deliveries it claimed; a test then asserts on the receiver's side.
func ExampleDrain() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "couriertest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer outbox.Close()

	keys := couriertest.StandardWebhooksKeys("orders")
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), nil)
	defer srv.Close()
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
			NotificationID: id, Endpoint: srv.URL, Payload: []byte(`{}`), Profile: ack.ProfileNone,
		}); err != nil {
			panic(err)
		}
	}

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		panic(err)
	}
	n, err := couriertest.Drain(ctx, w)
	// How the deliveries ended is the outbox's to say: with the default
	// profile, the same 204s would have failed them (ack_invalid).
	h, herr := outbox.Outbox.Health(ctx)
	if herr != nil {
		panic(herr)
	}
	fmt.Println("claimed:", n, err, "received:", srv.Stats().Requests, "succeeded:", h.Counts[courier.StatusSucceeded])
	// Output: claimed: 3 <nil> received: 3 succeeded: 3
}

// A retry on the worker's default backoff is due seconds later, and an
// open breaker pauses for its Cooldown: a test moves the outbox Store's
// clock past the wait and drains again, without sleeping.
func ExampleDrain_clock() {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dir, err := os.MkdirTemp("", "couriertest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Now: clock})
	if err != nil {
		panic(err)
	}
	defer outbox.Close()

	keys := couriertest.StandardWebhooksKeys("orders")
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	defer srv.Close()
	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "o-1", Endpoint: srv.URL, Payload: []byte(`{}`), Profile: ack.ProfileNone,
	}); err != nil {
		panic(err)
	}

	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	d, err := outbox.Outbox.Lookup(ctx, "o-1", srv.URL)
	if err != nil {
		panic(err)
	}
	fmt.Println("after the 503:", d.Status, d.NextAttemptAt.After(clock()))

	mu.Lock()
	now = d.NextAttemptAt // the retry is due now
	mu.Unlock()
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	if d, err = outbox.Outbox.Lookup(ctx, "o-1", srv.URL); err != nil {
		panic(err)
	}
	fmt.Println("once the clock moved:", d.Status, d.Attempts)
	// Output:
	// after the 503: retry_wait true
	// once the clock moved: succeeded 2
}

// SeededScript injects faults at the rates given, the same ones for the
// same seed, so a failing soak test can be run again as it was.
func ExampleSeededScript() {
	script := couriertest.SeededScript(7, couriertest.ScriptSpec{FirstAttempt503: true, DropAfterCommit: 0.25})
	again := couriertest.SeededScript(7, couriertest.ScriptSpec{FirstAttempt503: true, DropAfterCommit: 0.25})
	first := script("o-1", 1)
	same := true
	for i := range 100 {
		id := fmt.Sprintf("o-%d", i)
		for attempt := 1; attempt <= 3; attempt++ {
			same = same && script(id, attempt) == again(id, attempt)
		}
	}
	fmt.Println("first attempt:", first.Status, "same faults for the same seed:", same)
	// Output: first attempt: 503 same faults for the same seed: true
}

// Each scheme has matched keys for a test: the Signer a worker uses and
// the Verifier a receiver uses.
func ExampleKeys() {
	body := []byte(`{"id":"o-1","status":"paid"}`)
	for _, k := range []struct {
		scheme string
		keys   couriertest.Keys
	}{
		{"standard webhooks", couriertest.StandardWebhooksKeys("orders")},
		{"rfc 9421", couriertest.RFC9421Keys("orders", "https://receiver.example")},
		{"adcp hmac", couriertest.AdCPHMACKeys("orders")},
		{"bearer", couriertest.BearerKeys("orders")},
	} {
		r := couriertest.NewRequest("https://receiver.example/orders", "o-1", body, k.keys.Signer)
		_, err := k.keys.Verifier.Verify(context.Background(), r, body)
		fmt.Println(k.scheme, err == nil)
	}
	// Output:
	// standard webhooks true
	// rfc 9421 true
	// adcp hmac true
	// bearer true
}

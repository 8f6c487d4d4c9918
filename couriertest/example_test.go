package couriertest_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// order is an application's notification type: a receiver dedupes by its
// DedupeKey.
type order struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Status string `json:"status" validate:"required"`
}

func (o order) DedupeKey() string { return o.ID }

// openStores opens a sender's and a receiver's SQLite stores in a
// temporary folder; done closes them and removes it.
func openStores(ctx context.Context) (outbox, inbox *store.Store, done func()) {
	dir, err := os.MkdirTemp("", "couriertest")
	if err != nil {
		panic(err)
	}
	if outbox, err = sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{}); err != nil {
		panic(err)
	}
	if inbox, err = sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{}); err != nil {
		panic(err)
	}
	return outbox, inbox, func() { outbox.Close(); inbox.Close(); os.RemoveAll(dir) }
}

// A receiver that fails every first attempt with 503: the worker retries,
// the notification is applied once.
func ExampleNewServer() {
	ctx := context.Background()
	outbox, inbox, done := openStores(ctx)
	defer done()

	keys := couriertest.StandardWebhooksKeys("orders")
	effects, _ := couriertest.NewEffects(ctx, inbox)
	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o order) error { return effects.Record(ctx, tx, o.ID) })
	srv := couriertest.NewServer(rcv, couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	defer srv.Close()

	tx, _ := outbox.Begin(ctx)
	outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL, Payload: []byte(`{"id":"o-1","status":"paid"}`)})
	tx.Commit()

	// Retries are due at once, so one Drain sees the delivery through.
	w, _ := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Backoff: func(int, time.Duration) time.Duration { return 0 }})
	couriertest.Drain(ctx, w)
	applied, _ := effects.Count(ctx, "o-1")
	st := srv.Stats()
	fmt.Println("requests:", st.Requests, "answered 503:", st.ByStatus[503], "applied:", applied)
	// Output: requests: 2 answered 503: 1 applied: 1
}

// Testing one's own receiver with a request signed the way a worker signs
// it.
func ExampleNewRequest() {
	ctx := context.Background()
	_, inbox, done := openStores(ctx)
	defer done()

	keys := couriertest.StandardWebhooksKeys("orders")
	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(context.Context, *sqlx.Tx, order) error { return nil })
	body := []byte(`{"id":"o-1","status":"paid"}`)
	for range 2 {
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, couriertest.NewRequest("https://receiver.example/orders", "o-1", body, keys.Signer))
		fmt.Println(rec.Code, ack.New("o-1", body).Verify(rec.Body.Bytes()) == nil)
	}
	// Output:
	// 200 true
	// 200 true
}

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
	w, _ := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("orders").Signer})
	couriertest.Drain(t.Context(), w)
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
		w, _ := client.NewWorker(client.Config{Store: s, Signer: signer, Owner: fmt.Sprint("process-", i)})
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
	outbox, _, done := openStores(ctx)
	defer done()

	keys := couriertest.StandardWebhooksKeys("orders")
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), nil)
	defer srv.Close()
	tx, _ := outbox.Begin(ctx)
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: srv.URL, Payload: []byte(`{}`), Profile: ack.ProfileNone})
	}
	tx.Commit()

	w, _ := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	n, err := couriertest.Drain(ctx, w)
	// How the deliveries ended is the outbox's to say: with the default
	// profile, the same 204s would have failed them (ack_invalid).
	h, _ := outbox.Outbox.Health(ctx)
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
	dir, _ := os.MkdirTemp("", "couriertest")
	defer os.RemoveAll(dir)
	outbox, _ := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{Now: clock})
	defer outbox.Close()

	keys := couriertest.StandardWebhooksKeys("orders")
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	defer srv.Close()
	tx, _ := outbox.Begin(ctx)
	outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL, Payload: []byte(`{}`), Profile: ack.ProfileNone})
	tx.Commit()

	w, _ := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	couriertest.Drain(ctx, w)
	d, _ := outbox.Outbox.Lookup(ctx, "o-1", srv.URL)
	fmt.Println("after the 503:", d.Status, d.NextAttemptAt.After(clock()))

	mu.Lock()
	now = d.NextAttemptAt // the retry is due now
	mu.Unlock()
	couriertest.Drain(ctx, w)
	d, _ = outbox.Outbox.Lookup(ctx, "o-1", srv.URL)
	fmt.Println("once the clock moved:", d.Status, d.Attempts)
	// Output:
	// after the 503: retry_wait true
	// once the clock moved: succeeded 2
}

// Effects counts what the application's function did, in the function's
// own transaction: a redelivery must leave every count at one.
func ExampleEffects() {
	ctx := context.Background()
	_, inbox, done := openStores(ctx)
	defer done()

	keys := couriertest.StandardWebhooksKeys("orders")
	effects, _ := couriertest.NewEffects(ctx, inbox)
	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o order) error { return effects.Record(ctx, tx, o.ID) })
	body := []byte(`{"id":"o-1","status":"paid"}`)
	for range 3 { // the same notification, delivered three times
		rcv.ServeHTTP(httptest.NewRecorder(), couriertest.NewRequest("https://receiver.example/orders", "o-1", body, keys.Signer))
	}
	counts, _ := effects.Counts(ctx)
	fmt.Println(counts)
	// Output: map[o-1:1]
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

// A receiver verifying RFC 9421 signatures names its own origin: the
// listener comes first, so its address is known when the keys are made.
func ExampleRFC9421Keys() {
	ctx := context.Background()
	outbox, inbox, done := openStores(ctx)
	defer done()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	keys := couriertest.RFC9421Keys("orders", "http://"+l.Addr().String())
	effects, _ := couriertest.NewEffects(ctx, inbox)
	rcv, _ := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o order) error { return effects.Record(ctx, tx, o.ID) })
	srv := couriertest.NewUnstartedServer(rcv, nil)
	srv.Listener = l
	srv.Start()
	defer srv.Close()

	tx, _ := outbox.Begin(ctx)
	outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: srv.URL + "/orders", Payload: []byte(`{"id":"o-1","status":"paid"}`)})
	tx.Commit()
	w, _ := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	couriertest.Drain(ctx, w)
	applied, _ := effects.Count(ctx, "o-1")
	fmt.Println("applied:", applied)
	// Output: applied: 1
}

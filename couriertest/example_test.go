package couriertest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

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

// openStores opens a sender's and a receiver's SQLite stores in dir.
func openStores(ctx context.Context, dir string) (outbox, inbox *store.Store) {
	var err error
	if outbox, err = sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{}); err != nil {
		panic(err)
	}
	if inbox, err = sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{}); err != nil {
		panic(err)
	}
	return outbox, inbox
}

// A receiver that fails every first attempt with 503: the worker retries,
// the notification is applied once.
func ExampleNewServer() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "couriertest")
	defer os.RemoveAll(dir)
	outbox, inbox := openStores(ctx, dir)
	defer outbox.Close()
	defer inbox.Close()

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
	dir, _ := os.MkdirTemp("", "couriertest")
	defer os.RemoveAll(dir)
	outbox, inbox := openStores(ctx, dir)
	defer outbox.Close()
	defer inbox.Close()

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

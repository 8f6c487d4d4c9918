package couriertest_test

import (
	"context"
	"fmt"
	"net/http"
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

// order is an application's notification type: a receiver dedupes by its
// DedupeKey.
type order struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Status string `json:"status" validate:"required"`
}

func (o order) DedupeKey() string { return o.ID }

// A receiver that fails every first attempt with 503: the worker retries,
// the notification is applied once.
func ExampleNewServer() {
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
	inbox, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer inbox.Close()

	keys := couriertest.StandardWebhooksKeys("orders")
	effects, err := couriertest.NewEffects(ctx, inbox)
	if err != nil {
		panic(err)
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o order) error { return effects.Record(ctx, tx, o.ID) })
	if err != nil {
		panic(err)
	}
	srv := couriertest.NewServer(rcv, couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	defer srv.Close()

	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "o-1", Endpoint: srv.URL, Payload: []byte(`{"id":"o-1","status":"paid"}`),
	}); err != nil {
		panic(err)
	}

	// Retries are due at once, so one Drain sees the delivery through.
	w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Backoff: func(int, time.Duration) time.Duration { return 0 }})
	if err != nil {
		panic(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		panic(err)
	}
	applied, err := effects.Count(ctx, "o-1")
	if err != nil {
		panic(err)
	}
	st := srv.Stats()
	fmt.Println("requests:", st.Requests, "answered 503:", st.ByStatus[503], "applied:", applied)
	// Output: requests: 2 answered 503: 1 applied: 1
}

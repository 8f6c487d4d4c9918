package couriertest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// refund is the receiver's notification type.
type refund struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Status string `json:"status" validate:"required"`
}

func (r refund) DedupeKey() string { return r.ID }

// A receiver verifying RFC 9421 signatures names its own origin: the
// listener comes first, so its address is known when the keys are made.
func ExampleRFC9421Keys() {
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

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	keys := couriertest.RFC9421Keys("orders", "http://"+l.Addr().String())
	effects, err := couriertest.NewEffects(ctx, inbox)
	if err != nil {
		panic(err)
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, r refund) error { return effects.Record(ctx, tx, r.ID) })
	if err != nil {
		panic(err)
	}
	srv := couriertest.NewUnstartedServer(rcv, nil)
	srv.Listener = l
	srv.Start()
	defer srv.Close()

	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "o-1", Endpoint: srv.URL + "/orders", Payload: []byte(`{"id":"o-1","status":"paid"}`),
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
	applied, err := effects.Count(ctx, "o-1")
	if err != nil {
		panic(err)
	}
	fmt.Println("applied:", applied)
	// Output: applied: 1
}

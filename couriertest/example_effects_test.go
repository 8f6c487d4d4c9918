package couriertest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// payment is the receiver's notification type.
type payment struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Status string `json:"status" validate:"required"`
}

func (p payment) DedupeKey() string { return p.ID }

// Effects counts what the application's function did, in the function's
// own transaction: a redelivery must leave every count at one.
func ExampleEffects() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "couriertest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
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
		func(ctx context.Context, tx *sqlx.Tx, p payment) error { return effects.Record(ctx, tx, p.ID) })
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"o-1","status":"paid"}`)
	for range 3 { // the same notification, delivered three times
		rcv.ServeHTTP(httptest.NewRecorder(), couriertest.NewRequest("https://receiver.example/orders", "o-1", body, keys.Signer))
	}
	counts, err := effects.Counts(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(counts)
	// Output: map[o-1:1]
}

package couriertest_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// invoice is the receiver's notification type.
type invoice struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Status string `json:"status" validate:"required"`
}

func (i invoice) DedupeKey() string { return i.ID }

// Testing one's own receiver with a request signed the way a worker signs
// it.
func ExampleNewRequest() {
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
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(context.Context, *sqlx.Tx, invoice) error { return nil })
	if err != nil {
		panic(err)
	}
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

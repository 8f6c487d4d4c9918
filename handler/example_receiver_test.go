package handler_test

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

// invoice is an application's own notification type: validated with
// validate tags, deduped by its DedupeKey.
type invoice struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Amount int    `json:"amount" validate:"min=1"`
}

func (i invoice) DedupeKey() string { return i.ID }

// A receiver for one's own payload type: the function runs once per
// invoice, in the transaction that records it; a redelivery gets the same
// Ack without running it again.
func ExampleNewReceiver() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "inbox.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	keys := couriertest.StandardWebhooksKeys("billing")

	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, inv invoice) error {
			fmt.Println("booking", inv.ID, inv.Amount)
			return nil // write the booking with tx, never through s.DB()
		})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"inv-7","amount":4200}`)
	for range 2 {
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, couriertest.NewRequest("https://billing.example/invoices", "inv-7", body, keys.Signer))
		fmt.Println(rec.Code)
	}
	// Output:
	// booking inv-7 4200
	// 200
	// 200
}

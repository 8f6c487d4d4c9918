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

// payment is an application's own notification type.
type payment struct {
	ID     string `json:"id" validate:"required,courier_token"`
	Amount int    `json:"amount" validate:"min=1"`
}

func (p payment) DedupeKey() string { return p.ID }

// A receiver's Hook learns what became of each request it answered: an
// Outcome, the status and, for a refusal, its code. Counted by Outcome, it
// is a receiver's metrics (contrib/promcourier does so): a redelivery is a
// duplicate, a request signed with another key rejected.
func ExampleEvent() {
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
	keys, stranger := couriertest.StandardWebhooksKeys("billing"), couriertest.StandardWebhooksKeys("stranger")

	counts := map[handler.Outcome]int{}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier,
		Hook: func(e handler.Event) { // quick, and never waits on the database
			counts[e.Outcome]++
			if e.Outcome == handler.OutcomeRejected {
				fmt.Println("rejected:", e.HTTPStatus, e.Code)
			}
		}},
		func(ctx context.Context, tx *sqlx.Tx, p payment) error { return nil })
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"inv-8","amount":100}`)
	for _, signer := range []couriertest.Keys{keys, keys, stranger} {
		rcv.ServeHTTP(httptest.NewRecorder(), couriertest.NewRequest("https://billing.example/payments", "inv-8", body, signer.Signer))
	}
	fmt.Println(counts[handler.OutcomeAccepted], counts[handler.OutcomeDuplicate], counts[handler.OutcomeRejected])
	// Output:
	// rejected: 401 signature_mismatch
	// 1 1 1
}

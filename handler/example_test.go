package handler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// openInbox opens a receiver's SQLite store in a temporary directory.
func openInbox(ctx context.Context) (*store.Store, func()) {
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	s, err := sqlite.Open(ctx, filepath.Join(dir, "inbox.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	return s, func() { s.Close(); os.RemoveAll(dir) }
}

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
	s, done := openInbox(ctx)
	defer done()
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

// A receiver's Hook learns what became of each request it answered: an
// Outcome, the status and, for a refusal, its code. Counted by Outcome, it
// is a receiver's metrics (contrib/promcourier does so): a redelivery is a
// duplicate, a request signed with another key rejected.
func ExampleEvent() {
	ctx := context.Background()
	s, done := openInbox(ctx)
	defer done()
	keys, stranger := couriertest.StandardWebhooksKeys("billing"), couriertest.StandardWebhooksKeys("stranger")

	counts := map[handler.Outcome]int{}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier,
		Hook: func(e handler.Event) { // quick, and never waits on the database
			counts[e.Outcome]++
			if e.Outcome == handler.OutcomeRejected {
				fmt.Println("rejected:", e.HTTPStatus, e.Code)
			}
		}},
		func(ctx context.Context, tx *sqlx.Tx, inv invoice) error { return nil })
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"inv-8","amount":100}`)
	for _, signer := range []couriertest.Keys{keys, keys, stranger} {
		rcv.ServeHTTP(httptest.NewRecorder(), couriertest.NewRequest("https://billing.example/invoices", "inv-8", body, signer.Signer))
	}
	fmt.Println(counts[handler.OutcomeAccepted], counts[handler.OutcomeDuplicate], counts[handler.OutcomeRejected])
	// Output:
	// rejected: 401 signature_mismatch
	// 1 1 1
}

// The terminal receiver refuses what it must not apply with a stable
// code, and an application refusal (Reject) is answered 422 so the sender
// stops retrying.
func ExampleNewReceiver_terminal() {
	ctx := context.Background()
	s, done := openInbox(ctx)
	defer done()
	keys := couriertest.StandardWebhooksKeys("cms-host")

	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			if n.PlanID != "plan-1" {
				return handler.Reject("plan_unknown", "no such plan")
			}
			return nil // update the plan with tx
		})
	if err != nil {
		panic(err)
	}
	for _, plan := range []string{"plan-1", "plan-9"} {
		lifecycle := ack.Digest([]byte(plan))
		n, err := ack.NewTerminal(ack.Terminal{
			EventID: "evt-" + plan, SiteID: "site-1", PlanID: plan, WebsiteVersion: "v1", SourceSequence: "1", JobCount: "1",
			ChangeSHA256: ack.Digest([]byte("change")), LifecycleBindingSHA256: ack.Digest([]byte("binding")),
			TerminalStatus: "published", LifecycleSHA256: &lifecycle,
		})
		if err != nil {
			panic(err)
		}
		body, _ := n.Payload()
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, couriertest.NewRequest("https://cms.example/terminal", n.NotificationID, body, keys.Signer))
		fmt.Println(plan, rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// plan-1 200 application/json
	// plan-9 422 application/problem+json
}

// A publish API for other services: authenticated callers fan an event out
// to their own tenant's subscriptions (the default authorization).
func ExampleNewPublish() {
	ctx := context.Background()
	s, done := openInbox(ctx)
	defer done()
	if _, err := s.Subscriptions.Create(ctx, s.DB(), store.SubscriptionParams{
		Tenant: "orders-service", Endpoint: "https://partner.example/hooks", EventTypes: []string{"order.paid"},
		KeyID: "partner-key",
	}); err != nil {
		panic(err)
	}
	keys := couriertest.BearerKeys("orders-service") // the caller's identity is the tenant
	pub, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: keys.Verifier})
	if err != nil {
		panic(err)
	}
	for _, body := range []string{
		`{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1","payload":{"order":"o-1"}}`,
		`{"notification_id":"n-1","endpoint":"https://attacker.example/","payload":{"order":"o-1"}}`,
	} {
		rec := httptest.NewRecorder()
		pub.ServeHTTP(rec, couriertest.NewRequest("https://courier.internal/publish", "", []byte(body), keys.Signer))
		var answer struct {
			NotificationIDs []string `json:"notification_ids"`
			Code            string   `json:"code"`
		}
		json.Unmarshal(rec.Body.Bytes(), &answer)
		fmt.Printf("%d %v %q\n", rec.Code, answer.NotificationIDs, answer.Code)
	}
	// Output:
	// 202 [evt-1:1] ""
	// 403 [] "forbidden"
}

// Reject refuses a notification for good: the receiver answers 422 with
// the code, nothing is written, and the sender does not retry.
func ExampleReject() {
	err := handler.Reject("plan_unknown", "no such plan")
	fmt.Println(courier.CodeOf(err), http.StatusUnprocessableEntity)
	// Output: plan_unknown 422
}

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

// The terminal receiver refuses what it must not apply with a stable
// code, and an application refusal (Reject) is answered 422 so the sender
// stops retrying.
func ExampleNewReceiver_terminal() {
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
		body, err := n.Payload()
		if err != nil {
			panic(err)
		}
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
	if _, err = s.Subscriptions.Create(ctx, s.DB(), store.SubscriptionParams{
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
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			panic(err)
		}
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

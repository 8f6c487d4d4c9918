package handler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
)

// idNote is a notification deduped by its id, as a sender's own payload
// type is.
type idNote struct {
	ID string `json:"id" validate:"required"`
}

func (n idNote) DedupeKey() string { return n.ID }

// TestTheSenderIsTheDedupeNamespace: two receivers on one Store (two
// endpoints of one service) get the same notification, as a sender that
// delivers one id to both sends it. Under one Sender the second answers
// it as a redelivery and its function never runs, as package handler's
// doc says; each under a Sender of its own, each function runs once.
func TestTheSenderIsTheDedupeNamespace(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		auditSender string
		wantAudit   int
	}{
		{"one sender", "shop", 0},
		{"a sender per endpoint", "shop/audit", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := anyStore(t)
			key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
			if err != nil {
				t.Fatal(err)
			}
			signer, err := signature.NewStandardWebhooksSigner(key)
			if err != nil {
				t.Fatal(err)
			}
			receiver := func(sender string, ran *int) http.Handler {
				v, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})
				if err != nil {
					t.Fatal(err)
				}
				h, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: v},
					func(context.Context, *sqlx.Tx, idNote) error { *ran++; return nil })
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			var orders, audit int
			mux := http.NewServeMux()
			mux.Handle("/hooks/orders", receiver("shop", &orders))
			mux.Handle("/hooks/audit", receiver(tt.auditSender, &audit))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			body := []byte(`{"id":"order-1-paid"}`)
			for _, path := range []string{"/hooks/orders", "/hooks/audit"} {
				resp, err := srv.Client().Do(couriertest.NewRequest(srv.URL+path, "order-1-paid", body, signer))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s answered %d, want 200", path, resp.StatusCode)
				}
			}
			if orders != 1 || audit != tt.wantAudit {
				t.Errorf("the orders function ran %d times and the audit one %d, want 1 and %d", orders, audit, tt.wantAudit)
			}
		})
	}
}

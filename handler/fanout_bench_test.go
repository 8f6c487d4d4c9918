package handler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// BenchmarkPublishReportingFanOut publishes a payload of about 1 MiB
// and 70,000 members to 1 and to 8 subscriptions of the reporting
// profile on a SQLite file, over the handler.
func BenchmarkPublishReportingFanOut(b *testing.B) {
	payload := benchkit.Object(70_000)
	for _, subs := range []int{1, 8} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "outbox.db"), store.Config{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			for i := range subs {
				if _, err := s.Subscriptions.Create(b.Context(), s.DB(), store.SubscriptionParams{Tenant: "orders-service",
					Endpoint: fmt.Sprintf("https://r%d.example/h", i), EventTypes: []string{"*"}, KeyID: "k", Profile: ack.ProfileReporting}); err != nil {
					b.Fatal(err)
				}
			}
			const token = "publisher-token-0123456789abcdefghijklmnop"
			secret, err := signature.ParseSecret("orders-service", token)
			if err != nil {
				b.Fatal(err)
			}
			v, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "orders-service", Tokens: []signature.Secret{secret}})
			if err != nil {
				b.Fatal(err)
			}
			p, err := NewPublish(PublishConfig{Store: s, Verifier: v, Body: middleware.BodyLimits{MaxBytes: 2 << 20}})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				body := fmt.Sprintf(`{"tenant":"orders-service","event_type":"report","event_id":"ev%d","payload":%s}`, i, payload)
				req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+token)
				rec := httptest.NewRecorder()
				p.ServeHTTP(rec, req)
				if rec.Code != http.StatusAccepted {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

package handler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// TestPublishReportingFanOutCopiesThePayload: a fan-out gives each
// reporting subscription the event's canonical payload with its own
// idempotency_key, and reads the payload once for all of them: a
// reporting subscription more costs the publish about as many
// allocations as a subscription of another profile, not some for each
// of the payload's members. The fan-out runs inside the publish's
// transaction, which on SQLite holds the database's one writer.
func TestPublishReportingFanOutCopiesThePayload(t *testing.T) {
	// Enough members that one allocation for each tenth of them stands
	// far above what a subscription costs whatever its payload (about a
	// hundred allocations, a reporting one a few more than a courier one).
	const members = 2_000
	var doc strings.Builder
	doc.WriteString(`{"z":"last","idempotency_key":"the publisher's","a":[1.50,"\u2028<&>"]`)
	for i := range members {
		fmt.Fprintf(&doc, `,"m%05d":{"n":%d}`, (i*7919)%members, i)
	}
	doc.WriteByte('}')
	payload, err := ack.Canonical([]byte(doc.String()))
	if err != nil {
		t.Fatal(err)
	}

	s, _ := setupPublishWith(t, handler.PublishConfig{})
	token, err := signature.ParseSecret("orders-service", publishToken)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "orders-service", Tokens: []signature.Secret{token}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: v, Authorize: allowPublish, Body: middleware.BodyLimits{MaxBytes: 4 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	event := 0
	publishEvent := func() {
		event++
		body := fmt.Sprintf(`{"tenant":"acme","event_type":"report","event_id":"ev%d","payload":%s}`, event, doc.String())
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+publishToken)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	addSubscriptions := func(n int, profile string) {
		for range n {
			if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme",
				Endpoint: fmt.Sprintf("https://r%d.example/h", rows(t, s, "courier_subscriptions")), EventTypes: []string{"*"}, KeyID: "k", Profile: profile}); err != nil {
				t.Fatal(err)
			}
		}
	}

	addSubscriptions(1, ack.ProfileReporting)
	addSubscriptions(4, ack.ProfileCourier)
	base := testing.AllocsPerRun(3, publishEvent)
	addSubscriptions(4, ack.ProfileCourier)
	courier := (testing.AllocsPerRun(3, publishEvent) - base) / 4
	addSubscriptions(4, ack.ProfileReporting)
	reporting := (testing.AllocsPerRun(3, publishEvent)-base)/4 - courier
	t.Logf("allocations: %.0f for the publish, %.0f more for each courier subscription, %.0f for each reporting one", base, courier, reporting)
	if reporting-courier > members/10 {
		t.Errorf("a reporting subscription costs %.0f allocations more than a courier one, for a payload of %d members", reporting-courier, members)
	}

	// Each reporting delivery holds what decoding the payload and encoding
	// it again with the delivery's key makes.
	rs, err := s.DB().QueryContext(t.Context(), `SELECT p.payload FROM courier_outbox o JOIN courier_outbox_payload p ON p.id = o.id JOIN courier_subscriptions s ON o.endpoint = s.endpoint WHERE o.profile = 'reporting' AND o.notification_id LIKE 'ev1:%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	keys := map[string]bool{}
	for rs.Next() {
		var got []byte
		if err := rs.Scan(&got); err != nil {
			t.Fatal(err)
		}
		var delivery struct {
			IdempotencyKey string `json:"idempotency_key"`
		}
		if err := json.Unmarshal(got, &delivery); err != nil || !strings.HasPrefix(delivery.IdempotencyKey, "whk_") || keys[delivery.IdempotencyKey] {
			t.Fatalf("idempotency_key %q (%v), seen %v", delivery.IdempotencyKey, err, keys)
		}
		keys[delivery.IdempotencyKey] = true
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		m["idempotency_key"], _ = json.Marshal(delivery.IdempotencyKey)
		want, err := canonical.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("stored payload differs (%d bytes, want %d): %.200s", len(got), len(want), got)
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("%d reporting deliveries of the first event, want 1", len(keys))
	}
}

package handler_test

import (
	"strings"
	"testing"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
)

// TestPublishNamesAPayloadTheOutboxCannotHold: a request that fits the
// handler's Body.MaxBytes can carry a payload whose canonical form, the
// form stored, is over store.MaxPayloadSize (a number with an exponent is
// written out in full), or reaches it once a reporting subscription's
// idempotency_key is added. The outbox refuses such a payload; Publish
// answered it 400 validation_failed naming no field ("the request was
// refused"), as if the request were wrong in some unknown way. It is now
// refused naming payload, rule max, on every engine, and nothing is
// stored: no delivery, no Idempotency-Key record.
func TestPublishNamesAPayloadTheOutboxCannotHold(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://ra.example/h",
			EventTypes: []string{"*"}, KeyID: "k", Profile: ack.ProfileReporting}); err != nil {
			t.Fatal(err)
		}
		srv := publishServer(t, s, handler.PublishConfig{Authorize: allowPublish, Body: middleware.BodyLimits{MaxBytes: 6 << 20}})

		// 1e15 is stored as 1000000000000000.0: a request of about 1.2 MiB
		// stores about 4.6 MiB.
		numbers := `{"n":[` + strings.Repeat("1e15,", 250_000) + `0]}`
		canonical, err := ack.Canonical([]byte(numbers))
		if err != nil || len(numbers) >= 2<<20 || len(canonical) <= store.MaxPayloadSize {
			t.Fatalf("%d bytes canonical, from %d (%v): want under 2 MiB making over MaxPayloadSize", len(canonical), len(numbers), err)
		}
		// Exactly MaxPayloadSize in canonical form: a reporting
		// subscription's payload, with its idempotency_key, is over it.
		exact := `{"s":"` + strings.Repeat("a", store.MaxPayloadSize-len(`{"s":""}`)) + `"}`

		for _, tc := range []struct{ name, body string }{
			{"one delivery", `{"notification_id":"n-1","endpoint":"https://x.example/h","payload":` + numbers + `}`},
			{"fan-out", `{"tenant":"acme","event_type":"order.paid","event_id":"e-1","payload":` + numbers + `}`},
			{"fan-out with idempotency_key", `{"tenant":"acme","event_type":"order.paid","event_id":"e-2","payload":` + exact + `}`},
		} {
			status, out := publish(t, srv, tc.body, "req-"+strings.ReplaceAll(tc.name, " ", "-"), publishToken)
			if status != 400 || !strings.Contains(string(out), `"code":"validation_failed"`) || !strings.Contains(string(out), `{"field":"payload","rule":"max"}`) {
				t.Errorf("%s: %d %.300s, want 400 validation_failed naming payload, rule max", tc.name, status, out)
			}
		}
		if n, m := rows(t, s, "courier_outbox"), rows(t, s, "courier_inbox"); n != 0 || m != 0 {
			t.Fatalf("refused publishes left %d deliveries and %d Idempotency-Key records", n, m)
		}
	})
}

// TestPublishStoresItsCanonicalForm: Publish stores a payload in canonical
// form, which can be longer than the request that carried it, plus a
// reporting subscription's idempotency_key. With every limit at its
// default, a request well under the 1 MiB Publish reads can enqueue a
// payload over the 1 MiB a default courier receiver reads, as
// store.Outbox.Enqueue takes one (up to store.MaxPayloadSize): accepted,
// as Publish's documentation says, for receivers configured to read it.
func TestPublishStoresItsCanonicalForm(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		for i, profile := range []string{ack.ProfileCourier, ack.ProfileReporting} {
			if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r" + string(rune('a'+i)) + ".example/h",
				EventTypes: []string{"*"}, KeyID: "k", Profile: profile}); err != nil {
				t.Fatal(err)
			}
		}
		srv := publishServer(t, s, handler.PublishConfig{Authorize: allowPublish})
		numbers := `{"n":[` + strings.Repeat("1e15,", 60_000) + `0]}`
		canonical, err := ack.Canonical([]byte(numbers))
		if err != nil || len(numbers) >= 512<<10 || len(canonical) <= 1<<20 {
			t.Fatalf("%d bytes canonical, from %d (%v): want under 512 KiB making over 1 MiB", len(canonical), len(numbers), err)
		}
		status, out := publish(t, srv, `{"tenant":"acme","event_type":"order.paid","event_id":"e-1","payload":`+numbers+`}`, "", publishToken)
		if status != 202 {
			t.Fatalf("publish: %d %.300s, want 202", status, out)
		}
		sizes, query := []int{}, "SELECT LENGTH(payload) FROM courier_outbox ORDER BY endpoint"
		if s.Engine() == "sqlite" { // the payload in a table of its own (migration 13)
			query = "SELECT LENGTH(p.payload) FROM courier_outbox o JOIN courier_outbox_payload p ON p.id = o.id ORDER BY o.endpoint"
		}
		if err := s.DB().Select(&sizes, query); err != nil {
			t.Fatal(err)
		}
		if len(sizes) != 2 || sizes[0] != len(canonical) || sizes[1] <= len(canonical) {
			t.Fatalf("stored payloads of %v bytes, want %d (canonical) and more (with idempotency_key)", sizes, len(canonical))
		}
	})
}

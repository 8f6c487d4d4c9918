package store_test

import (
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestPublishRefusesAnOversizePayloadWithoutSubscriptions: Outbox.Publish
// refuses its parameters whether or not a subscription matches, except a
// Payload over MaxPayloadSize: with no matching subscription it returned
// no error, and the same call refused it (invalid_argument) once a
// subscription was created. It is now refused either way.
func TestPublishRefusesAnOversizePayloadWithoutSubscriptions(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	payload := []byte(`{"s":"` + strings.Repeat("a", store.MaxPayloadSize) + `"}`)
	p := store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-1", Payload: payload}
	if _, err := s.Outbox.Publish(t.Context(), s.DB(), p); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("Publish of %d bytes, no subscription: %v, want invalid_argument", len(payload), err)
	}
	if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r.example/h",
		EventTypes: []string{"*"}, KeyID: "k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.Publish(t.Context(), s.DB(), p); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("Publish of %d bytes, one subscription: %v, want invalid_argument", len(payload), err)
	}
}

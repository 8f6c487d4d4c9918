package store_test

import (
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestNewEndpointNamesItsHostAsItIsDialed: the store keeps one endpoint
// per receiver (one breaker, one set of limits, one disable), folding the
// spellings of its URL's scheme, host case and default port; it took a
// host in other characters than ASCII (https://ｒ.example/h,
// percent-encoded or not) or with a trailing root dot as another
// endpoint, which the worker dials as the ASCII one: a receiver an
// operator disabled was sent to all the same under such a spelling. An
// endpoint entering the store (an enqueue, a subscription created or
// moved) with such a host is now invalid_argument; an internationalized
// name is taken in its A-label form.
func TestNewEndpointNamesItsHostAsItIsDialed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t)
	if err := s.Endpoints.Disable(ctx, "https://r.example/h"); err != nil {
		t.Fatal(err)
	}
	sub, err := s.Subscriptions.Create(ctx, s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://a.example/h", EventTypes: []string{"*"}, KeyID: "k"})
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"https://ｒ.example/h", "https://%EF%BD%92.example/h", "https://r.example./h", "https://R.EXAMPLE.:443/h"} {
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: url, Payload: []byte(`{}`)}); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Enqueue to %s: %v, want invalid_argument", url, err)
		}
		if _, err := s.Outbox.EnqueueMany(ctx, s.DB(), []store.EnqueueParams{{NotificationID: "n-1", Endpoint: url, Payload: []byte(`{}`)}}); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("EnqueueMany to %s: %v, want invalid_argument", url, err)
		}
		if _, err := s.Subscriptions.Create(ctx, s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: url, EventTypes: []string{"*"}, KeyID: "k"}); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Subscriptions.Create at %s: %v, want invalid_argument", url, err)
		}
		if _, err := s.Subscriptions.Update(ctx, s.DB(), sub.ID, store.SubscriptionParams{Tenant: "acme", Endpoint: url, EventTypes: []string{"*"}, KeyID: "k"}); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Subscriptions.Update to %s: %v, want invalid_argument", url, err)
		}
	}
	if h, err := s.Outbox.Health(ctx); err != nil || h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("refused enqueues stored %v (%v)", h.Counts, err)
	}
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{NotificationID: "n-2", Endpoint: "https://xn--bcher-kva.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Errorf("Enqueue to an A-label host: %v", err)
	}
}

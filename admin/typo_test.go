package admin

import (
	"net/url"
	"strings"
	"testing"

	"github.com/courier-go/courier/store"
)

// An operator who types an endpoint's URL into the page's disable form
// and misspells it disables an endpoint no one sends to, and the one
// meant goes on receiving. The disable stands (an endpoint may be
// disabled ahead of its deliveries), but the page says that the
// database knew no such endpoint; a URL it knows is disabled without a
// word more.
func TestOpsPageSaysATypedEndpointToDisableIsUnknown(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t, allowAll)
	if _, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), store.EnqueueParams{
		NotificationID: "n-1", Endpoint: hookA, Payload: []byte(`{"id":"n-1"}`),
	}); err != nil {
		t.Fatal(err)
	}
	const warning = "The database knew no endpoint at that URL"
	for _, tc := range []struct {
		typed   string
		unknown bool
	}{
		{hookA + "s", true}, // a typo in the path
		{hookA, false},
	} {
		resp, _ := b.do(t, "POST", "/ops/endpoints/disable", "endpoint="+url.QueryEscape(tc.typed), nil)
		page := b.follow(t, resp)
		if !strings.Contains(page, "Endpoint disabled.") || strings.Contains(page, warning) != tc.unknown {
			t.Errorf("disable of %s (unknown %v): the page does not say so: %s", tc.typed, tc.unknown, page)
		}
		if h, err := b.store.Endpoints.Get(t.Context(), tc.typed); err != nil || h.State != store.EndpointDisabled {
			t.Errorf("%s is %s (%v), want disabled", tc.typed, h.State, err)
		}
	}
}

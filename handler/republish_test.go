package handler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestPublishAgainAfterAKeyRotationReachesEverySubscription: an event's
// delivery to a subscription is suppressed because the tenant rotated
// the subscription's key, and the tenant adds a subscription. The
// publisher posts the very same request again: it was 409
// idempotency_collision, "received with another body", and nothing was
// enqueued for anyone. It is 202: the delivery is sent again under the
// new key with its notification id, and the new subscription gets one.
// The same event_id with another payload is still 409, described as what
// it is.
func TestPublishAgainAfterAKeyRotationReachesEverySubscription(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s := e.open(t)
			srv := publishServer(t, s, handler.PublishConfig{Authorize: allowPublish})
			params := store.SubscriptionParams{Tenant: "acme", Endpoint: "https://ra.example/h", EventTypes: []string{"*"},
				KeyID: "k1"}
			rotated, err := s.Subscriptions.Create(t.Context(), nil, params)
			if err != nil {
				t.Fatal(err)
			}
			claim := func() []protocol.Claimed {
				t.Helper()
				c, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			body := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"order":1}}`
			if status, out := publish(t, srv, body, "", publishToken); status != http.StatusAccepted {
				t.Fatalf("first publish: %d %s", status, out)
			}

			params.KeyID = "k2"
			if _, err := s.Subscriptions.Update(t.Context(), nil, rotated.ID, params); err != nil {
				t.Fatal(err)
			}
			if c := claim(); len(c) != 0 {
				t.Fatalf("claimed %d deliveries, want the one made under k1 suppressed", len(c))
			}
			params.Endpoint, params.KeyID = "https://rb.example/h", "k1"
			added, err := s.Subscriptions.Create(t.Context(), nil, params)
			if err != nil {
				t.Fatal(err)
			}

			status, out := publish(t, srv, body, "", publishToken)
			var resp struct {
				NotificationIDs []string `json:"notification_ids"`
			}
			want := []string{fmt.Sprintf("evt-1:%d", rotated.ID), fmt.Sprintf("evt-1:%d", added.ID)}
			if status != http.StatusAccepted || json.Unmarshal(out, &resp) != nil || !slices.Equal(resp.NotificationIDs, want) {
				t.Fatalf("the same request again after the rotation: %d %s, want 202 with %v", status, out, want)
			}
			keys := map[string]string{}
			for _, c := range claim() {
				keys[c.NotificationID] = c.KeyID
			}
			if keys[want[0]] != "k2" || keys[want[1]] != "k1" || len(keys) != 2 {
				t.Fatalf("claimed %v (notification id: key), want %s under k2 and %s under k1", keys, want[0], want[1])
			}

			status, out = publish(t, srv, strings.Replace(body, `"order":1`, `"order":2`, 1), "", publishToken)
			var problem struct {
				Code   courier.Code `json:"code"`
				Detail string       `json:"detail"`
			}
			if status != http.StatusConflict || json.Unmarshal(out, &problem) != nil || problem.Code != courier.CodeIdempotencyCollision ||
				strings.Contains(problem.Detail, "another body") || !strings.Contains(problem.Detail, "published before") {
				t.Fatalf("the event again with another payload: %d %s, want 409 idempotency_collision saying it was published before", status, out)
			}
		})
	}
}

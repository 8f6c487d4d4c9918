package storetest_test

import (
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// TestADeletedSubscriptionGetsNoEventAndSendsNoneEnqueued, on both
// engines: once Subscriptions.Delete commits, Publish fans out past the
// subscription, its delivery already enqueued is suppressed at its claim
// (subscription_changed) while the other subscription's is leased, and a
// subscription created later is not given its id. A Delete of another
// tenant's subscription, of a missing one, or rolled back, removes
// nothing.
func TestADeletedSubscriptionGetsNoEventAndSendsNoneEnqueued(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ctx := t.Context()
		create := func(endpoint string) store.Subscription {
			t.Helper()
			sub, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{
				Tenant: "acme", Endpoint: endpoint, EventTypes: []string{"order.paid"}, KeyID: "k1",
			})
			if err != nil {
				t.Fatal(err)
			}
			return sub
		}
		publish := func(eventID string) map[int64]store.Published {
			t.Helper()
			made, err := s.Outbox.Publish(ctx, s.DB(), store.PublishParams{
				Tenant: "acme", EventType: "order.paid", EventID: eventID, Payload: []byte(`{"order":1}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			bySub := map[int64]store.Published{}
			for _, p := range made {
				bySub[p.SubscriptionID] = p
			}
			return bySub
		}
		kept := create("https://kept.example/h")
		gone := create("https://gone.example/h") // the latest id, which a registry reusing ids would give again
		before := publish("evt-1")
		if len(before) != 2 {
			t.Fatalf("evt-1 made %d deliveries, want one per subscription (2)", len(before))
		}

		// Nothing is removed by a Delete that is refused or rolled back.
		if err := s.Subscriptions.Delete(ctx, nil, gone.ID, "globex"); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Delete of another tenant's subscription: %v, want %s", err, courier.CodeInvalidArgument)
		}
		if err := s.Subscriptions.Delete(ctx, nil, gone.ID+1000, "acme"); courier.CodeOf(err) != courier.CodeNotFound {
			t.Errorf("Delete of a missing subscription: %v, want %s", err, courier.CodeNotFound)
		}
		if err := s.Subscriptions.Delete(ctx, nil, gone.ID, ""); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Delete with no tenant: %v, want %s", err, courier.CodeInvalidArgument)
		}
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Subscriptions.Delete(ctx, tx, gone.ID, "acme"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Subscriptions.Get(ctx, nil, gone.ID); err != nil {
			t.Fatalf("after refused and rolled-back Deletes, Get: %v; want the subscription", err)
		}

		if err := s.Subscriptions.Delete(ctx, nil, gone.ID, "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Subscriptions.Get(ctx, nil, gone.ID); courier.CodeOf(err) != courier.CodeNotFound {
			t.Errorf("Get of the deleted subscription: %v, want %s", err, courier.CodeNotFound)
		}
		if err := s.Subscriptions.Delete(ctx, nil, gone.ID, "acme"); courier.CodeOf(err) != courier.CodeNotFound {
			t.Errorf("a second Delete: %v, want %s", err, courier.CodeNotFound)
		}
		if subs, err := s.Subscriptions.List(ctx, "acme"); err != nil || len(subs) != 1 || subs[0].ID != kept.ID {
			t.Errorf("List after the Delete: %+v, %v; want only subscription %d", subs, err, kept.ID)
		}
		if after := publish("evt-2"); len(after) != 1 || after[kept.ID].ID == 0 {
			t.Errorf("evt-2 made %+v; want one delivery, to subscription %d", after, kept.ID)
		}

		var ended []protocol.Ended
		leased, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{
			Owner: "w", Limit: 10, Lease: time.Hour, Ended: func(e protocol.Ended) { ended = append(ended, e) },
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range leased {
			if c.SubscriptionID != kept.ID {
				t.Errorf("leased %s of subscription %d; only subscription %d's may be sent", c.NotificationID, c.SubscriptionID, kept.ID)
			}
		}
		if len(leased) != 2 {
			t.Errorf("leased %d deliveries, want the kept subscription's two (evt-1, evt-2)", len(leased))
		}
		d, err := s.Outbox.Get(ctx, before[gone.ID].ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeSubscriptionChanged || d.SubscriptionID != gone.ID {
			t.Errorf("the deleted subscription's delivery: %s, %s, subscription %d; want suppressed, %s, subscription %d",
				d.Status, d.LastErrorCode, d.SubscriptionID, courier.CodeSubscriptionChanged, gone.ID)
		}
		if len(ended) != 1 || ended[0].DeliveryID != d.ID || ended[0].Code != courier.CodeSubscriptionChanged {
			t.Errorf("the claim ended %+v; want delivery %d, %s", ended, d.ID, courier.CodeSubscriptionChanged)
		}

		if next := create("https://next.example/h"); next.ID <= gone.ID {
			t.Errorf("a subscription created after the Delete has id %d; want one above the deleted %d, never given again", next.ID, gone.ID)
		}
	})
}

package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/jmoiron/sqlx"
)

// republishing is an event published once to one subscription, for the
// tests of publishing it again after the subscription changed.
type republishing struct {
	*bundle
	sub   store.Subscription // as it is now
	event store.PublishParams
	first store.Published // the subscription's delivery of the first publish
}

// builtFor is what the republishing tests' Build makes for s: bytes that
// depend on the subscription's profile, as the handler's do (reporting
// receivers get the delivery's idempotency key).
func builtFor(s store.Subscription, key string) []byte {
	return []byte(`{"order":1,"profile":"` + s.Profile + `","idempotency_key":"` + key + `"}`)
}

// setupRepublish publishes event evt-1 of tenant acme to one subscription
// with key key-1, with Build (built) or a fixed Payload, and commits.
func setupRepublish(t *testing.T, open OpenFunc, cfg store.Config, built bool) *republishing {
	t.Helper()
	r := &republishing{bundle: setup(t, open, cfg)}
	sub, err := r.store.Subscriptions.Create(r.ctx, nil, subscription("acme", "https://a.example/h", "key-1", "*"))
	if err != nil {
		t.Fatal(err)
	}
	r.sub = sub
	r.event = store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":1}`)}
	if built {
		r.event.Payload = nil
		r.event.Build = func(s store.Subscription, key string) ([]byte, error) { return builtFor(s, key), nil }
	}
	published := r.publish(t)
	if len(published) != 1 || published[0].Existed {
		t.Fatalf("first publish = %+v, want one new delivery", published)
	}
	r.first = published[0]
	return r
}

// publish publishes r.event again in a transaction of its own, committed.
func (r *republishing) publish(t *testing.T) []store.Published {
	t.Helper()
	published, err := r.publishErr(t, r.event)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	return published
}

// publishErr publishes p in a transaction of its own: committed if it
// succeeds, rolled back if not.
func (r *republishing) publishErr(t *testing.T, p store.PublishParams) ([]store.Published, error) {
	t.Helper()
	return inCommitted(t, r.bundle, func(tx *sqlx.Tx) ([]store.Published, error) { return r.store.Outbox.Publish(r.ctx, tx, p) })
}

// update changes the subscription, as its tenant would.
func (r *republishing) update(t *testing.T, edit func(p *store.SubscriptionParams)) {
	t.Helper()
	p := r.sub.SubscriptionParams
	edit(&p)
	sub, err := r.store.Subscriptions.Update(r.ctx, nil, r.sub.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	r.sub = sub
}

func rotateKey(p *store.SubscriptionParams) { p.KeyID = "key-2" }

// claimSuppressed claims and expects nothing: the subscription's
// delivery is suppressed, subscription_changed.
func (r *republishing) claimSuppressed(t *testing.T) {
	t.Helper()
	if c := r.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v, want the delivery suppressed", ids(c))
	}
	if d := r.get(t, r.first.ID); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeSubscriptionChanged {
		t.Fatalf("delivery is %s/%s, want suppressed/subscription_changed", d.Status, d.LastErrorCode)
	}
}

// wantSentAsNow checks that c is the subscription's delivery, sent under
// the subscription as it is now, with the identity it was first published
// under.
func (r *republishing) wantSentAsNow(t *testing.T, c protocol.Claimed) {
	t.Helper()
	payload := string(r.event.Payload)
	switch {
	case r.event.Build != nil:
		payload = string(builtFor(r.sub, r.first.IdempotencyKey))
	case r.sub.Profile == ack.ProfileReporting: // the Payload under the delivery's own key, which sorts first in it
		canonical, err := ack.Canonical(r.event.Payload)
		if err != nil {
			t.Fatal(err)
		}
		payload = strings.Replace(string(canonical), "{", `{"idempotency_key":"`+r.first.IdempotencyKey+`",`, 1)
	}
	switch {
	case c.DeliveryID != r.first.ID || c.NotificationID != r.first.NotificationID || c.Endpoint != r.sub.Endpoint:
		t.Fatalf("claimed delivery %d %s to %s, want %d %s to %s", c.DeliveryID, c.NotificationID, c.Endpoint,
			r.first.ID, r.first.NotificationID, r.sub.Endpoint)
	case c.KeyID != r.sub.KeyID || c.Profile != r.sub.Profile || string(c.Payload) != payload:
		t.Fatalf("claimed under key %q, profile %q, payload %s; want the subscription's now: %q, %q, %s",
			c.KeyID, c.Profile, c.Payload, r.sub.KeyID, r.sub.Profile, payload)
	}
}

// wantCheckOK runs Outbox.Check: every row the publishes wrote keeps the
// outbox's invariants.
func (r *republishing) wantCheckOK(t *testing.T) {
	t.Helper()
	if h := check(t, r.bundle, 0); h.Status != store.HealthOK || len(h.Invalid) != 0 {
		t.Fatalf("Check = %s/%s, invalid %v: want ok", h.Status, h.Code, h.Invalid)
	}
}

// testRepublishAfterASubscriptionChangeSendsUnderItAsItIsNow: an event's
// delivery is suppressed at its claim because its subscription changed
// (key rotated, profile changed, paused, event type dropped) and, where
// it was, changed back. Publishing the event again was an idempotency
// collision for the whole fan-out (or, after it was resumed, found the
// suppressed delivery and sent nothing). It
// sends the delivery again under the subscription as it is now, with the
// same notification id and idempotency key, and reaches a subscription
// created since; publishing it once more writes nothing.
func testRepublishAfterASubscriptionChangeSendsUnderItAsItIsNow(t *testing.T, open OpenFunc) {
	changes := []struct {
		name   string
		change func(p *store.SubscriptionParams)
		back   func(p *store.SubscriptionParams) // after the suppressing claim; nil: none
	}{
		{"key rotated", rotateKey, nil},
		{"profile changed", func(p *store.SubscriptionParams) { p.Profile = ack.ProfileReporting }, nil},
		{"resumed", func(p *store.SubscriptionParams) { p.Paused = true }, func(p *store.SubscriptionParams) { p.Paused = false }},
		{"event type dropped and taken back", func(p *store.SubscriptionParams) { p.EventTypes = []string{"order.created"} },
			func(p *store.SubscriptionParams) { p.EventTypes = []string{"order.created", "order.paid"} }},
	}
	for _, c := range changes {
		for _, built := range []bool{true, false} {
			name := c.name + "/payload"
			if built {
				name = c.name + "/build"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := setupRepublish(t, open, store.Config{}, built)
				r.update(t, c.change)
				r.claimSuppressed(t)
				if c.back != nil {
					r.update(t, c.back)
				}
				other, err := r.store.Subscriptions.Create(r.ctx, nil, subscription("acme", "https://b.example/h", "key-b", "*"))
				if err != nil {
					t.Fatal(err)
				}

				again := r.publish(t)
				if len(again) != 2 || again[0].ID != r.first.ID || again[0].Existed ||
					again[0].NotificationID != r.first.NotificationID || again[0].IdempotencyKey != r.first.IdempotencyKey ||
					again[1].SubscriptionID != other.ID || again[1].Existed {
					t.Fatalf("published again: %+v; want delivery %d sent again under its identity, and a new one for subscription %d",
						again, r.first.ID, other.ID)
				}
				claimed := r.claim(t, "w", 10, time.Minute)
				if len(claimed) != 2 {
					t.Fatalf("claimed %v, want both subscriptions' deliveries", ids(claimed))
				}
				for _, x := range claimed {
					if x.SubscriptionID == r.sub.ID {
						r.wantSentAsNow(t, x)
						if x.Attempt != 2 { // the suppressing claim counted the first
							t.Fatalf("sent again as attempt %d, want 2", x.Attempt)
						}
					}
				}

				// Once more: everything is found, nothing written.
				for _, p := range r.publish(t) {
					if !p.Existed {
						t.Fatalf("published a third time: %+v, want every delivery found", p)
					}
				}
				if d := r.get(t, r.first.ID); d.Status != courier.StatusLeased {
					t.Fatalf("after the third publish the delivery is %s, want still leased", d.Status)
				}
				r.wantCheckOK(t)
			})
		}
	}
}

// testRepublishBringsAnUnsentDeliveryUpToDate: a delivery not sent yet
// when its subscription's key rotated, pending, retrying or in flight,
// would be suppressed at its next claim. Publishing the event again
// brings it up to date in place, keeping its schedule and attempts: its
// next attempt is made under the new key. An attempt in flight is not
// recalled: its lease still settles it.
func testRepublishBringsAnUnsentDeliveryUpToDate(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		// before runs before the rotation; it returns the lease it holds, if any.
		before func(t *testing.T, r *republishing) *protocol.Lease
		status courier.Status // the delivery's after the publish again
		// after settles what before leased, if anything.
		after   func(t *testing.T, r *republishing, l *protocol.Lease)
		attempt int // of the next claim
	}{
		{
			name:    "pending",
			before:  func(*testing.T, *republishing) *protocol.Lease { return nil },
			status:  courier.StatusPending,
			after:   func(*testing.T, *republishing, *protocol.Lease) {},
			attempt: 1,
		},
		{
			name: "retrying",
			before: func(t *testing.T, r *republishing) *protocol.Lease {
				c := r.claim(t, "w", 1, time.Minute)
				if err := r.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Minute}); err != nil {
					t.Fatal(err)
				}
				return nil
			},
			status:  courier.StatusRetryWait,
			after:   func(*testing.T, *republishing, *protocol.Lease) {},
			attempt: 2,
		},
		{
			name: "leased, then retried",
			before: func(t *testing.T, r *republishing) *protocol.Lease {
				return &r.claim(t, "w", 1, time.Minute)[0].Lease
			},
			status: courier.StatusLeased,
			after: func(t *testing.T, r *republishing, l *protocol.Lease) {
				if err := r.retry(*l, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Minute}); err != nil {
					t.Fatalf("the attempt in flight could not settle: %v", err)
				}
			},
			attempt: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupRepublish(t, open, store.Config{}, true)
			lease := tt.before(t, r)
			before := r.get(t, r.first.ID)
			r.update(t, rotateKey)

			again := r.publish(t)
			if len(again) != 1 || again[0].ID != r.first.ID || again[0].Existed {
				t.Fatalf("published again: %+v, want delivery %d brought up to date", again, r.first.ID)
			}
			d := r.get(t, r.first.ID)
			if d.Status != tt.status || d.KeyID != "key-2" || d.Attempts != before.Attempts ||
				!d.NextAttemptAt.Equal(before.NextAttemptAt) || !d.Deadline.Equal(before.Deadline) || d.LeaseOwner != before.LeaseOwner {
				t.Fatalf("after the publish again: %+v; want %s under key-2, its schedule, attempts and lease as they were: %+v", d, tt.status, before)
			}
			tt.after(t, r, lease)
			r.clock.Advance(2 * time.Minute)
			c := r.claim(t, "w", 10, time.Minute)
			if len(c) != 1 {
				t.Fatalf("claimed %v, want the delivery, not suppressed", ids(c))
			}
			r.wantSentAsNow(t, c[0])
			if c[0].Attempt != tt.attempt {
				t.Fatalf("attempt %d, want %d", c[0].Attempt, tt.attempt)
			}
			r.wantCheckOK(t)
		})
	}
}

// testRepublishFindsAFinishedDeliveryAsItIs: a delivery that succeeded,
// failed or was cancelled before its subscription's key rotated is found
// as it is when the event is published again (Existed): the rotation is
// no collision, and nothing is sent again.
func testRepublishFindsAFinishedDeliveryAsItIs(t *testing.T, open OpenFunc) {
	tests := []struct {
		name   string
		finish func(t *testing.T, r *republishing)
		status courier.Status
	}{
		{"succeeded", func(t *testing.T, r *republishing) {
			if err := r.complete(r.claim(t, "w", 1, time.Minute)[0].Lease, "a"); err != nil {
				t.Fatal(err)
			}
		}, courier.StatusSucceeded},
		{"failed", func(t *testing.T, r *republishing) {
			if err := r.fail(r.claim(t, "w", 1, time.Minute)[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
				t.Fatal(err)
			}
		}, courier.StatusFailed},
		{"cancelled", func(t *testing.T, r *republishing) {
			if err := r.store.Outbox.Cancel(r.ctx, r.first.ID); err != nil {
				t.Fatal(err)
			}
		}, courier.StatusSuppressed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := setupRepublish(t, open, store.Config{}, true)
			tt.finish(t, r)
			before := r.get(t, r.first.ID)
			r.update(t, rotateKey)
			again := r.publish(t)
			if len(again) != 1 || again[0].ID != r.first.ID || !again[0].Existed {
				t.Fatalf("published again: %+v, want delivery %d found", again, r.first.ID)
			}
			if d := r.get(t, r.first.ID); d.Status != tt.status || d.KeyID != "key-1" || d.LastErrorCode != before.LastErrorCode {
				t.Fatalf("after the publish again: %+v, want it as it was: %+v", d, before)
			}
			if c := r.claim(t, "w", 10, time.Minute); len(c) != 0 {
				t.Fatalf("claimed %v, want nothing sent again", ids(c))
			}
		})
	}
}

// testRepublishSendsASuppressedDeliveryWithAFreshBudgetAndHorizon: a
// delivery suppressed after it spent its attempts, claimed again only
// after its first deadline, is sent again with the Store's budget more
// attempts (attempt numbers keep counting) and a horizon from now, not
// ended at once as spent or expired.
func testRepublishSendsASuppressedDeliveryWithAFreshBudgetAndHorizon(t *testing.T, open OpenFunc) {
	r := setupRepublish(t, open, store.Config{MaxAttempts: 2, RetryHorizon: time.Hour}, false)
	c := r.claim(t, "w", 1, time.Minute)
	if err := r.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	r.update(t, rotateKey)
	r.clock.Advance(2 * time.Second)
	r.claimSuppressed(t) // its second attempt, its last
	r.clock.Advance(2 * time.Hour)

	if again := r.publish(t); len(again) != 1 || again[0].ID != r.first.ID || again[0].Existed {
		t.Fatalf("published again: %+v, want delivery %d sent again", again, r.first.ID)
	}
	d := r.get(t, r.first.ID)
	if d.Status != courier.StatusPending || d.Attempts != 2 || d.MaxAttempts != 4 || d.LastErrorCode != "" ||
		!d.Deadline.Equal(r.clock.Now().Add(time.Hour)) || d.NextAttemptAt.After(r.clock.Now()) {
		t.Fatalf("sent again as %+v; want pending now, 2 attempts of 4, deadline an hour from now", d)
	}
	c = r.claim(t, "w", 1, time.Minute)
	if len(c) != 1 || c[0].Attempt != 3 {
		t.Fatalf("claimed %v, want the delivery's third attempt", ids(c))
	}
	r.wantSentAsNow(t, c[0])
	r.wantCheckOK(t)
}

// testRepublishedDeliveryRejoinsItsOrderingKey: a delivery with an
// ordering key sent again after its suppression (which let its key move
// on) joins its key again: it heads it, and an event published after it
// with the same key waits for it.
func testRepublishedDeliveryRejoinsItsOrderingKey(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	sub, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", "https://a.example/h", "key-1", "*"))
	if err != nil {
		t.Fatal(err)
	}
	r := &republishing{bundle: b, sub: sub,
		event: store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":1}`), OrderingKey: "order-1"}}
	r.first = r.publish(t)[0]
	r.update(t, rotateKey)
	r.claimSuppressed(t)

	if again := r.publish(t); again[0].ID != r.first.ID || again[0].Existed {
		t.Fatalf("published again: %+v, want delivery %d sent again", again, r.first.ID)
	}
	next := r.event
	next.EventID = "evt-2"
	if _, err := r.publishErr(t, next); err != nil {
		t.Fatal(err)
	}
	c := r.claim(t, "w", 10, time.Minute)
	if len(c) != 1 {
		t.Fatalf("claimed %v, want only the delivery sent again, heading its key", ids(c))
	}
	r.wantSentAsNow(t, c[0])
	if err := r.complete(c[0].Lease, "a"); err != nil {
		t.Fatal(err)
	}
	if c := r.claim(t, "w", 10, time.Minute); len(c) != 1 || c[0].NotificationID != fmt.Sprintf("evt-2:%d", sub.ID) {
		t.Fatalf("after it succeeded claimed %v, want evt-2's delivery", ids(c))
	}
	r.wantCheckOK(t)
}

// testRepublishStillRefusesWhatTheCallerChanged: what the caller chooses
// is still compared when the event is published again after its
// subscription's key rotated: another Payload, another payload from
// Build (the profile is the same, so Build should make the same bytes),
// or another Priority, is an idempotency collision, and nothing is
// written for any subscription.
// Enqueue (no publish) of the delivery's identity under the new key is a
// collision, as it always was: only a publish knows the subscription.
func testRepublishStillRefusesWhatTheCallerChanged(t *testing.T, open OpenFunc) {
	r := setupRepublish(t, open, store.Config{}, false)
	r.update(t, rotateKey)
	r.claimSuppressed(t)
	if _, err := r.store.Subscriptions.Create(r.ctx, nil, subscription("acme", "https://b.example/h", "key-b", "*")); err != nil {
		t.Fatal(err)
	}
	otherPayload, otherBuild, otherPriority := r.event, r.event, r.event
	otherPayload.Payload = []byte(`{"order":2}`)
	otherBuild.Payload, otherBuild.Build = nil, func(store.Subscription, string) ([]byte, error) { return []byte(`{"order":2}`), nil }
	otherPriority.Priority = 5
	for name, p := range map[string]store.PublishParams{
		"another payload": otherPayload, "another payload built": otherBuild, "another priority": otherPriority,
	} {
		if _, err := r.publishErr(t, p); !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Errorf("%s: Publish = %v, want CodeIdempotencyCollision", name, err)
		}
	}
	if page, err := r.store.Outbox.List(r.ctx, store.ListParams{}); err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("refused publishes left %d deliveries (%v), want the first one only", len(page.Deliveries), err)
	}
	if d := r.get(t, r.first.ID); d.Status != courier.StatusSuppressed || d.KeyID != "key-1" {
		t.Fatalf("a refused publish changed the delivery: %+v", d)
	}
	tx := r.begin(t)
	defer tx.Rollback()
	_, err := r.store.Outbox.Enqueue(r.ctx, tx, store.EnqueueParams{NotificationID: r.first.NotificationID, Endpoint: r.sub.Endpoint,
		Payload: r.event.Payload, KeyID: "key-2"})
	if !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("Enqueue of the published identity under the new key = %v, want CodeIdempotencyCollision", err)
	}
}

// testRepublishAfterItsDeadlineFindsItsDelivery: an event published with
// an absolute Deadline, published again once it has passed (a
// publisher's retry, late), finds the delivery it wrote in time, as
// Enqueue does (Existed), whatever its subscription decided since: its
// key rotated, its profile changed (Build then makes other bytes), or the
// delivery was sent again with a fresh budget. Those were compared as an
// Enqueue compares them, an idempotency collision, though a publish before
// the deadline finds such a delivery.
func testRepublishAfterItsDeadlineFindsItsDelivery(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		// since runs after the first publish, before the deadline passes.
		since func(t *testing.T, r *republishing)
	}{
		{"key rotated", func(t *testing.T, r *republishing) { r.update(t, rotateKey) }},
		{"profile changed", func(t *testing.T, r *republishing) {
			r.update(t, func(p *store.SubscriptionParams) { p.Profile = ack.ProfileReporting })
		}},
		{"sent again", func(t *testing.T, r *republishing) {
			r.update(t, rotateKey)
			r.claimSuppressed(t)
			if again := r.publish(t); len(again) != 1 || again[0].Existed {
				t.Fatalf("published again: %+v, want the delivery sent again", again)
			}
		}},
		// A subscription made since would get a delivery that starts after
		// its deadline: it is left out, and the publish still finds what
		// it wrote in time (the whole publish was refused, for good).
		{"subscribed since", func(t *testing.T, r *republishing) {
			if _, err := r.store.Subscriptions.Create(r.ctx, nil, subscription("acme", "https://b.example/h", "key-1", "*")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &republishing{bundle: setup(t, open, store.Config{})}
			sub, err := r.store.Subscriptions.Create(r.ctx, nil, subscription("acme", "https://a.example/h", "key-1", "*"))
			if err != nil {
				t.Fatal(err)
			}
			r.sub = sub
			r.event = store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Deadline: r.clock.Now().Add(time.Hour),
				Build: func(s store.Subscription, key string) ([]byte, error) { return builtFor(s, key), nil }}
			r.first = r.publish(t)[0]
			tt.since(t, r)
			before := r.get(t, r.first.ID)
			r.clock.Advance(2 * time.Hour)

			again, err := r.publishErr(t, r.event)
			if err != nil || len(again) != 1 || again[0].ID != r.first.ID || !again[0].Existed {
				t.Fatalf("published again after its deadline: %+v, %v; want delivery %d found, Existed", again, err, r.first.ID)
			}
			if d := r.get(t, r.first.ID); d.Status != before.Status || d.KeyID != before.KeyID || d.Profile != before.Profile || !d.UpdatedAt.Equal(before.UpdatedAt) {
				t.Fatalf("after the publish again: %+v, want it as it was: %+v", d, before)
			}
		})
	}
}

// testRepublishUnderAnotherEventTypeIsACollision: an event id published
// again as another event type is another event under a taken identity, an
// idempotency collision, as another payload is. It was found (Existed)
// while its delivery kept the first type: a subscription that had since
// dropped that type, and wanted the second, had its delivery suppressed
// at the claim, though the publish reported it found.
func testRepublishUnderAnotherEventTypeIsACollision(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	r := &republishing{bundle: b}
	sub, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", "https://a.example/h", "key-1", "order.paid", "order.refunded"))
	if err != nil {
		t.Fatal(err)
	}
	r.sub = sub
	r.event = store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":1}`)}
	r.first = r.publish(t)[0]
	r.update(t, func(p *store.SubscriptionParams) { p.EventTypes = []string{"order.refunded"} })

	other := r.event
	other.EventType = "order.refunded"
	if got, err := r.publishErr(t, other); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Fatalf("event evt-1 published again as order.refunded: %+v, %v; want CodeIdempotencyCollision", got, err)
	}
	if d := r.get(t, r.first.ID); d.Status != courier.StatusPending {
		t.Fatalf("the refused publish changed the delivery: %+v", d)
	}
}

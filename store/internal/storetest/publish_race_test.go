package storetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// The tests here run publishes beside each other and beside
// Subscriptions.Update on PostgreSQL, where several instances share one
// database and their transactions interleave; each interleaving is forced
// with channels or a transaction held open, never with time.

// fanOut is a tenant with two subscriptions, on two endpoints, shared by
// two instances of the application.
type fanOut struct {
	s, app *store.Store
	subs   []store.Subscription
}

func newFanOut(t *testing.T) *fanOut {
	t.Helper()
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	f := &fanOut{s: stores[0], app: stores[1]}
	for _, ep := range []string{"https://b.example/h", "https://a.example/h"} {
		sub, err := f.s.Subscriptions.Create(t.Context(), nil, store.SubscriptionParams{Tenant: "acme", Endpoint: ep,
			EventTypes: []string{"order.paid"}, KeyID: "key-1"})
		if err != nil {
			t.Fatal(err)
		}
		f.subs = append(f.subs, sub)
	}
	return f
}

// params is event id of type order.paid, with build as its Build.
func (f *fanOut) params(id string, build func(store.Subscription, string) ([]byte, error)) store.PublishParams {
	return store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: id, Payload: []byte(`{"id":"` + id + `"}`), Build: build}
}

// deliveries counts the outbox's deliveries of event id.
func (f *fanOut) deliveries(t *testing.T, id string) int {
	t.Helper()
	var n int
	if err := f.s.DB().GetContext(t.Context(), &n, `SELECT count(*) FROM courier_outbox WHERE notification_id LIKE $1`, id+":%"); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestConcurrentPublishesOfOneEventMakeOneDeliveryEach: two instances
// publish one event at once. The second waits for the first's
// uncommitted deliveries, then finds them (Existed) once it commits:
// one delivery per subscription, and neither publish fails. If the first
// rolls back instead, the second writes them.
func TestConcurrentPublishesOfOneEventMakeOneDeliveryEach(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("first commits %v", commit), func(t *testing.T) {
			f := newFanOut(t)
			first, err := f.s.Begin(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer first.Rollback()
			made, err := f.s.Outbox.Publish(t.Context(), first, f.params("e1", nil))
			if err != nil || len(made) != 2 {
				t.Fatalf("first publish: %v, %+v; want 2 deliveries", err, made)
			}
			second := make(chan []store.Published, 1)
			secondErr := inBackground(func() error {
				return inTx(t, f.app, func(tx store.DBTX) error {
					got, err := f.app.Outbox.Publish(t.Context(), tx, f.params("e1", nil))
					second <- got
					return err
				})
			})
			waitLockWaiters(t, f.s.DB(), 1) // the second waits for the first's deliveries
			if commit {
				err = first.Commit()
			} else {
				err = first.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := <-secondErr; err != nil {
				t.Fatalf("the second publish: %v; want it to succeed", err)
			}
			got := <-second
			if len(got) != 2 {
				t.Fatalf("the second publish: %+v; want 2 deliveries", got)
			}
			for _, p := range got {
				if p.Existed != commit {
					t.Errorf("the second publish's %s: Existed %v, want %v", p.NotificationID, p.Existed, commit)
				}
			}
			if n := f.deliveries(t, "e1"); n != 2 {
				t.Fatalf("%d deliveries of e1, want one per subscription (2)", n)
			}
		})
	}
}

// TestStalePublishLeavesANewerPublishsDeliveryAsItIs: a publish reads the
// subscriptions, then a key rotation commits and another instance
// publishes the event under the rotated key and commits; then the first
// publish writes. It finds the delivery the newer publish wrote and
// leaves it as it is: put back under the key it read, it would be
// suppressed at its claim (subscription_changed), and the event, published
// after the rotation, would never be sent.
func TestStalePublishLeavesANewerPublishsDeliveryAsItIs(t *testing.T) {
	for _, already := range []bool{false, true} {
		t.Run(fmt.Sprintf("published before the rotation %v", already), func(t *testing.T) {
			f := newFanOut(t)
			sub := f.subs[1] // on a
			if already {
				if _, err := f.s.Outbox.Publish(t.Context(), f.s.DB(), f.params("e1", nil)); err != nil {
					t.Fatal(err)
				}
			}
			read, resume := make(chan struct{}), make(chan struct{})
			var once bool
			stale := inBackground(func() error {
				return inTx(t, f.app, func(tx store.DBTX) error {
					_, err := f.app.Outbox.Publish(t.Context(), tx, f.params("e1", func(s store.Subscription, _ string) ([]byte, error) {
						if !once { // the subscriptions are read: hold the publish here
							once = true
							close(read)
							<-resume
						}
						return []byte(`{"id":"e1"}`), nil
					}))
					return err
				})
			})
			<-read
			p := sub.SubscriptionParams
			p.KeyID = "key-2"
			if _, err := f.s.Subscriptions.Update(t.Context(), nil, sub.ID, p); err != nil {
				t.Fatal(err)
			}
			if _, err := f.s.Outbox.Publish(t.Context(), f.s.DB(), f.params("e1", nil)); err != nil {
				t.Fatalf("the publish after the rotation: %v", err)
			}
			close(resume)
			if err := <-stale; err != nil {
				t.Fatalf("the publish that read the subscriptions before the rotation: %v; want it to succeed", err)
			}

			got, err := protocol.For(f.s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("e1:%d", sub.ID)
			for _, c := range got {
				if c.NotificationID == want {
					if c.KeyID != "key-2" {
						t.Fatalf("%s claimed under %q; want the rotated key-2", want, c.KeyID)
					}
					return
				}
			}
			var d store.Delivery
			if err := f.s.DB().GetContext(t.Context(), &d.ID, `SELECT id FROM courier_outbox WHERE notification_id = $1`, want); err == nil {
				d, _ = f.s.Outbox.Get(t.Context(), d.ID)
			}
			t.Fatalf("claim leased %d deliveries, none of them %s (it is %s, %s); want it sent under the rotated key",
				len(got), want, d.Status, d.LastErrorCode)
		})
	}
}

// TestUpdateAndClaimNeverWaitForEachOther: Subscriptions.Update locks its
// subscription's row only, and a claim reads that row without locking
// it: a claim of a delivery beside an Update of its subscription held
// open leases it (under the subscription as committed), and an Update
// beside a transaction holding the delivery's row commits. Neither waits
// for the other, so the two can never wait in a circle.
func TestUpdateAndClaimNeverWaitForEachOther(t *testing.T) {
	f := newFanOut(t)
	sub := f.subs[1]
	if _, err := f.s.Outbox.Publish(t.Context(), f.s.DB(), f.params("e1", nil)); err != nil {
		t.Fatal(err)
	}
	update := func(tx store.DBTX, key string) error {
		p := sub.SubscriptionParams
		p.KeyID = key
		_, err := f.app.Subscriptions.Update(t.Context(), tx, sub.ID, p)
		return err
	}

	open, err := f.app.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Rollback()
	if err := update(open, "key-2"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a claim that waited would end here
	defer cancel()
	got, err := protocol.For(f.s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("claim beside an open Update: %v, %d leased; want both deliveries", err, len(got))
	}
	for _, c := range got {
		if c.KeyID != "key-1" {
			t.Errorf("%s leased under %q; want key-1, the committed key", c.NotificationID, c.KeyID)
		}
	}
	if err := open.Rollback(); err != nil {
		t.Fatal(err)
	}

	held := holdRows(t, f.s.DB(), `SELECT 1 FROM courier_outbox WHERE subscription_id = $1 FOR UPDATE`, sub.ID)
	defer held.Rollback()
	uctx, ucancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer ucancel()
	tx, err := f.app.Begin(uctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := update(tx, "key-3"); err != nil {
		t.Fatalf("Update beside a transaction holding its delivery: %v; want it to succeed", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit of the Update beside a transaction holding its delivery: %v", err)
	}
	if s, err := f.s.Subscriptions.Get(t.Context(), nil, sub.ID); err != nil || s.KeyID != "key-3" {
		t.Fatalf("subscription after the Update: %v, %q; want key-3", err, s.KeyID)
	}
}

// TestPauseDuringAPublishSuppressesItsDelivery: a subscription paused
// while a publish that read it active runs gets the publish's delivery,
// and its claim suppresses it (subscription_changed): nothing is sent to
// a subscription paused before the claim, as if the pause came after the
// publish.
func TestPauseDuringAPublishSuppressesItsDelivery(t *testing.T) {
	f := newFanOut(t)
	sub := f.subs[1]
	read, resume := make(chan struct{}), make(chan struct{})
	var once bool
	published := inBackground(func() error {
		return inTx(t, f.app, func(tx store.DBTX) error {
			_, err := f.app.Outbox.Publish(t.Context(), tx, f.params("e1", func(store.Subscription, string) ([]byte, error) {
				if !once {
					once = true
					close(read)
					<-resume
				}
				return []byte(`{"id":"e1"}`), nil
			}))
			return err
		})
	})
	<-read
	p := sub.SubscriptionParams
	p.Paused = true
	if _, err := f.s.Subscriptions.Update(t.Context(), nil, sub.ID, p); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	got, err := protocol.For(f.s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].NotificationID != fmt.Sprintf("e1:%d", f.subs[0].ID) {
		t.Fatalf("claim: %v, %+v; want the other subscription's delivery alone", err, got)
	}
	var status, code string
	if err := f.s.DB().QueryRowContext(t.Context(), `SELECT status, last_error_code FROM courier_outbox WHERE notification_id = $1`,
		fmt.Sprintf("e1:%d", sub.ID)).Scan(&status, &code); err != nil || status != "suppressed" || code != "subscription_changed" {
		t.Fatalf("the paused subscription's delivery: %v, %s %s; want suppressed subscription_changed", err, status, code)
	}
}

package storetest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// The tests here hold courier's PostgreSQL transactions to one lock
// order: two of them that share rows never wait for each other in a
// circle, which PostgreSQL would end by aborting one (SQLSTATE 40P01). In
// each, a third transaction holds one row for a moment only to line the
// two up in the order a busy system reaches by chance; the tests wait on
// pg_stat_activity, not on time.

func claimAll(t *testing.T, s *store.Store, want int) []protocol.Claimed {
	t.Helper()
	got, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 100, Lease: time.Hour})
	if err != nil || len(got) != want {
		t.Fatalf("claim: %v, %d leased, want %d", err, len(got), want)
	}
	return got
}

func settleAll(t *testing.T, s *store.Store, r protocol.Result, cs ...protocol.Claimed) {
	t.Helper()
	var ocs []protocol.Outcome
	for _, c := range cs {
		oc := protocol.Outcome{Lease: c.Lease, Result: r}
		if r != protocol.Succeeded {
			oc.Code = courier.CodeReceiverUnavailable
		}
		ocs = append(ocs, oc)
	}
	st, err := protocol.For(s).Settle(t.Context(), ocs...)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range st {
		if x.Err != nil {
			t.Fatal(x.Err)
		}
	}
}

// TestRedriveAndEnqueueTakeKeysInOneOrder: a Redrive of failed deliveries
// of keys B (older) and A (newer), beside an application's EnqueueMany
// that joins A and B, both succeed: Redrive joins keys by endpoint and
// key, as every transaction that waits for keys does, not by delivery id.
func TestRedriveAndEnqueueTakeKeysInOneOrder(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
	s, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	add := func(id, key string) int64 {
		return enqueue(t, s, store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id), OrderingKey: key, MaxAttempts: 1})
	}
	add("fb", "B") // fails, skipped; redriven later
	add("fa", "A") // fails, skipped; redriven later
	add("ha", "A")
	add("hb", "B")
	settleAll(t, s, protocol.Failed, claimAll(t, s, 2)...) // fb, fa fail: ha and hb head their keys

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_ordering_keys WHERE ordering_key = 'A' FOR UPDATE`)
	enqueued := inBackground(func() error {
		return inTx(t, s, func(tx store.DBTX) error {
			_, err := s.Outbox.EnqueueMany(t.Context(), tx, []store.EnqueueParams{
				{NotificationID: "na", Endpoint: ep, Payload: []byte(`{"id":"na"}`), OrderingKey: "A"},
				{NotificationID: "nb", Endpoint: ep, Payload: []byte(`{"id":"nb"}`), OrderingKey: "B"},
			})
			return err
		})
	})
	waitLockWaiters(t, s.DB(), 1) // the enqueue waits for A
	redriven := inBackground(func() error {
		_, err := operator.Outbox.Redrive(t.Context(), store.RedriveParams{Endpoint: ep})
		return err
	})
	waitLockWaiters(t, s.DB(), 2) // Redrive waits for A, the first key in key order
	blocker.Rollback()
	errEnqueue, errRedrive := <-enqueued, <-redriven
	if errEnqueue != nil || errRedrive != nil {
		t.Fatalf("the application's EnqueueMany: %v; Redrive: %v", errEnqueue, errRedrive)
	}
}

// TestPublishAndEnqueueTakeKeysInOneOrder: with subscription 1 on
// endpoint .../b and subscription 2 on .../a, an application's Publish
// with an ordering key and another application transaction that joins
// (a, key) and (b, key) both succeed: Publish joins the key per endpoint
// in endpoint order, not in subscription order.
func TestPublishAndEnqueueTakeKeysInOneOrder(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	s, app := stores[0], stores[1]
	for _, ep := range []string{epB, epA} { // subscription 1 on b, 2 on a
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{
			Tenant: "t", Endpoint: ep, EventTypes: []string{"*"}, KeyID: "k1", Profile: ack.ProfileNone,
		}); err != nil {
			t.Fatal(err)
		}
	}
	publish := func(tx store.DBTX, id string) error {
		_, err := s.Outbox.Publish(t.Context(), tx, store.PublishParams{Tenant: "t", EventType: "order.updated", EventID: id, Payload: []byte(`{"x":1}`), OrderingKey: "order-1"})
		return err
	}
	if err := publish(s.DB(), "e1"); err != nil {
		t.Fatal(err)
	}
	claimAll(t, s, 2) // e1 to a and to b: each heads (endpoint, order-1)

	publishBesideEnqueueMany(t, s, app, epA, epB, func(tx store.DBTX) error { return publish(tx, "e2") })
}

// TestCancelTakesTheKeyBeforeTheDelivery: a settle of a key's head locks
// the key's row, then promotes (locks) the delivery behind it; Cancel of
// that delivery takes the key's row first too, so the two never hold one
// each while waiting for the other. While Cancel waits for the key, the
// delivery's row is free.
func TestCancelTakesTheKeyBeforeTheDelivery(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	worker, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	d1 := enqueue(t, worker, store.EnqueueParams{NotificationID: "n1", Endpoint: ep, Payload: []byte(`{"id":"n1"}`), OrderingKey: "K"})
	d2 := enqueue(t, worker, store.EnqueueParams{NotificationID: "n2", Endpoint: ep, Payload: []byte(`{"id":"n2"}`), OrderingKey: "K"})

	blocker := holdRows(t, worker.DB(), `SELECT 1 FROM courier_ordering_keys WHERE ordering_key = 'K' FOR UPDATE`)
	cancelled := inBackground(func() error { return operator.Outbox.Cancel(t.Context(), d2) })
	waitLockWaiters(t, operator.DB(), 1) // Cancel waits for K
	probe := holdRows(t, worker.DB(), `SET LOCAL lock_timeout = '1ms'`)
	if _, err := probe.Exec(`SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`, d2); err != nil {
		t.Fatalf("the delivery's row while Cancel waits for its key: %v; want it free", err)
	}
	probe.Rollback()
	blocker.Rollback()
	if err := <-cancelled; err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if d, err := worker.Outbox.Get(t.Context(), d2); err != nil || d.Status != courier.StatusSuppressed {
		t.Fatalf("cancelled delivery: %v, %s", err, d.Status)
	}
	if got := claimAll(t, worker, 1); got[0].DeliveryID != d1 {
		t.Fatalf("claimed %d, want the head %d", got[0].DeliveryID, d1)
	}
}

// TestClaimsNeverWaitForLimitsInACircle: one claim runs several picks
// (each batch whose rows it parked, each priority), each locking the
// limits rows of the endpoints it picked; waiting for one while holding
// another, two claims meeting endpoints in opposite orders would wait for
// each other in a circle. A pick never waits for a limits row: one that
// another transaction holds leaves its endpoint's rows due, untouched, for
// that claimer or the next claim.
func TestClaimsNeverWaitForLimitsInACircle(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	s := stores[0]
	const limited, open = "https://receiver.example/limited", "https://receiver.example/open"
	if err := s.Endpoints.SetLimits(t.Context(), limited, store.Limits{MaxInFlight: 5}); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i, ep := range []string{limited, open, limited} {
		id := fmt.Sprintf("n%d", i)
		ids = append(ids, enqueue(t, s, store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id)}))
	}

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_endpoint_limits WHERE endpoint = $1 FOR UPDATE`, limited)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a claim that waited would end here
	defer cancel()
	got, err := protocol.For(stores[1]).Claim(ctx, protocol.ClaimParams{Owner: "x", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].DeliveryID != ids[1] {
		t.Fatalf("claim beside a held limits row: %v, %+v; want the open endpoint's delivery alone", err, got)
	}
	for _, id := range []int64{ids[0], ids[2]} {
		d, err := s.Outbox.Get(t.Context(), id)
		if err != nil || d.Status != courier.StatusPending || d.Held != "" {
			t.Fatalf("delivery %d of the endpoint whose limits were held: %v, %s held %q; want pending and due", id, err, d.Status, d.Held)
		}
	}
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "y", Limit: 10, Lease: time.Minute}); err != nil || len(got) != 2 {
		t.Fatalf("claim once the limits row is free: %v, %d leased; want 2", err, len(got))
	}
}

// inTx runs f in a transaction of s's and commits it.
func inTx(t *testing.T, s *store.Store, f func(tx store.DBTX) error) error {
	tx, err := s.Begin(t.Context())
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// inBackground runs f in a goroutine and sends its error.
func inBackground(f func() error) <-chan error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	return done
}

// holdRows locks the rows query selects in a transaction of its own,
// which the test rolls back (or its cleanup does) to let them go.
func holdRows(t *testing.T, db *sqlx.DB, query string, args ...any) *sqlx.Tx {
	t.Helper()
	tx, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec(query, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

// enqueue enqueues p in a transaction of its own.
func enqueue(t *testing.T, s *store.Store, p store.EnqueueParams) int64 {
	t.Helper()
	var e store.Enqueued
	if err := inTx(t, s, func(tx store.DBTX) (err error) {
		e, err = s.Outbox.Enqueue(t.Context(), tx, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// waitLockWaiters waits until n backends (other than this one) wait for a
// lock: condition-based, not a sleep for synchronization.
func waitLockWaiters(t *testing.T, db *sqlx.DB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		var got int
		if err := db.GetContext(ctx, &got, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("only %d backends wait for a lock, want %d", got, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestSettleNeverWaitsForAnApplicationsKey: an application's transaction
// that enqueued behind an ordering key holds the key's row until it ends.
// A worker's settle of the key's head, batched with an outcome of another
// endpoint, does not wait for it: both outcomes are recorded at once, and
// the key, left with its head finished, moves on at a claim once the
// application commits, even in another process (a fresh Store) that never
// saw the settle.
func TestSettleNeverWaitsForAnApplicationsKey(t *testing.T) {
	stores := couriertest.PostgresStores(t, 3, store.Config{})
	worker, app, later := stores[0], stores[1], stores[2]
	const ep, other = "https://receiver.example/orders", "https://receiver.example/other"
	head := enqueue(t, worker, store.EnqueueParams{NotificationID: "k1", Endpoint: ep, Payload: []byte(`{"id":"k1"}`), OrderingKey: "K"})
	enqueue(t, worker, store.EnqueueParams{NotificationID: "b", Endpoint: other, Payload: []byte(`{"id":"b"}`)})
	leased := claimAll(t, worker, 2)

	tx, err := app.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	next, err := app.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "k2", Endpoint: ep, Payload: []byte(`{"id":"k2"}`), OrderingKey: "K"})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a settle that waited would end here
	defer cancel()
	var ocs []protocol.Outcome
	for _, c := range leased {
		ocs = append(ocs, protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded})
	}
	settled, err := protocol.For(worker).Settle(ctx, ocs...)
	if err != nil {
		t.Fatalf("settle beside the application's open transaction: %v", err)
	}
	for i, st := range settled {
		if st.Err != nil || st.Status != courier.StatusSucceeded {
			t.Fatalf("outcome %d: %+v, want succeeded", i, st)
		}
	}
	if got, err := protocol.For(worker).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("claim while the application still holds the key: %v, %+v; want nothing", err, got)
	}

	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := protocol.For(later).Claim(ctx, protocol.ClaimParams{Owner: "later", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].DeliveryID != next.ID {
		t.Fatalf("the first claim of a fresh store: %v, %+v; want k2 (%d), the key moved on from k1 (%d)", err, got, next.ID, head)
	}
}

// keyRotation is a subscription of endpoint a to which the events e1 and
// e2 of ordering key order-1 were published under its key key-1: e1 heads
// the key, e2 waits behind it. Once the key rotates (rotate), a claim
// suppresses them and a publish again brings them up to date.
type keyRotation struct {
	worker, app *store.Store
	sub         store.Subscription
}

// newKeyRotation publishes e1 and e2, and enqueues other, a plain
// delivery to endpoint b, if other.
func newKeyRotation(t *testing.T, other bool) *keyRotation {
	t.Helper()
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	k := &keyRotation{worker: stores[0], app: stores[1]}
	var err error
	k.sub, err = k.app.Subscriptions.Create(t.Context(), nil, store.SubscriptionParams{Tenant: "acme", Endpoint: "https://a.example/h",
		EventTypes: []string{"*"}, KeyID: "key-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e1", "e2"} {
		if err := inTx(t, k.app, func(tx store.DBTX) error { return k.publish(t, tx, id) }); err != nil {
			t.Fatal(err)
		}
	}
	if other {
		enqueue(t, k.app, store.EnqueueParams{NotificationID: "other", Endpoint: "https://b.example/h", Payload: []byte(`{"id":"other"}`)})
	}
	return k
}

// rotate changes the subscription's key to key-2.
func (k *keyRotation) rotate(t *testing.T) {
	t.Helper()
	p := k.sub.SubscriptionParams
	p.KeyID = "key-2"
	if _, err := k.app.Subscriptions.Update(t.Context(), nil, k.sub.ID, p); err != nil {
		t.Fatal(err)
	}
}

// publish publishes event id (ordering key order-1) in tx.
func (k *keyRotation) publish(t *testing.T, tx store.DBTX, id string) error {
	_, err := k.app.Outbox.Publish(t.Context(), tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: id,
		Payload: []byte(`{"id":"` + id + `"}`), OrderingKey: "order-1"})
	return err
}

// openRepublish publishes id again in a transaction of the application's
// that the test keeps open (its cleanup rolls it back).
func (k *keyRotation) openRepublish(t *testing.T, id string) *sqlx.Tx {
	t.Helper()
	tx, err := k.app.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if err := k.publish(t, tx, id); err != nil {
		t.Fatal(err)
	}
	return tx
}

// wantNext claims what is due, which must be event id's delivery alone,
// sent under the rotated key.
func (k *keyRotation) wantNext(t *testing.T, id string) protocol.Claimed {
	t.Helper()
	got, err := protocol.For(k.worker).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if want := fmt.Sprintf("%s:%d", id, k.sub.ID); err != nil || len(got) != 1 || got[0].NotificationID != want || got[0].KeyID != "key-2" {
		t.Fatalf("claim: %v, %+v; want %s alone, under key-2", err, got, want)
	}
	return got[0]
}

// TestClaimNeverWaitsForAnApplicationsRepublish: an application's
// transaction publishes again an event whose delivery waits behind its
// ordering key's head (the subscription's key rotated: the delivery is
// brought up to date in place) and stays open. A worker's claim that ends
// the key's head (suppressed, as its subscription changed) does not wait
// for that transaction to promote the delivery: it leases what else is due
// (the worker's claims of every endpoint would stall otherwise) and leaves
// the key, which moves on at a claim once the application commits.
func TestClaimNeverWaitsForAnApplicationsRepublish(t *testing.T) {
	k := newKeyRotation(t, true)
	k.rotate(t)
	tx := k.openRepublish(t, "e2")

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a claim that waited would end here
	defer cancel()
	got, err := protocol.For(k.worker).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].NotificationID != "other" {
		t.Fatalf("claim beside the application's open transaction: %v, %+v; want the other endpoint's delivery alone", err, got)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The claim claimed again for its room, and looked at the key while
	// the application still held it: a claim looks again a moment later
	// and moves it on.
	var got2 []protocol.Claimed
	waitUntil(t, func() bool {
		got2, err = protocol.For(k.worker).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
		return err != nil || len(got2) > 0
	})
	if want := fmt.Sprintf("e2:%d", k.sub.ID); err != nil || len(got2) != 1 || got2[0].NotificationID != want || got2[0].KeyID != "key-2" {
		t.Fatalf("claim once the application committed: %v, %+v; want %s alone, under key-2", err, got2, want)
	}
}

// TestRepublishOfAKeysDeliveriesBesideAClaimNeverDeadlocks: as above, and
// the application then publishes the key's head e1 again in the same
// transaction, once the claim suppressed it. The claim never holds e1
// while it waits for e2, which the application holds while it waits for
// e1: neither is aborted (SQLSTATE 40P01), possibly the application's
// own business transaction, and the key keeps its order.
func TestRepublishOfAKeysDeliveriesBesideAClaimNeverDeadlocks(t *testing.T) {
	k := newKeyRotation(t, false)
	k.rotate(t)
	tx := k.openRepublish(t, "e2")
	claimed := inBackground(func() error {
		_, err := protocol.For(k.worker).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
		return err
	})
	// The claim ends, or waits for a lock while it holds e1, which it
	// suppressed.
	var claimErr error
	done := false
	waitUntil(t, func() bool {
		select {
		case claimErr = <-claimed:
			done = true
			return true
		default:
			return running(t, k.worker.DB(), "courier_outbox", true)
		}
	})
	appErr := k.publish(t, tx, "e1")
	if !done {
		claimErr = <-claimed
	}
	if appErr != nil || claimErr != nil {
		t.Fatalf("the application's publish of e1: %v\nthe worker's claim: %v\nwant both to succeed", appErr, claimErr)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	settleAll(t, k.worker, protocol.Succeeded, k.wantNext(t, "e1"))
	k.wantNext(t, "e2")
}

// TestSettleNeverWaitsForAnApplicationsRepublish: the key's head e1 is in
// flight when the subscription's key rotates, and an application's
// transaction publishes e2, waiting behind it, again and stays open. The
// worker's settle of e1's success does not wait for that transaction to
// promote e2 (it would end on the settle's lock timeout, the success not
// recorded and e1 sent again once its lease ran out): e1 succeeds, and the
// key moves on at a claim once the application commits.
func TestSettleNeverWaitsForAnApplicationsRepublish(t *testing.T) {
	k := newKeyRotation(t, false)
	head := claimAll(t, k.worker, 1)[0]
	k.rotate(t)
	tx := k.openRepublish(t, "e2")

	st, err := protocol.For(k.worker).Settle(t.Context(), protocol.Outcome{Lease: head.Lease, Result: protocol.Succeeded})
	if err != nil {
		t.Fatalf("settle of the head's success beside the application's open transaction: %v; want succeeded", err)
	}
	if st[0].Err != nil || st[0].Status != courier.StatusSucceeded {
		t.Fatalf("the head's outcome: %+v; want succeeded", st[0])
	}
	if d, err := k.worker.Outbox.Get(t.Context(), head.DeliveryID); err != nil || d.Status != courier.StatusSucceeded {
		t.Fatalf("the head: %v, %s; want succeeded", err, d.Status)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	k.wantNext(t, "e2")
}

// waitUntil polls cond until it holds: condition based, not a sleep for
// synchronization.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("the condition waited for never held")
		case <-time.After(time.Millisecond):
		}
	}
}

// TestPublishTakesTheKeysOfDeliveriesItSendsAgainInKeyOrder: a publish
// again of an event takes the key of each delivery it brings up to date
// before the delivery (see TestClaimNeverWaitsForAnApplicationsRepublish)
// and joins its new deliveries to theirs: it takes all of them in key
// order, as an EnqueueMany of the same keys does, not the keys of the
// deliveries it sends again first. Here the event's delivery to b (its
// subscription's key rotated since) is brought up to date, and one to a
// (a subscription created since) is new: beside an EnqueueMany that joins
// a then b, both succeed.
func TestPublishTakesTheKeysOfDeliveriesItSendsAgainInKeyOrder(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	s, app := stores[0], stores[1]
	create := func(ep string) store.Subscription {
		sub, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{
			Tenant: "t", Endpoint: ep, EventTypes: []string{"*"}, KeyID: "k1", Profile: ack.ProfileNone,
		})
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	publish := func(tx store.DBTX, id string) error {
		_, err := s.Outbox.Publish(t.Context(), tx, store.PublishParams{Tenant: "t", EventType: "order.updated", EventID: id, Payload: []byte(`{"x":1}`), OrderingKey: "order-1"})
		return err
	}
	subB := create(epB)
	if err := publish(s.DB(), "e1"); err != nil { // e1 to b heads (b, order-1)
		t.Fatal(err)
	}
	enqueue(t, s, store.EnqueueParams{NotificationID: "a0", Endpoint: epA, Payload: []byte(`{"id":"a0"}`), OrderingKey: "order-1"}) // heads (a, order-1)
	p := subB.SubscriptionParams
	p.KeyID = "k2"
	if _, err := s.Subscriptions.Update(t.Context(), s.DB(), subB.ID, p); err != nil {
		t.Fatal(err)
	}
	create(epA)

	publishBesideEnqueueMany(t, s, app, epA, epB, func(tx store.DBTX) error { return publish(tx, "e1") })
}

// publishBesideEnqueueMany runs publish in a transaction of app's beside
// an EnqueueMany of s's to epA's and epB's key order-1, both let go at
// once after waiting for epA's key, held by a third transaction: each
// takes the keys in key order, so both end without error.
func publishBesideEnqueueMany(t *testing.T, s, app *store.Store, epA, epB string, publish func(store.DBTX) error) {
	t.Helper()
	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_ordering_keys WHERE endpoint = $1 FOR UPDATE`, epA)
	enqueued := inBackground(func() error {
		return inTx(t, s, func(tx store.DBTX) error {
			_, err := s.Outbox.EnqueueMany(t.Context(), tx, []store.EnqueueParams{
				{NotificationID: "xa", Endpoint: epA, Payload: []byte(`{"id":"xa"}`), OrderingKey: "order-1"},
				{NotificationID: "xb", Endpoint: epB, Payload: []byte(`{"id":"xb"}`), OrderingKey: "order-1"},
			})
			return err
		})
	})
	waitLockWaiters(t, s.DB(), 1) // the enqueue waits for (a, order-1)
	published := inBackground(func() error {
		return inTx(t, app, publish)
	})
	waitLockWaiters(t, s.DB(), 2) // the publish waits for (a, order-1), the first key in key order
	blocker.Rollback()
	errEnqueue, errPublish := <-enqueued, <-published
	if errEnqueue != nil || errPublish != nil {
		t.Fatalf("the other transaction's EnqueueMany: %v; the application's Publish: %v", errEnqueue, errPublish)
	}
}

// TestReleaseOfAProbeBesideAClaimNeverDeadlocks: a worker gives back a
// probe whose lease is about to run out (too little of it left to send)
// while another worker's claim reclaims that lease as it runs out. The
// claim takes the delivery's row, then endpoints' rows (endpoint_probe_take);
// the release must take them in that order too (outbox_release_lock before
// endpoint_probe_released). The two Stores keep clocks of their own: the
// claimer's is past the probe's lease, the releaser's is not yet.
func TestReleaseOfAProbeBesideAClaimNeverDeadlocks(t *testing.T) {
	claimClock, releaseClock := fakeclock.New(), fakeclock.New()
	sC := couriertest.PostgresStores(t, 1, store.Config{Now: claimClock.Now,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})[0]
	sR, err := store.Open(t.Context(), sC.DB(), store.Config{Now: releaseClock.Now,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sR.Close() })
	enqueue(t, sC, store.EnqueueParams{NotificationID: "a0", Endpoint: epA, Payload: []byte(`{"id":"a0"}`)})
	enqueue(t, sC, store.EnqueueParams{NotificationID: "b0", Endpoint: epB, Payload: []byte(`{"id":"b0"}`)})
	first := claimAll(t, sC, 2)
	for _, c := range first {
		s := sC // b opens for a second
		if c.Endpoint == epA {
			s = sR // a opens for 30 s
		}
		st, err := protocol.For(s).Settle(t.Context(), protocol.Outcome{Lease: c.Lease, Result: protocol.Retry,
			Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Hour})
		if err != nil || st[0].Err != nil {
			t.Fatalf("settle: %v %+v", err, st)
		}
	}
	enqueue(t, sC, store.EnqueueParams{NotificationID: "b1", Endpoint: epB, Payload: []byte(`{"id":"b1"}`)})
	claimClock.Advance(time.Second)
	probe, err := protocol.For(sC).Claim(t.Context(), protocol.ClaimParams{Owner: "w1", Limit: 10, Lease: time.Minute})
	if err != nil || len(probe) != 1 || probe[0].Endpoint != epB {
		t.Fatalf("probe claim: %v %+v", err, probe)
	}
	claimClock.Advance(61 * time.Second) // past the probe's lease and a's cool-down

	blocker := holdRows(t, sC.DB(), `SELECT 1 FROM courier_endpoints WHERE endpoint = $1 FOR UPDATE`, epA)
	claimed := inBackground(func() error {
		_, err := protocol.For(sC).Claim(t.Context(), protocol.ClaimParams{Owner: "w2", Limit: 10, Lease: time.Minute})
		return err
	})
	waitLockWaiters(t, sC.DB(), 1) // the claim reclaimed the probe's row, and waits at a's endpoint row
	released := inBackground(func() error {
		_, err := protocol.For(sR).Release(t.Context(), probe[0].Lease)
		return err
	})
	waitLockWaiters(t, sC.DB(), 2) // the release waits too
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Errorf("claim: %v", err)
	}
	if err := <-released; err != nil {
		t.Errorf("release: %v", err)
	}
}

// TestRedriveAndCancelTakeAKeyBeforeItsDeliveries: an operator's Cancel of
// a failed head that holds its key (OrderingHoldKey) takes the key's row, then the
// delivery's; a Redrive of the endpoint at the same moment must take them
// in that order too. Had it redriven (locked) the failed deliveries first
// and then joined their keys, a Cancel holding K while waiting for the
// head's row, which the Redrive holds while waiting for K, would end in a
// deadlock (SQLSTATE 40P01), one operator's action aborted. Here the
// Redrive waits for key A, held by a third transaction, when the Cancel of
// K's head begins.
func TestRedriveAndCancelTakeAKeyBeforeItsDeliveries(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{})
	s, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	headK := enqueue(t, s, store.EnqueueParams{NotificationID: "k1", Endpoint: ep, Payload: []byte(`{"id":"k1"}`), OrderingKey: "K", MaxAttempts: 1})
	enqueue(t, s, store.EnqueueParams{NotificationID: "a1", Endpoint: ep, Payload: []byte(`{"id":"a1"}`), OrderingKey: "A", MaxAttempts: 1})
	settleAll(t, s, protocol.Failed, claimAll(t, s, 2)...) // both fail and hold their keys

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_ordering_keys WHERE ordering_key = 'A' FOR UPDATE`)
	redriven := inBackground(func() error {
		_, err := operator.Outbox.Redrive(t.Context(), store.RedriveParams{Endpoint: ep})
		return err
	})
	waitLockWaiters(t, s.DB(), 1) // the Redrive waits for A
	cancelled := inBackground(func() error { return s.Outbox.Cancel(t.Context(), headK) })
	var errCancel error
	cancelDone := false
	waitUntil(t, func() bool { // the Cancel ends, or waits for a lock too
		select {
		case errCancel = <-cancelled:
			cancelDone = true
			return true
		default:
			var n int
			if err := s.DB().Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
				t.Fatal(err)
			}
			return n >= 2
		}
	})
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	errRedrive := <-redriven
	if !cancelDone {
		errCancel = <-cancelled
	}
	if errCancel != nil || errRedrive != nil {
		t.Fatalf("Cancel of K's failed head: %v; Redrive of the endpoint: %v; want both to succeed", errCancel, errRedrive)
	}
	if d, err := s.Outbox.Get(t.Context(), headK); err != nil || d.Status != courier.StatusSuppressed {
		t.Fatalf("K's head: %v, %s; want cancelled", err, d.Status)
	}
	if got := claimAll(t, s, 1); got[0].NotificationID != "a1" {
		t.Fatalf("claimed %s, want the redriven head of A", got[0].NotificationID)
	}
	var keys int // K's head was its last delivery: its key is gone
	if err := s.DB().Get(&keys, `SELECT count(*) FROM courier_ordering_keys WHERE ordering_key = 'K'`); err != nil || keys != 0 {
		t.Fatalf("K's rows: %v, %d; want none", err, keys)
	}
}

// epA and epB are the two endpoints of the tests that line up
// transactions taking both.
const epA, epB = "https://receiver.example/a", "https://receiver.example/b"

// abEnqueue enqueues each id to epA or epB, by its first letter.
func abEnqueue(t *testing.T, s *store.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		ep := epA
		if id[0] == 'b' {
			ep = epB
		}
		enqueue(t, s, store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id)})
	}
}

// settleUnavailable settles the leases of ids in one batch, each a 503
// retried an hour on.
func settleUnavailable(t *testing.T, s *store.Store, leases map[string]protocol.Lease, ids ...string) error {
	var ocs []protocol.Outcome
	for _, id := range ids {
		ocs = append(ocs, protocol.Outcome{Lease: leases[id], Result: protocol.Retry,
			Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Hour})
	}
	st, err := protocol.For(s).Settle(t.Context(), ocs...)
	if err != nil {
		return err
	}
	for _, x := range st {
		if x.Err != nil {
			return x.Err
		}
	}
	return nil
}

// wantBFirst checks that epB's breaker row comes first in the table, the
// order the tests line their transactions up against.
func wantBFirst(t *testing.T, s *store.Store) {
	t.Helper()
	var first string
	if err := s.DB().Get(&first, `SELECT endpoint FROM courier_endpoints ORDER BY ctid LIMIT 1`); err != nil || first != epB {
		t.Fatalf("the table's first breaker row: %v, %s; want b's", err, first)
	}
}

// TestProbesAndSettleTakeEndpointsInOneOrder: a settle records its
// outcomes' breakers endpoint by endpoint, in endpoint order, each row
// held until it commits; a claim that probes several endpoints whose
// cool-down ended takes their rows (endpoint_probe_take) too, and must
// take them in that order. Here a and b are open, b's row first in the
// table, and a settle of late failures of both has written a's record
// and waits for b's lock, held by a third transaction, when the claim
// begins: a claim taking b's row before a's would wait for the settle
// while the settle waited for it, one of them aborted (SQLSTATE 40P01),
// or the settle failing on its lock timeout (55P03).
func TestProbesAndSettleTakeEndpointsInOneOrder(t *testing.T) {
	clock := fakeclock.New()
	s := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})[0]
	abEnqueue(t, s, "a1", "a2", "b1", "b2")
	leases := map[string]protocol.Lease{}
	for _, c := range claimAll(t, s, 4) {
		leases[c.NotificationID] = c.Lease
	}
	for _, id := range []string{"b1", "a1"} { // each opens its endpoint: b's row is written first
		if err := settleUnavailable(t, s, leases, id); err != nil {
			t.Fatal(err)
		}
	}
	wantBFirst(t, s)
	clock.Advance(2 * time.Second) // both cool-downs over

	blocker := holdRows(t, s.DB(), `SELECT pg_advisory_xact_lock(721234500, hashtext($1))`, epB)
	settled := inBackground(func() error { return settleUnavailable(t, s, leases, "a2", "b2") })
	waitLockWaiters(t, s.DB(), 1) // the settle wrote a's record and waits for b's lock
	claimed := inBackground(func() error {
		_, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w2", Limit: 10, Lease: time.Minute})
		return err
	})
	waitLockWaiters(t, s.DB(), 2) // the claim waits for a's row
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	errSettle, errClaim := <-settled, <-claimed
	if errSettle != nil || errClaim != nil {
		t.Fatalf("settle of late failures of a and b: %v; claim probing a and b: %v; want both to succeed", errSettle, errClaim)
	}
}

// TestReleaseOfProbesAndSettleTakeEndpointsInOneOrder: a worker gives back
// the probes of two half-open endpoints, a and b (b's row first in the
// table), while a settle of late failures of both writes their records,
// in endpoint order. The release must take the endpoints' rows
// (endpoint_probe_released) in that order too: taking b's, then waiting
// for a's, which the settle holds while it waits for b's, one of them
// would be aborted (SQLSTATE 40P01) or the settle fail on its lock
// timeout (55P03). The settle waits for b's lock, held by a third
// transaction, when the release begins.
func TestReleaseOfProbesAndSettleTakeEndpointsInOneOrder(t *testing.T) {
	clock := fakeclock.New()
	s := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})[0]
	abEnqueue(t, s, "a1", "a2", "a3", "b1", "b2", "b3")
	leases := map[string]protocol.Lease{}
	for _, c := range claimAll(t, s, 6) {
		leases[c.NotificationID] = c.Lease
	}
	for _, id := range []string{"b1", "a1"} { // each opens its endpoint
		if err := settleUnavailable(t, s, leases, id); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Second) // both cool-downs over
	abEnqueue(t, s, "a4", "b4")
	probes := claimAll(t, s, 2) // a4 and b4 probe a and b, half open
	// A late failure of a: a's row is written last.
	if err := settleUnavailable(t, s, leases, "a2"); err != nil {
		t.Fatal(err)
	}
	wantBFirst(t, s)

	blocker := holdRows(t, s.DB(), `SELECT pg_advisory_xact_lock(721234500, hashtext($1))`, epB)
	settled := inBackground(func() error { return settleUnavailable(t, s, leases, "a3", "b3") })
	waitLockWaiters(t, s.DB(), 1) // the settle wrote a's record and waits for b's lock
	released := inBackground(func() error {
		_, err := protocol.For(s).Release(t.Context(), probes[0].Lease, probes[1].Lease)
		return err
	})
	waitLockWaiters(t, s.DB(), 2) // the release waits for a's row
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	errSettle, errRelease := <-settled, <-released
	if errSettle != nil || errRelease != nil {
		t.Fatalf("settle of late failures of a and b: %v; release of their probes: %v; want both to succeed", errSettle, errRelease)
	}
}

// TestRedriveKeysReadTheRowsRedriveMoves: outbox_redrive_keys repeats
// outbox_redrive's conditions (Redrive takes the keys of the rows it is
// about to move before it moves them); on each engine the two read the
// same rows, the keyed ones (outbox_redrive's last condition keeps those
// whose keys Redrive took), so a condition changed in one is changed in
// the other.
func TestRedriveKeysReadTheRowsRedriveMoves(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", engine, "sql", "queries", "outbox.sql"))
		if err != nil {
			t.Fatal(err)
		}
		where := func(name, end string) string {
			t.Helper()
			_, body, ok := strings.Cut(string(raw), "-- name: "+name+"\n")
			_, body, ok2 := strings.Cut(body, "\nWHERE ")
			body, _, ok3 := strings.Cut(body, end)
			if !ok || !ok2 || !ok3 {
				t.Fatalf("%s: no query %s with a WHERE ending at %q", engine, name, end)
			}
			var conds []string
			for line := range strings.Lines(body) {
				if line = strings.TrimSpace(line); !strings.HasPrefix(line, "--") {
					conds = append(conds, line)
				}
			}
			return strings.Join(conds, " ")
		}
		keys, moved := where("outbox_redrive_keys", "\nGROUP BY"), where("outbox_redrive", "\n    AND (ordering_key IS NULL OR ")
		if keys != "ordering_key IS NOT NULL AND "+moved {
			t.Errorf("%s: outbox_redrive_keys reads\n  %s\nwant the keyed rows of outbox_redrive's\n  %s", engine, keys, moved)
		}
	}
}

// lateFailureAhead opens endpoint a (a1 failed) with a2 still leased, to
// fail late, and lets a's cool-down end.
func lateFailureAhead(t *testing.T) (*store.Store, *fakeclock.Clock, map[string]protocol.Lease) {
	t.Helper()
	clock := fakeclock.New()
	s := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})[0]
	abEnqueue(t, s, "a1", "a2")
	leases := map[string]protocol.Lease{}
	for _, c := range claimAll(t, s, 2) {
		leases[c.NotificationID] = c.Lease
	}
	if err := settleUnavailable(t, s, leases, "a1"); err != nil { // a opens
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	return s, clock, leases
}

// settledOrWaiting waits until the settle has ended, or waits for a lock
// beside the one transaction already waiting.
func settledOrWaiting(t *testing.T, s *store.Store, settled <-chan error) {
	t.Helper()
	waitUntil(t, func() bool {
		var n int
		if err := s.DB().Get(&n, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		return n >= 2 || len(settled) > 0
	})
}

// TestReleaseOfAProbeIsNotUndoneByALateSettle: a release that gives back
// a half-open endpoint's probe changes the endpoint's breaker (its probe is
// due again at once), and so must take the breaker's lock (endpoint_lock)
// as every settle does: a settle of a late failure of that endpoint reads
// the breaker under its lock and writes it back whole. Here the release
// waits for the endpoint's row, held by a third transaction, when the
// settle begins; had the release not waited for the settle's lock, the
// settle, having read the breaker before the release committed, would
// write back the probe's lease as the end of the wait, and the endpoint
// would not be probed again until the hour-long lease of a probe given
// back ran out.
func TestReleaseOfAProbeIsNotUndoneByALateSettle(t *testing.T) {
	s, clock, leases := lateFailureAhead(t)
	abEnqueue(t, s, "a3")
	probe := claimAll(t, s, 1) // a3 probes a, leased for an hour

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_endpoints WHERE endpoint = $1 FOR UPDATE`, epA)
	released := inBackground(func() error {
		_, err := protocol.For(s).Release(t.Context(), probe[0].Lease)
		return err
	})
	waitLockWaiters(t, s.DB(), 1) // the release waits for a's row
	settled := inBackground(func() error { return settleUnavailable(t, s, leases, "a2") })
	settledOrWaiting(t, s, settled)
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if errRelease, errSettle := <-released, <-settled; errRelease != nil || errSettle != nil {
		t.Fatalf("release of a's probe: %v; settle of a's late failure: %v", errRelease, errSettle)
	}
	h, err := s.Endpoints.Get(t.Context(), epA)
	if err != nil || h.State != store.EndpointHalfOpen || h.ConsecutiveFailures != 2 || h.OpenUntil.After(clock.Now()) {
		t.Fatalf("endpoint a: %v, %s, %d failures, its probe due in %v; want half open, 2 failures, its probe due now",
			err, h.State, h.ConsecutiveFailures, h.OpenUntil.Sub(clock.Now()))
	}
	if again := claimAll(t, s, 1); again[0].NotificationID != "a3" {
		t.Fatalf("claimed %s, want a3 probing a again", again[0].NotificationID)
	}
}

// TestAProbeTakenBesideALateSettleIsAlone: a claim that probes an open
// endpoint whose cool-down ended makes it half open, its probe in flight;
// a settle of a late failure of that endpoint reads the breaker under its
// lock (endpoint_lock) and writes it back whole. Whichever commits first,
// no second delivery of the endpoint goes out while the probe is in
// flight: settled first, the late failure opens the endpoint for another
// cool-down and no probe is taken; settled after, it counts, and the
// probe decides. Here the claim waits for the endpoint's row, held by a
// third transaction, when the settle begins; had the claim not waited for
// the settle's lock, the settle would write the endpoint back open over
// the claim's probe, and the claim after the next cool-down would send a
// second probe beside the first.
func TestAProbeTakenBesideALateSettleIsAlone(t *testing.T) {
	s, clock, leases := lateFailureAhead(t)
	abEnqueue(t, s, "a3", "a4")

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_endpoints WHERE endpoint = $1 FOR UPDATE`, epA)
	var probe []protocol.Claimed
	claimed := inBackground(func() error {
		var err error
		probe, err = protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Hour})
		return err
	})
	waitLockWaiters(t, s.DB(), 1) // the claim waits for a's row
	settled := inBackground(func() error { return settleUnavailable(t, s, leases, "a2") })
	settledOrWaiting(t, s, settled)
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if errClaim, errSettle := <-claimed, <-settled; errClaim != nil || errSettle != nil {
		t.Fatalf("claim probing a: %v; settle of a's late failure: %v", errClaim, errSettle)
	}
	clock.Advance(2 * time.Second) // past any cool-down the late failure began
	again, err := protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(probe)+len(again) > 1 {
		h, _ := s.Endpoints.Get(t.Context(), epA)
		t.Fatalf("leased %d then %d deliveries of a, its breaker now %s with %d in flight; want one probe at most in flight",
			len(probe), len(again), h.State, h.InFlight)
	}
}

// Three endpoints, in byte order, the first and last of which share their
// breakers' lock key (hashtext(epX) = hashtext(epZ)): endpoint_lock takes
// one lock for both.
const (
	epX = "https://receiver.example/c298372"
	epY = "https://receiver.example/c3"
	epZ = "https://receiver.example/c360093"
)

// TestEndpointsSharingALockKeyNeverDeadlock: two endpoints whose breakers'
// locks (endpoint_lock) share their key are one lock, and every
// transaction takes the locks it needs in one order, of their keys: in
// endpoint order, a settle of late failures of x and y takes x's key
// then y's, and a claim probing y and z takes y's then z's, x's, and the
// two wait for each other in a circle, one of them aborted (SQLSTATE
// 40P01) or the settle failing on its lock timeout (55P03). Here the
// settle holds x's lock and waits for x's row, held by a third
// transaction, when the claim begins.
func TestEndpointsSharingALockKeyNeverDeadlock(t *testing.T) {
	clock := fakeclock.New()
	s := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now,
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})[0]
	var same bool
	if err := s.DB().Get(&same, `SELECT hashtext($1) = hashtext($2)`, epX, epZ); err != nil || !same || !(epX < epY && epY < epZ) {
		t.Fatalf("x and z share a lock key: %v, %v; want them to, y between them", same, err)
	}
	add := func(ep string, ids ...string) {
		for _, id := range ids {
			enqueue(t, s, store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id)})
		}
	}
	add(epX, "x1", "x2")
	add(epY, "y1", "y2")
	add(epZ, "z1")
	leases := map[string]protocol.Lease{}
	for _, c := range claimAll(t, s, 5) {
		leases[c.NotificationID] = c.Lease
	}
	if err := settleUnavailable(t, s, leases, "y1", "z1"); err != nil { // y and z open
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)                                // their cool-downs over
	if err := settleUnavailable(t, s, leases, "x1"); err != nil { // x opens, cooling down
		t.Fatal(err)
	}
	add(epY, "y3")
	add(epZ, "z2")

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_endpoints WHERE endpoint = $1 FOR UPDATE`, epX)
	settled := inBackground(func() error { return settleUnavailable(t, s, leases, "x2", "y2") })
	waitLockWaiters(t, s.DB(), 1) // the settle holds x's lock and waits for x's row
	var probes []protocol.Claimed
	claimed := inBackground(func() (err error) {
		probes, err = protocol.For(s).Claim(t.Context(), protocol.ClaimParams{Owner: "w2", Limit: 10, Lease: time.Minute})
		return err
	})
	waitLockWaiters(t, s.DB(), 2) // the claim waits for a lock the settle holds
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	errSettle, errClaim := <-settled, <-claimed
	if errSettle != nil || errClaim != nil {
		t.Fatalf("settle of late failures of x and y: %v; claim probing y and z: %v; want both to succeed", errSettle, errClaim)
	}
	if len(probes) > 2 {
		t.Fatalf("the claim leased %d, want a probe of y and z at most", len(probes))
	}
}

// TestRedriveTakesTheKeysOfDeliveriesThatFailedSinceItLooked: Redrive
// takes the keys of the failed deliveries it found before it locks any
// delivery; deliveries of other keys that fail meanwhile are moved by
// the same statement, and their keys taken after them. A Cancel of one,
// which takes its key before its row, then holds the key Redrive waits
// for while it waits for the row Redrive holds. Here Redrive waits for
// K1's row (held by a third transaction) while d0 of K0 and d2 of K2
// fail, which it leaves failed, for the next Redrive; moving them, it
// would hold d0 and d2 while it waited for K0's row, and Cancel of d2
// would take K2's and wait for d2.
func TestRedriveTakesTheKeysOfDeliveriesThatFailedSinceItLooked(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
	s, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	ids := map[string]int64{}
	for _, id := range []string{"d0", "d1", "d2", "n0", "n1", "n2"} { // n* wait behind d* in their keys
		ids[id] = enqueue(t, s, store.EnqueueParams{NotificationID: id, Endpoint: ep, Payload: fmt.Appendf(nil, `{"id":%q}`, id), OrderingKey: "K" + id[1:], MaxAttempts: 1})
	}
	leases := map[string]protocol.Claimed{}
	for _, c := range claimAll(t, s, 3) {
		leases[c.NotificationID] = c
	}
	settleAll(t, s, protocol.Failed, leases["d1"]) // n1 heads K1

	blockK1 := holdRows(t, s.DB(), `SELECT 1 FROM courier_ordering_keys WHERE ordering_key = 'K1' FOR UPDATE`)
	var moved int
	redriven := inBackground(func() (err error) {
		moved, err = operator.Outbox.Redrive(t.Context(), store.RedriveParams{Endpoint: ep})
		return err
	})
	waitLockWaiters(t, s.DB(), 1)                                // Redrive found d1 alone and waits for K1
	settleAll(t, s, protocol.Failed, leases["d0"], leases["d2"]) // n0 heads K0, n2 K2
	blockK0 := holdRows(t, s.DB(), `SELECT 1 FROM courier_ordering_keys WHERE ordering_key = 'K0' FOR UPDATE`)
	var pid int
	if err := blockK0.Get(&pid, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	blockK1.Rollback()
	// Redrive ends, or, having moved d0, d1 and d2, waits for K0.
	redriven = endedOrHolds(t, s.DB(), redriven, `SELECT count(*) > 0 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`, pid)
	cancelled := inBackground(func() error { return s.Outbox.Cancel(t.Context(), ids["d2"]) })
	// Cancel ends, or holds K2 and waits for d2, which Redrive holds.
	cancelled = endedOrHolds(t, s.DB(), cancelled, `SELECT count(*) >= 2 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	blockK0.Rollback()
	errRedrive, errCancel := <-redriven, <-cancelled
	if errRedrive != nil || errCancel != nil {
		t.Fatalf("Redrive: %v; Cancel: %v", errRedrive, errCancel)
	}
	if moved != 1 {
		t.Fatalf("Redrive moved %d, want d1 alone, the one it found", moved)
	}
	for id, want := range map[string]courier.Status{"d0": courier.StatusFailed, "d1": courier.StatusPending, "d2": courier.StatusSuppressed} {
		if d, err := s.Outbox.Get(t.Context(), ids[id]); err != nil || d.Status != want {
			t.Fatalf("%s: %v, %s; want %s", id, err, d.Status, want)
		}
	}
}

// endedOrHolds waits until done has ended or the query cond holds, and
// returns a channel that gives done's error.
func endedOrHolds(t *testing.T, db *sqlx.DB, done <-chan error, cond string, args ...any) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		select {
		case err := <-done:
			again := make(chan error, 1)
			again <- err
			return again
		default:
		}
		var ok bool
		if err := db.GetContext(ctx, &ok, cond, args...); err != nil {
			t.Fatal(err)
		}
		if ok {
			return done
		}
		select {
		case <-ctx.Done():
			t.Fatalf("neither ended nor %s", cond)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestCancelNeverWaitsForAKeyMadeAfterItLooked: Cancel takes the row of
// its delivery's ordering key before the delivery's, when the key has one.
// When Cancel looked, K had none (d failed and was skipped, OrderingSkipFailed,
// and K had nothing else to send); by the time it holds d, an enqueue made
// K's row again and a Redrive of d holds it, waiting for d. Had Cancel
// then waited for K to move it on, the two would wait for each other in a
// circle, one of them aborted (SQLSTATE 40P01). Here Cancel waits for d's
// row, held by a third transaction, while the enqueue and the Redrive run.
func TestCancelNeverWaitsForAKeyMadeAfterItLooked(t *testing.T) {
	stores := couriertest.PostgresStores(t, 2, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
	s, operator := stores[0], stores[1]
	const ep = "https://receiver.example/hook"
	d := enqueue(t, s, store.EnqueueParams{NotificationID: "d", Endpoint: ep, Payload: []byte(`{"id":"d"}`), OrderingKey: "K", MaxAttempts: 1})
	settleAll(t, s, protocol.Failed, claimAll(t, s, 1)...) // d fails, skipped: K has no row left

	blocker := holdRows(t, s.DB(), `SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`, d)
	cancelled := inBackground(func() error { return operator.Outbox.Cancel(t.Context(), d) })
	waitLockWaiters(t, s.DB(), 1) // Cancel found no key row, and waits for d's
	e := enqueue(t, s, store.EnqueueParams{NotificationID: "e", Endpoint: ep, Payload: []byte(`{"id":"e"}`), OrderingKey: "K"})
	redriven := inBackground(func() error {
		_, err := s.Outbox.Redrive(t.Context(), store.RedriveParams{ID: d})
		return err
	})
	waitLockWaiters(t, s.DB(), 2) // Redrive took K's row, and waits for d's
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	errCancel, errRedrive := <-cancelled, <-redriven
	if errCancel != nil || errRedrive != nil {
		t.Fatalf("Cancel of d: %v; Redrive of d: %v; want both to succeed", errCancel, errRedrive)
	}
	if got, err := s.Outbox.Get(t.Context(), d); err != nil || got.Status != courier.StatusSuppressed {
		t.Fatalf("d: %v, %s; want cancelled", err, got.Status)
	}
	if got := claimAll(t, s, 1); got[0].DeliveryID != e {
		t.Fatalf("claimed %s, want e, K's head", got[0].NotificationID)
	}
}

// TestReleaseHoldsNoDeliveryWhileItWaits: a claim's picks take due rows
// FOR UPDATE SKIP LOCKED, and yet may wait: a row the pick saw due, which
// another claim leased and committed just as the pick reached it, is
// locked in its newest version, and PostgreSQL waits for whatever
// transaction holds that version (as a release of the lease does), SKIP
// LOCKED or not. A release that held one of its deliveries' rows while it
// waited for a lock that claim held (the row of another lease it gives
// back, which the claim reclaimed as it expired; a breaker's lock, which
// the claim took to probe the endpoint) would wait for it in a circle,
// one of them aborted (SQLSTATE 40P01). So a release holds none while it
// waits: it takes the breakers' locks first, then the rows no other
// transaction holds, and waits for a held row alone. Here a third
// transaction stands for the claim: it holds what the release waits for,
// then waits for the release's first delivery, as the pick would.
func TestReleaseHoldsNoDeliveryWhileItWaits(t *testing.T) {
	for _, tc := range []struct {
		name string
		hold string // what the claim holds, given the second lease's row
	}{
		{"a lease the claim reclaimed", `SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`},
		{"a breaker's lock the claim took", `SELECT pg_advisory_xact_lock(721234500, hashtext(endpoint)) FROM courier_outbox WHERE id = $1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := couriertest.PostgresStores(t, 1, store.Config{})[0]
			abEnqueue(t, s, "a1", "b1")
			leases := claimAll(t, s, 2)
			first, second := leases[0].Lease, leases[1].Lease
			if first.DeliveryID > second.DeliveryID {
				first, second = second, first // in id order
			}

			claim := holdRows(t, s.DB(), tc.hold, second.DeliveryID)
			var n int
			released := inBackground(func() (err error) {
				n, err = protocol.For(s).Release(t.Context(), first, second)
				return err
			})
			waitLockWaiters(t, s.DB(), 1) // the release waits for the claim
			if _, err := claim.Exec(`SELECT 1 FROM courier_outbox WHERE id = $1 FOR UPDATE`, first.DeliveryID); err != nil {
				t.Fatalf("the claim's wait for the release's first delivery: %v; want the row free", err)
			}
			if err := claim.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-released; err != nil || n != 2 {
				t.Fatalf("release: %v, %d released; want both", err, n)
			}
			claimAll(t, s, 2) // both due again
		})
	}
}

// TestSettleOfTwoLeasesOfADeliveryTakesBreakersInOneOrder: a settle given
// two outcomes of one delivery (a lease that ran out, and the one the
// delivery was claimed again with) applies them in two statements, one
// per lease; it still records the breakers of all its outcomes in one
// lock order (lockOrder), not each statement's in turn. Here the settle's
// first statement settles b1 and a1's lost lease, its second a1's current
// one: taking b's lock for the first, then a's for the second, it would
// wait for a settle of a2 and b2, which took a's and waits for b's, and
// the database would end the circle by aborting one (SQLSTATE 40P01),
// however the settle recovers from it. Here the first settle waits for
// b's lock, held by a third transaction, when the second begins.
func TestSettleOfTwoLeasesOfADeliveryTakesBreakersInOneOrder(t *testing.T) {
	clock := fakeclock.New()
	stores := couriertest.PostgresStores(t, 1, store.Config{Now: clock.Now, Breaker: store.BreakerConfig{Threshold: 10}})
	s := stores[0]
	fastDeadlockDetection(t, stores)
	watch := watchDeadlocks(t, stores)
	var aFirst bool
	if err := s.DB().Get(&aFirst, `SELECT hashtext($1) < hashtext($2)`, epA, epB); err != nil || !aFirst {
		t.Fatalf("a's lock key before b's: %v, %v; want it", aFirst, err)
	}
	abEnqueue(t, s, "a1", "b1")
	leases := map[string]protocol.Lease{}
	for _, c := range claimAll(t, s, 2) {
		leases[c.NotificationID] = c.Lease
	}
	stale := leases["a1"]
	clock.Advance(2 * time.Hour) // both leases run out: a claim takes them again
	for _, c := range claimAll(t, s, 2) {
		leases[c.NotificationID] = c.Lease
	}
	abEnqueue(t, s, "a2", "b2")
	for _, c := range claimAll(t, s, 2) {
		leases[c.NotificationID] = c.Lease
	}
	// unavailable settles each lease a 503, and checks that each outcome
	// was recorded but the lost lease's.
	unavailable := func(ls ...protocol.Lease) error {
		var ocs []protocol.Outcome
		for _, l := range ls {
			ocs = append(ocs, protocol.Outcome{Lease: l, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Hour})
		}
		st, err := protocol.For(s).Settle(t.Context(), ocs...)
		if err != nil {
			return err
		}
		for i, x := range st {
			if lost := ls[i] == stale; lost != (courier.CodeOf(x.Err) == courier.CodeLeaseLost) || !lost && x.Status != courier.StatusRetryWait {
				return fmt.Errorf("outcome %d: %+v", i, x)
			}
		}
		return nil
	}

	blocker := holdRows(t, s.DB(), `SELECT pg_advisory_xact_lock(721234500, hashtext($1))`, epB)
	first := inBackground(func() error { return unavailable(leases["b1"], stale, leases["a1"]) })
	waitLockWaiters(t, s.DB(), 1) // the first settle waits for b's lock
	second := inBackground(func() error { return unavailable(leases["a2"], leases["b2"]) })
	waitLockWaiters(t, s.DB(), 2) // the second waits too, for a's lock or b's
	if err := blocker.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err1, err2 := <-first, <-second; err1 != nil || err2 != nil {
		t.Fatalf("settles: %v; %v", err1, err2)
	}
	watch.wantNone(t, "")
}

package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

const opsEndpoint = "https://receiver.example/hooks"

// keyHealthy checks the ordering keys of the bundle's endpoint as an
// operator would find them: Check finds no delivery invalid, a key
// BlockedKeys lists is held by a failed or quarantined head, at most one
// delivery of a key is leased, and a key with a delivery waiting for it
// has a head that is unfinished and not waiting itself, or is listed by
// BlockedKeys.
func keyHealthy(t *testing.T, b *bundle) {
	t.Helper()
	keyHealthyAt(t, b, opsEndpoint)
}

// keyHealthyAt is keyHealthy for the deliveries to endpoint.
func keyHealthyAt(t *testing.T, b *bundle, endpoint string) {
	t.Helper()
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{Endpoint: endpoint, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := b.store.Outbox.Check(b.ctx, 1000); err != nil || len(h.Invalid) != 0 {
		t.Errorf("Check = %+v, %v; want no invalid delivery", h, err)
	}
	leased, waiting, moving := map[string]int{}, map[string]int{}, map[string]bool{}
	for _, d := range page.Deliveries {
		if d.OrderingKey == "" {
			continue
		}
		switch {
		case d.Status == courier.StatusLeased:
			leased[d.OrderingKey]++
			moving[d.OrderingKey] = true
		case d.Held == store.HeldByKey:
			waiting[d.OrderingKey]++
		case d.Status == courier.StatusPending || d.Status == courier.StatusRetryWait:
			moving[d.OrderingKey] = true
		}
	}
	for _, bk := range blocked {
		if d := b.get(t, bk.Head); d.Status != courier.StatusFailed && d.Status != courier.StatusQuarantined {
			t.Errorf("BlockedKeys lists key %s held by %s, which is %s", bk.OrderingKey, d.NotificationID, d.Status)
		}
	}
	for k, n := range leased {
		if n > 1 {
			t.Errorf("key %s: %d deliveries leased at once", k, n)
		}
	}
	for k := range waiting {
		if !moving[k] && !slices.ContainsFunc(blocked, func(bk store.BlockedKey) bool { return bk.OrderingKey == k }) {
			t.Errorf("key %s: %d deliveries wait, with no head in flight or due, and BlockedKeys = %+v", k, waiting[k], blocked)
		}
	}
}

// testOrderingRedriveAfterTheKeyMovedOn: under OrderingSkipFailed, a failed
// delivery redriven once every later delivery of its key was sent heads
// the key again: it is claimable, alone, and one enqueued while it is in
// flight waits for it.
func testOrderingRedriveAfterTheKeyMovedOn(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
	for _, id := range []string{"k1", "k2", "k3"} {
		b.enqueue(t, keyed(id, "k"))
	}
	k1 := b.claim(t, "w", 10, time.Minute)[0]
	if err := b.fail(k1.Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"k2", "k3"} {
		c := b.claim(t, "w", 10, time.Minute)
		if got := ids(c); !slices.Equal(got, []string{want}) {
			t.Fatalf("claimed %v, want %s", got, want)
		}
		if err := b.complete(c[0].Lease, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: k1.DeliveryID}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	keyHealthy(t, b)
	c := b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("after Redrive claimed %v, want k1", got)
	}
	b.enqueue(t, keyed("k4", "k"))
	if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v while k1 is in flight", got)
	}
	keyHealthy(t, b)
	if err := b.complete(c[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"k4"}) {
		t.Fatalf("after k1 claimed %v, want k4", got)
	}
}

// testOrderingRedriveOfSeveralSkipped: under OrderingSkipFailed, the failed
// deliveries of a key redriven together go after the key's current head,
// one at a time, in enqueue order, before the ones still waiting.
func testOrderingRedriveOfSeveralSkipped(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
	for _, id := range []string{"k1", "k2", "k3", "k4"} {
		b.enqueue(t, keyed(id, "k"))
	}
	for _, want := range []string{"k1", "k2"} {
		c := b.claim(t, "w", 10, time.Minute)
		if got := ids(c); !slices.Equal(got, []string{want}) {
			t.Fatalf("claimed %v, want %s", got, want)
		}
		if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
			t.Fatal(err)
		}
	}
	k3 := b.claim(t, "w", 10, time.Minute)
	if got := ids(k3); !slices.Equal(got, []string{"k3"}) {
		t.Fatalf("claimed %v, want k3", got)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: opsEndpoint}); err != nil || n != 2 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	keyHealthy(t, b)
	if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v while k3 is in flight", got)
	}
	last := k3[0]
	for _, want := range []string{"k1", "k2", "k4"} {
		if err := b.complete(last.Lease, ""); err != nil {
			t.Fatal(err)
		}
		c := b.claim(t, "w", 10, time.Minute)
		if got := ids(c); !slices.Equal(got, []string{want}) {
			t.Fatalf("claimed %v, want %s", got, want)
		}
		keyHealthy(t, b)
		last = c[0]
	}
}

// testOrderingCancelOfAWaitingDeliveryOrAHead: cancelling a delivery
// waiting for its key takes it out of the order and leaves the head in
// flight alone; cancelling a head waiting for its retry, or a failed head
// holding its key, lets the next go.
func testOrderingCancelOfAWaitingDeliveryOrAHead(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var id = map[string]int64{}
	for _, n := range []string{"k1", "k2", "k3", "k4", "k5"} {
		id[n] = b.enqueue(t, keyed(n, "k")).ID
	}
	k1 := b.claim(t, "w", 10, time.Minute)[0]
	if err := b.store.Outbox.Cancel(b.ctx, id["k2"]); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v after cancelling k2 while k1 is in flight", got)
	}
	keyHealthy(t, b)
	if err := b.complete(k1.Lease, ""); err != nil {
		t.Fatal(err)
	}
	c := b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"k3"}) {
		t.Fatalf("claimed %v, want k3", got)
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Outbox.Cancel(b.ctx, id["k3"]); err != nil {
		t.Fatal(err)
	}
	c = b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"k4"}) {
		t.Fatalf("after cancelling the retrying head claimed %v, want k4", got)
	}
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	keyHealthy(t, b)
	if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v while failed k4 holds the key", got)
	}
	if err := b.store.Outbox.Cancel(b.ctx, id["k4"]); err != nil {
		t.Fatal(err)
	}
	if blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 10); err != nil || len(blocked) != 0 {
		t.Fatalf("BlockedKeys = %+v, %v after cancelling the failed head", blocked, err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"k5"}) {
		t.Fatalf("after cancelling the failed head claimed %v, want k5", got)
	}
}

// testOrderingKeyAcrossDisableAndEnable: a head settled while its
// endpoint is disabled makes way for the next, which is sent once the
// endpoint is enabled; a head whose lease runs out while the endpoint is
// disabled is sent again first.
func testOrderingKeyAcrossDisableAndEnable(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, n := range []string{"k1", "k2", "k3"} {
		b.enqueue(t, keyed(n, "k"))
	}
	k1 := b.claim(t, "w", 10, time.Minute)[0]
	if err := b.store.Endpoints.Disable(b.ctx, opsEndpoint); err != nil {
		t.Fatal(err)
	}
	if err := b.complete(k1.Lease, ""); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v while the endpoint is disabled", got)
	}
	keyHealthy(t, b)
	if err := b.store.Endpoints.Enable(b.ctx, opsEndpoint); err != nil {
		t.Fatal(err)
	}
	k2 := b.claim(t, "w", 10, time.Minute)
	if got := ids(k2); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("after Enable claimed %v, want k2", got)
	}
	if err := b.store.Endpoints.Disable(b.ctx, opsEndpoint); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute) // k2's lease runs out
	if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
		t.Fatalf("claimed %v while the endpoint is disabled", got)
	}
	keyHealthy(t, b)
	if err := b.store.Endpoints.Enable(b.ctx, opsEndpoint); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got := ids(b.claim(t, "w", 10, time.Minute))
		keyHealthy(t, b)
		if len(got) == 0 {
			b.clock.Advance(time.Minute)
			continue
		}
		if !slices.Equal(got, []string{"k2"}) {
			t.Fatalf("after Enable claimed %v, want k2 again", got)
		}
		return
	}
	t.Fatal("k2 was never claimed again")
}

// testOrderingDeadlineWhileWaiting: a delivery whose deadline passes
// while it waits for its key ends once it heads the key: under OrderingHoldKey it
// then holds the key, listed by BlockedKeys; under OrderingSkipFailed the next
// goes.
func testOrderingDeadlineWhileWaiting(t *testing.T, open OpenFunc) {
	for _, onFailure := range []store.OrderingOnFailure{store.OrderingHoldKey, store.OrderingSkipFailed} {
		b := setup(t, open, store.Config{OrderingOnFailure: onFailure})
		k2 := keyed("k2", "k")
		k2.Deadline = b.clock.Now().Add(time.Minute)
		for _, p := range []store.EnqueueParams{keyed("k1", "k"), k2, keyed("k3", "k")} {
			b.enqueue(t, p)
		}
		k1 := b.claim(t, "w", 10, time.Hour)[0]
		b.clock.Advance(2 * time.Minute)
		if err := b.complete(k1.Lease, ""); err != nil {
			t.Fatal(err)
		}
		var got []string
		for range 3 {
			if got = ids(b.claim(t, "w", 10, time.Minute)); len(got) > 0 {
				break
			}
		}
		keyHealthy(t, b)
		switch onFailure {
		case store.OrderingHoldKey:
			if len(got) != 0 {
				t.Fatalf("OrderingHoldKey: claimed %v behind the expired k2", got)
			}
			blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 10)
			if err != nil || len(blocked) != 1 {
				t.Fatalf("OrderingHoldKey: BlockedKeys = %+v, %v; want the key", blocked, err)
			}
		case store.OrderingSkipFailed:
			if !slices.Equal(got, []string{"k3"}) {
				t.Fatalf("OrderingSkipFailed: claimed %v, want k3", got)
			}
		}
	}
}

// testOrderingPruneOfAKeysFinishedDeliveries: pruning the finished
// deliveries of a key changes nothing for those still waiting.
func testOrderingPruneOfAKeysFinishedDeliveries(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var id = map[string]int64{}
	for _, n := range []string{"k1", "k2", "k3", "k4", "k5"} {
		id[n] = b.enqueue(t, keyed(n, "k")).ID
	}
	k1 := b.claim(t, "w", 10, time.Hour)[0]
	if err := b.complete(k1.Lease, ""); err != nil {
		t.Fatal(err)
	}
	k2 := b.claim(t, "w", 10, time.Hour)[0]
	if err := b.store.Outbox.Cancel(b.ctx, id["k3"]); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Second}); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want k1 and k3", n, err)
	}
	keyHealthy(t, b)
	if got := ids(b.claim(t, "w", 10, time.Hour)); len(got) != 0 {
		t.Fatalf("claimed %v while k2 is in flight", got)
	}
	if err := b.complete(k2.Lease, ""); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	if _, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Second}); err != nil {
		t.Fatal(err)
	}
	keyHealthy(t, b)
	if got := ids(b.claim(t, "w", 10, time.Hour)); !slices.Equal(got, []string{"k4"}) {
		t.Fatalf("claimed %v, want k4", got)
	}
}

// testOrderingKeyOfAPausedSubscription: the deliveries of a key whose
// subscription is paused are suppressed as they come to head it, one
// after the other, and none is leased; published again once it is
// resumed, they go one at a time in the order published again.
func testOrderingKeyOfAPausedSubscription(t *testing.T, open OpenFunc) {
	const url = "https://sub.example/hooks"
	b := setup(t, open, store.Config{})
	params := subscription("t", url, "k", "order.updated")
	sub, err := b.store.Subscriptions.Create(b.ctx, b.db, params)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id string) {
		t.Helper()
		tx := b.begin(t)
		if _, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{
			Tenant: "t", EventType: "order.updated", EventID: id, Payload: []byte(`{"id":"` + id + `"}`), OrderingKey: "order-7",
		}); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	name := func(id string) string { return fmt.Sprintf("%s:%d", id, sub.ID) }
	for _, id := range []string{"e1", "e2", "e3"} {
		publish(id)
	}
	e1 := b.claim(t, "w", 10, time.Minute)
	if got := ids(e1); !slices.Equal(got, []string{name("e1")}) {
		t.Fatalf("claimed %v, want e1", got)
	}
	params.Paused = true
	if _, err := b.store.Subscriptions.Update(b.ctx, b.db, sub.ID, params); err != nil {
		t.Fatal(err)
	}
	if err := b.complete(e1[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
			t.Fatalf("claimed %v of a paused subscription", got)
		}
		keyHealthyAt(t, b, url)
	}
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{Endpoint: url, Status: courier.StatusSuppressed})
	if err != nil || len(page.Deliveries) != 2 {
		t.Fatalf("suppressed %d, %v; want e2 and e3", len(page.Deliveries), err)
	}
	params.Paused = false
	if _, err := b.store.Subscriptions.Update(b.ctx, b.db, sub.ID, params); err != nil {
		t.Fatal(err)
	}
	publish("e2")
	publish("e3")
	keyHealthyAt(t, b, url)
	c := b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{name("e2")}) {
		t.Fatalf("claimed %v, want e2 alone", got)
	}
	if err := b.complete(c[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{name("e3")}) {
		t.Fatalf("claimed %v, want e3", got)
	}
}

// testOrderingKeyOfADisabledEndpointEndsAtItsDeadlines: the deliveries of
// a key to a disabled endpoint end at their deadlines: under OrderingSkipFailed
// each in turn, as it comes to head the key; under OrderingHoldKey the first ends
// and holds the key, listed by BlockedKeys.
func testOrderingKeyOfADisabledEndpointEndsAtItsDeadlines(t *testing.T, open OpenFunc) {
	for _, onFailure := range []store.OrderingOnFailure{store.OrderingSkipFailed, store.OrderingHoldKey} {
		b := setup(t, open, store.Config{OrderingOnFailure: onFailure})
		if err := b.store.Endpoints.Disable(b.ctx, opsEndpoint); err != nil {
			t.Fatal(err)
		}
		var id []int64
		for _, n := range []string{"k1", "k2", "k3"} {
			p := keyed(n, "k")
			p.Deadline = b.clock.Now().Add(time.Minute)
			id = append(id, b.enqueue(t, p).ID)
		}
		if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
			t.Fatalf("claimed %v of a disabled endpoint", got)
		}
		b.clock.Advance(2 * time.Minute)
		for range 6 {
			if got := ids(b.claim(t, "w", 10, time.Minute)); len(got) != 0 {
				t.Fatalf("claimed %v of a disabled endpoint", got)
			}
			keyHealthy(t, b)
			b.clock.Advance(time.Minute)
		}
		want := []courier.Status{courier.StatusFailed, courier.StatusFailed, courier.StatusFailed}
		if onFailure == store.OrderingHoldKey {
			want = []courier.Status{courier.StatusFailed, courier.StatusPending, courier.StatusPending}
		}
		for i, w := range want {
			if d := b.get(t, id[i]); d.Status != w {
				t.Errorf("%v: k%d is %s (%s), want %s", onFailure, i+1, d.Status, d.LastErrorCode, w)
			}
		}
	}
}

// testOrderingKeysUnderOperatorsAtRandom runs a seeded random mix of
// enqueues, claims, outcomes, an operator's Cancel, Redrive, Disable,
// Enable and Prune, and time passing, checking the keys after each step
// (keyHealthy); then, with the endpoint enabled, it sends what can be
// sent: every key is then done, or held by a failed head BlockedKeys
// lists.
func testOrderingKeysUnderOperatorsAtRandom(t *testing.T, open OpenFunc) {
	for _, onFailure := range []store.OrderingOnFailure{store.OrderingHoldKey, store.OrderingSkipFailed} {
		for seed := range int64(1) {
			b := setup(t, open, store.Config{OrderingOnFailure: onFailure, MaxAttempts: 3})
			rnd := rand.New(rand.NewPCG(uint64(seed), uint64(onFailure)))
			var all []int64
			params := subscription("t", opsEndpoint, "k", "*")
			sub, err := b.store.Subscriptions.Create(b.ctx, b.db, params)
			if err != nil {
				t.Fatal(err)
			}
			events := map[string]string{} // event id: its key
			publish := func(id string) {
				t.Helper()
				out, err := inCommitted(t, b, func(tx *sqlx.Tx) ([]store.Published, error) {
					return b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{
						Tenant: "t", EventType: "order.updated", EventID: id, Payload: []byte(`{"id":"` + id + `"}`), OrderingKey: events[id],
					})
				})
				if err != nil {
					t.Fatalf("Publish(%s): %v", id, err)
				}
				for _, p := range out {
					if !p.Existed {
						all = append(all, p.ID)
					}
				}
			}
			var leases []protocol.Claimed
			redriven := map[int64]bool{} // failed when a Redrive ran: may go after a later delivery of its key
			n := 0
			for step := range 150 {
				switch op := rnd.IntN(17); {
				case op < 3:
					n++
					p := keyed(fmt.Sprintf("d%d", n), fmt.Sprintf("k%d", rnd.IntN(3)))
					if rnd.IntN(4) == 0 {
						p.Deadline = b.clock.Now().Add(time.Duration(1+rnd.IntN(5)) * time.Minute)
					}
					all = append(all, b.enqueue(t, p).ID)
				case op < 5:
					c := b.claim(t, "w", 1+rnd.IntN(3), time.Duration(1+rnd.IntN(3))*time.Minute)
					inOrder(t, b, c, redriven)
					leases = append(leases, c...)
				case op < 8 && len(leases) > 0:
					i := rnd.IntN(len(leases))
					l := leases[i].Lease
					leases = slices.Delete(leases, i, i+1)
					var err error
					switch rnd.IntN(4) {
					case 3:
						_, err = b.proto().Release(b.ctx, l)
					case 0:
						err = b.complete(l, "")
					case 1:
						err = b.fail(l, courier.CodeReceiverRejected, 400)
					default:
						err = b.retry(l, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Duration(1+rnd.IntN(60)) * time.Second})
					}
					if err != nil && courier.CodeOf(err) != courier.CodeLeaseLost {
						t.Fatalf("step %d: settle: %v", step, err)
					}
				case op == 8 && len(all) > 0:
					err := b.store.Outbox.Cancel(b.ctx, all[rnd.IntN(len(all))])
					if err != nil && courier.CodeOf(err) != courier.CodeNotFound {
						t.Fatalf("step %d: Cancel: %v", step, err)
					}
				case op == 9 && len(all) > 0:
					p := store.RedriveParams{Endpoint: opsEndpoint}
					if rnd.IntN(2) == 0 {
						p = store.RedriveParams{ID: all[rnd.IntN(len(all))]}
					}
					failed, err := b.store.Outbox.List(b.ctx, store.ListParams{Status: courier.StatusFailed, Limit: 1000})
					if err != nil {
						t.Fatal(err)
					}
					for _, d := range failed.Deliveries {
						redriven[d.ID] = true
					}
					if _, err := b.store.Outbox.Redrive(b.ctx, p); err != nil {
						t.Fatalf("step %d: Redrive: %v", step, err)
					}
				case op == 10:
					var err error
					switch rnd.IntN(3) {
					case 0:
						err = b.store.Endpoints.Disable(b.ctx, opsEndpoint)
					case 1:
						err = b.store.Endpoints.Enable(b.ctx, opsEndpoint)
					default:
						err = b.store.Endpoints.SetLimits(b.ctx, opsEndpoint, store.Limits{MaxInFlight: rnd.IntN(3)})
					}
					if err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				case op == 12:
					id := fmt.Sprintf("e%d", len(events))
					if len(events) > 0 && rnd.IntN(2) == 0 {
						id = fmt.Sprintf("e%d", rnd.IntN(len(events)))
						// Published again, a suppressed one is sent after what went meanwhile.
						gone, err := b.store.Outbox.List(b.ctx, store.ListParams{Status: courier.StatusSuppressed, Limit: 1000})
						if err != nil {
							t.Fatal(err)
						}
						for _, d := range gone.Deliveries {
							redriven[d.ID] = true
						}
					} else {
						events[id] = fmt.Sprintf("k%d", rnd.IntN(3))
					}
					publish(id)
				case op == 13:
					switch rnd.IntN(3) {
					case 0:
						params.Paused = !params.Paused
					case 1:
						params.KeyID = fmt.Sprintf("k%d", rnd.IntN(2))
					}
					if _, err := b.store.Subscriptions.Update(b.ctx, b.db, sub.ID, params); err != nil {
						t.Fatalf("step %d: Update: %v", step, err)
					}
				case op == 11:
					if _, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Minute}); err != nil {
						t.Fatalf("step %d: Prune: %v", step, err)
					}
				default:
					b.clock.Advance(time.Duration(rnd.IntN(90)) * time.Second)
				}
				keyHealthy(t, b)
				if t.Failed() {
					t.Fatalf("%v seed %d: step %d", onFailure, seed, step)
				}
			}
			if err := b.store.Endpoints.Enable(b.ctx, opsEndpoint); err != nil {
				t.Fatal(err)
			}
			for range 30 {
				b.clock.Advance(time.Minute)
				c := b.claim(t, "w", 10, time.Minute)
				inOrder(t, b, c, redriven)
				for _, d := range c {
					if err := b.complete(d.Lease, ""); err != nil {
						t.Fatal(err)
					}
				}
				keyHealthy(t, b)
			}
			blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range all {
				d, err := b.store.Outbox.Get(b.ctx, id)
				if courier.CodeOf(err) == courier.CodeNotFound {
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if (d.Status == courier.StatusPending || d.Status == courier.StatusRetryWait) &&
					!slices.ContainsFunc(blocked, func(k store.BlockedKey) bool { return k.OrderingKey == d.OrderingKey }) {
					t.Errorf("%v seed %d: %s is %s (held %q) at the end, its key not blocked (%+v)", onFailure, seed, d.NotificationID, d.Status, d.Held, blocked)
				}
			}
		}
	}
}

// inOrder checks that each delivery just claimed has no unfinished
// delivery of its key enqueued before it, but for those a Redrive may
// have sent again (redriven).
func inOrder(t *testing.T, b *bundle, claimed []protocol.Claimed, redriven map[int64]bool) {
	t.Helper()
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{Endpoint: opsEndpoint, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		d := b.get(t, c.DeliveryID)
		for _, e := range page.Deliveries {
			if e.OrderingKey == d.OrderingKey && e.ID < d.ID && !redriven[e.ID] &&
				(e.Status == courier.StatusPending || e.Status == courier.StatusRetryWait || e.Status == courier.StatusLeased) {
				t.Errorf("%s (key %s) claimed while %s, enqueued before it, is %s", d.NotificationID, d.OrderingKey, e.NotificationID, e.Status)
			}
		}
	}
}

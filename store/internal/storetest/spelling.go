package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// One receiver's URL spelled three ways: its host in another case, its
// scheme's default port written out, and its normalized form.
const (
	spelledUpper   = "HTTPS://Example.COM/hook?Token=AbC"
	spelledPort    = "https://example.com:443/hook?Token=AbC"
	spelledNormal  = "https://example.com/hook?Token=AbC"
	spelledOtherQ  = "https://example.com/hook?token=AbC" // another query: another endpoint
	spelledAltPath = "https://example.com/Hook?Token=AbC" // another path: another endpoint
)

// testOneEndpointUnderEverySpelling: an endpoint is its URL with scheme
// and host in lower case and without the scheme's default port; every
// method names it by any spelling of those, and path and query keep their
// bytes. A delivery enqueued under one spelling is the one enqueued under
// another, and an operator's limits or Disable given under a third hold it
// back.
func testOneEndpointUnderEverySpelling(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	first := b.enqueue(t, at(spelledUpper, "n-1"))
	again := b.enqueue(t, at(spelledPort, "n-1"))
	if again.ID != first.ID || !again.Existed {
		t.Fatalf("n-1 enqueued under %q then %q: %+v then %+v, want the one delivery", spelledUpper, spelledPort, first, again)
	}
	if d := b.get(t, first.ID); d.Endpoint != spelledNormal {
		t.Fatalf("stored endpoint = %q, want %q", d.Endpoint, spelledNormal)
	}
	for _, spelled := range []string{spelledUpper, spelledPort, spelledNormal} {
		if d, err := b.store.Outbox.Lookup(b.ctx, "n-1", spelled); err != nil || d.ID != first.ID {
			t.Fatalf("Lookup(n-1, %q) = %d, %v; want %d", spelled, d.ID, err, first.ID)
		}
	}
	// Path and query are the endpoint's own bytes.
	for _, other := range []string{spelledOtherQ, spelledAltPath} {
		if e := b.enqueue(t, at(other, "n-1")); e.Existed || b.get(t, e.ID).Endpoint != other {
			t.Fatalf("n-1 under %q: %+v stored as %q, want a delivery of its own under that URL", other, e, b.get(t, e.ID).Endpoint)
		}
	}

	// A subscription's and a contract pin's endpoint too.
	sub, err := inCommitted(t, b, func(tx *sqlx.Tx) (store.Subscription, error) {
		return b.store.Subscriptions.Create(b.ctx, tx, subscription("acme", spelledUpper, "key-a", "*"))
	})
	if err != nil || sub.Endpoint != spelledNormal {
		t.Fatalf("Create(%q) = %+v, %v; want its endpoint %q", spelledUpper, sub, err, spelledNormal)
	}
	published, err := inCommitted(t, b, func(tx *sqlx.Tx) ([]store.Published, error) {
		return b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "e", EventID: "evt-1", Payload: []byte(`{}`)})
	})
	if err != nil || len(published) != 1 {
		t.Fatalf("Publish = %+v, %v", published, err)
	}
	if d, err := b.store.Outbox.Lookup(b.ctx, published[0].NotificationID, spelledPort); err != nil || d.Endpoint != spelledNormal {
		t.Fatalf("published delivery: %+v, %v; want it under %q", d, err, spelledNormal)
	}
	digest := strings.Repeat("ab", 32)
	if err := b.store.Contracts.Pin(b.ctx, spelledPort, digest); err != nil {
		t.Fatal(err)
	}
	if c, err := b.store.Contracts.Get(b.ctx, spelledUpper); err != nil || c.Endpoint != spelledNormal || c.CapabilitiesSHA256 != digest {
		t.Fatalf("Contracts.Get(%q) = %+v, %v; want the pin made under %q", spelledUpper, c, err, spelledPort)
	}

	if err := b.store.Endpoints.SetLimits(b.ctx, spelledPort, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	if h, err := b.store.Endpoints.Get(b.ctx, spelledUpper); err != nil || h.Endpoint != spelledNormal || h.Limits.MaxInFlight != 1 {
		t.Fatalf("Get(%q) = %+v, %v; want the limits set under %q", spelledUpper, h, err, spelledPort)
	}
	b.enqueue(t, at(spelledUpper, "n-2"))
	if c := b.claim(t, "w", 10, time.Minute); len(byEndpoint(c)) != 3 || byEndpoint(c)[spelledNormal] != 1 {
		t.Fatalf("claimed %v by endpoint, want one of %q (MaxInFlight 1) and one of each other", byEndpoint(c), spelledNormal)
	}

	if err := b.store.Endpoints.Disable(b.ctx, spelledUpper); err != nil {
		t.Fatal(err)
	}
	if h, err := b.store.Endpoints.Get(b.ctx, spelledPort); err != nil || h.State != store.EndpointDisabled {
		t.Fatalf("Get(%q) after Disable(%q) = %+v, %v; want disabled", spelledPort, spelledUpper, h, err)
	}
	list, err := b.store.Endpoints.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, h := range list {
		names = append(names, h.Endpoint)
	}
	if len(names) != 3 || names[0] != spelledAltPath || names[1] != spelledNormal || names[2] != spelledOtherQ {
		t.Fatalf("List names %q, want each endpoint once, by its normalized URL", names)
	}
	b.clock.Advance(2 * time.Minute) // every lease expires
	b.enqueue(t, at(spelledPort, "n-3"))
	if c := b.claim(t, "w", 10, time.Minute); byEndpoint(c)[spelledNormal] != 0 {
		t.Fatalf("claimed %v by endpoint with %q disabled", byEndpoint(c), spelledNormal)
	}
	if err := b.store.Endpoints.Enable(b.ctx, spelledNormal); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); byEndpoint(c)[spelledNormal] != 1 {
		t.Fatalf("claimed %v by endpoint once enabled, want one of %q (MaxInFlight 1)", byEndpoint(c), spelledNormal)
	}
}

// testAnEndpointStoredUnderAnotherSpellingIsStillNamedByIt: a database
// written before endpoints were normalized may hold deliveries under a
// spelling that is not normalized. Named by it, they are still found, held
// back by Disable, released by Enable and limited by SetLimits; naming
// the endpoint so creates nothing under that spelling where nothing was.
func testAnEndpointStoredUnderAnotherSpellingIsStillNamedByIt(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, at(spelledNormal, "old"))
	// As an older courier stored it: under the spelling it was given.
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET endpoint = ? WHERE id = ?"), spelledUpper, e.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := b.store.Outbox.Lookup(b.ctx, "old", spelledUpper); err != nil || d.ID != e.ID {
		t.Fatalf("Lookup(old, %q) = %d, %v; want %d", spelledUpper, d.ID, err, e.ID)
	}
	if err := b.store.Endpoints.Disable(b.ctx, spelledUpper); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v with %q disabled", ids(c), spelledUpper)
	}
	if err := b.store.Endpoints.SetLimits(b.ctx, spelledUpper, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.Enable(b.ctx, spelledUpper); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 1 || c[0].NotificationID != "old" {
		t.Fatalf("claimed %v once enabled, want old", ids(c))
	}
	if h, err := b.store.Endpoints.Get(b.ctx, spelledUpper); err != nil || h.Endpoint != spelledUpper || h.InFlight != 1 || h.Limits.MaxInFlight != 1 {
		t.Fatalf("Get(%q) = %+v, %v; want what is stored under it: its limits, its delivery in flight", spelledUpper, h, err)
	}
	if h, err := b.store.Endpoints.Get(b.ctx, spelledNormal); err != nil || h.Limits.MaxInFlight != 1 {
		t.Fatalf("Get(%q) = %+v, %v; want the limits", spelledNormal, h, err)
	}
	list, err := b.store.Endpoints.List(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Endpoint != spelledUpper || list[0].Limits.MaxInFlight != 1 || list[0].InFlight != 1 || list[1].Endpoint != spelledNormal {
		t.Fatalf("List = %+v, want %q (limited, its delivery in flight) and %q", list, spelledUpper, spelledNormal)
	}

	// A spelling with nothing stored under it is only its normalized form.
	if err := b.store.Endpoints.Disable(b.ctx, spelledPort); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.Disable(b.ctx, "https://Fresh.example:443/x"); err != nil {
		t.Fatal(err)
	}
	if list, err = b.store.Endpoints.List(b.ctx); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range list {
		names = append(names, h.Endpoint)
	}
	if len(names) != 3 || names[0] != spelledUpper || names[1] != spelledNormal || names[2] != "https://fresh.example/x" {
		t.Fatalf("List names %q, want %q, %q and https://fresh.example/x", names, spelledUpper, spelledNormal)
	}
}

// testAKeyStoredUnderAnotherSpellingKeepsItsOrder: a database written
// before endpoints were normalized holds a keyed delivery, and its key,
// under a spelling other than the normalized form. A delivery the
// application enqueues under that spelling, as it did before, is stored
// under it too: it waits for its key behind the one before it, and
// enqueued again it is found, not written twice. Once nothing is stored
// under the spelling, it is normalized.
func testAKeyStoredUnderAnotherSpellingKeepsItsOrder(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := at(spelledNormal, "old")
	p.OrderingKey = "K"
	old := b.enqueue(t, p)
	for _, q := range []string{"UPDATE courier_outbox SET endpoint = ? WHERE id = ?", "UPDATE courier_ordering_keys SET endpoint = ? WHERE head_id = ?"} {
		if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(q), spelledUpper, old.ID); err != nil {
			t.Fatal(err)
		}
	}
	n := at(spelledUpper, "new")
	n.OrderingKey = "K"
	next := b.enqueue(t, n)
	p.Endpoint = spelledUpper
	if again := b.enqueue(t, p); again.ID != old.ID || !again.Existed {
		t.Fatalf("old enqueued again under %q: %+v, want delivery %d found", spelledUpper, again, old.ID)
	}
	c := b.claim(t, "w", 10, time.Minute)
	if len(c) != 1 || c[0].DeliveryID != old.ID {
		t.Fatalf("claimed %v, want only delivery %d: %d waits behind it for key K", c, old.ID, next.ID)
	}
	if err := b.complete(c[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 1 || c[0].DeliveryID != next.ID {
		t.Fatalf("claimed %v after the first was sent, want delivery %d", c, next.ID)
	} else if err := b.complete(c[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	// Nothing of the key, nor of this notification, is left under the
	// old spelling: a new delivery is normalized.
	if e := b.enqueue(t, at(spelledUpper, "later")); b.get(t, e.ID).Endpoint != spelledNormal {
		t.Fatalf("later stored under %q, want %q", b.get(t, e.ID).Endpoint, spelledNormal)
	}
}

// testARedriveOfAnEndpointTakesItsStoredSpelling: a database written
// before endpoints were normalized holds failed deliveries under a
// spelling that is not normalized, which operators' tools name it by (its
// ref is that spelling's). Redrive given that spelling moves them, with
// those under the normalized form, and counts each once; given the
// normalized form it moves only those stored under it. It moved none of
// the first: it looked under the normalized form alone, and reported 0.
func testARedriveOfAnEndpointTakesItsStoredSpelling(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	old := b.enqueue(t, at(spelledNormal, "old"))
	fresh := b.enqueue(t, at(spelledNormal, "fresh"))
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(`UPDATE courier_outbox SET status = 'failed', last_error_code = 'receiver_unavailable', attempts = 1`)); err != nil {
		t.Fatal(err)
	}
	// As an older courier stored it: under the spelling it was given.
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET endpoint = ? WHERE id = ?"), spelledUpper, old.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: spelledNormal}); err != nil || n != 1 {
		t.Fatalf("Redrive(%q) = %d, %v; want 1: the delivery stored under it", spelledNormal, n, err)
	}
	if d := b.get(t, old.ID); d.Status != courier.StatusFailed {
		t.Fatalf("the delivery under %q is %s after a Redrive of %q, want failed", spelledUpper, d.Status, spelledNormal)
	}
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(`UPDATE courier_outbox SET status = 'failed', last_error_code = 'receiver_unavailable' WHERE id = ?`), fresh.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: spelledUpper}); err != nil || n != 2 {
		t.Fatalf("Redrive(%q) = %d, %v; want 2: the delivery stored under it and the one under %q", spelledUpper, n, err, spelledNormal)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: old.ID, Endpoint: spelledUpper}); err != nil || n != 0 {
		t.Fatalf("Redrive of %d again = %d, %v; want 0", old.ID, n, err)
	}
	if got := slices.Sorted(slices.Values(ids(b.claim(t, "w", 10, time.Minute)))); !slices.Equal(got, []string{"fresh", "old"}) {
		t.Fatalf("claimed %v, want old and fresh", got)
	}
}

// testListAndBlockedKeysTakeAStoredSpelling: Outbox.List and
// Endpoints.BlockedKeys given an endpoint's spelling show what is stored
// under it, beside what is under its normalized form, as operators' tools
// name an endpoint by what is stored. Before, both looked under the
// normalized form alone: the admin page's link to an endpoint stored
// under an older spelling listed nothing.
func testListAndBlockedKeysTakeAStoredSpelling(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	oldParams := at(spelledNormal, "old")
	oldParams.OrderingKey = "k"
	old := b.enqueue(t, oldParams)
	b.enqueue(t, at(spelledNormal, "fresh"))
	// As an older courier stored them: under the spelling it was given,
	// the key's head failed and holding it.
	for _, q := range []string{
		"UPDATE courier_outbox SET endpoint = ?, status = 'failed', last_error_code = 'receiver_rejected' WHERE id = ?",
		"UPDATE courier_ordering_keys SET endpoint = ?, blocked_at = 1 WHERE head_id = ?",
	} {
		if _, err := b.db.ExecContext(b.ctx, b.db.Rebind(q), spelledUpper, old.ID); err != nil {
			t.Fatal(err)
		}
	}
	listed := func(p store.ListParams) []string {
		t.Helper()
		page, err := b.store.Outbox.List(b.ctx, p)
		if err != nil {
			t.Fatalf("List(%+v): %v", p, err)
		}
		var got []string
		for _, d := range page.Deliveries {
			got = append(got, d.NotificationID)
		}
		slices.Sort(got)
		return got
	}
	if got := listed(store.ListParams{Endpoint: spelledUpper}); !slices.Equal(got, []string{"fresh", "old"}) {
		t.Errorf("List of %q = %v, want old (stored under it) and fresh", spelledUpper, got)
	}
	if got := listed(store.ListParams{Endpoint: spelledNormal}); !slices.Equal(got, []string{"fresh"}) {
		t.Errorf("List of %q = %v, want fresh alone", spelledNormal, got)
	}
	if got := listed(store.ListParams{Endpoint: spelledUpper, NotificationID: "old"}); !slices.Equal(got, []string{"old"}) {
		t.Errorf("List of old under %q = %v, want old", spelledUpper, got)
	}
	keys, err := b.store.Endpoints.BlockedKeys(b.ctx, spelledUpper, 10)
	if err != nil || len(keys) != 1 || keys[0].Head != old.ID || keys[0].Endpoint != spelledUpper {
		t.Errorf("BlockedKeys(%q) = %+v, %v; want the key old heads, under its spelling", spelledUpper, keys, err)
	}
	if keys, err := b.store.Endpoints.BlockedKeys(b.ctx, spelledNormal, 10); err != nil || len(keys) != 0 {
		t.Errorf("BlockedKeys(%q) = %+v, %v; want none", spelledNormal, keys, err)
	}
}

// testListPagesAnEndpointsSpellingsInIDOrder: a listing of an endpoint
// reads each form it may be stored under (its normalized form, and the
// spelling it was named by) in id order and merges the two: its pages,
// newest first, show every delivery of either once, in id order, across
// page boundaries that fall between the two, with no other endpoint's,
// by itself and with a finished status (which reads the endpoint's
// index too) or another (which reads the status's).
func testListPagesAnEndpointsSpellingsInIDOrder(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var all []string // newest first
	for i := range 9 {
		id := fmt.Sprintf("d%d", i)
		e := b.enqueue(t, at(spelledNormal, id))
		b.enqueue(t, at(spelledOtherQ, "other-"+id))
		if i%3 != 0 { // as an older courier stored it: under the spelling it was given
			if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET endpoint = ? WHERE id = ?"), spelledUpper, e.ID); err != nil {
				t.Fatal(err)
			}
		}
		if i%4 == 1 {
			if err := b.store.Outbox.Cancel(b.ctx, e.ID); err != nil {
				t.Fatal(err)
			}
		}
		all = append([]string{id}, all...)
	}
	pages := func(p store.ListParams) []string {
		t.Helper()
		var got []string
		var last int64
		for {
			page, err := b.store.Outbox.List(b.ctx, p)
			if err != nil {
				t.Fatalf("List(%+v): %v", p, err)
			}
			for _, d := range page.Deliveries {
				if last != 0 && d.ID >= last {
					t.Fatalf("List(%+v): delivery %d after %d, not newest first", p, d.ID, last)
				}
				last = d.ID
				got = append(got, d.NotificationID)
			}
			if page.NextBefore == 0 {
				return got
			}
			p.Before = page.NextBefore
		}
	}
	for _, tt := range []struct {
		p    store.ListParams
		want []string
	}{
		{store.ListParams{Endpoint: spelledUpper, Limit: 2}, all},
		{store.ListParams{Endpoint: spelledUpper, Limit: 1000}, all},
		{store.ListParams{Endpoint: spelledNormal, Limit: 2}, []string{"d6", "d3", "d0"}},
		{store.ListParams{Endpoint: spelledUpper, Status: courier.StatusSuppressed, Limit: 1}, []string{"d5", "d1"}},
		{store.ListParams{Endpoint: spelledUpper, Status: courier.StatusPending, Limit: 2}, []string{"d8", "d7", "d6", "d4", "d3", "d2", "d0"}},
		{store.ListParams{Endpoint: spelledUpper, Status: courier.StatusSucceeded}, nil},
	} {
		if got := pages(tt.p); !slices.Equal(got, tt.want) {
			t.Errorf("pages of List(%+v) = %v, want %v", tt.p, got, tt.want)
		}
	}
	if got := pages(store.ListParams{Endpoint: spelledUpper, Since: time.Now().Add(time.Hour)}); len(got) != 0 {
		t.Errorf("pages of List of %q since an hour ahead = %v, want none", spelledUpper, got)
	}
}

// testUpdateKeepsALegacySpellingsFingerprint: a database written before
// endpoints were normalized holds a subscription under the spelling it was
// given, fingerprinted with it. An Update that names its endpoint as Get
// returns it, changing something no delivery depends on (its event
// types), changed its fingerprint, normalizing the spelling: its
// deliveries were suppressed as if its endpoint had changed. It keeps the
// spelling and the fingerprint, and the delivery is sent.
func testUpdateKeepsALegacySpellingsFingerprint(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	subs := b.store.Subscriptions
	s, err := subs.Create(b.ctx, nil, subscription("acme", spelledNormal, "key-a", "order.paid"))
	if err != nil {
		t.Fatal(err)
	}
	// As an older courier stored it: under the spelling it was given.
	legacy := legacyFingerprint(spelledUpper, "", s.KeyID, s.Profile)
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_subscriptions SET endpoint = ?, fingerprint = ? WHERE id = ?"),
		spelledUpper, legacy, s.ID); err != nil {
		t.Fatal(err)
	}
	published, err := publishCommitted(b, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{}`)})
	if err != nil || len(published) != 1 {
		t.Fatalf("Publish = %+v, %v", published, err)
	}
	if s, err = subs.Get(b.ctx, nil, s.ID); err != nil {
		t.Fatal(err)
	}
	p := s.SubscriptionParams
	p.EventTypes = append(p.EventTypes, "order.refunded")
	got, err := subs.Update(b.ctx, nil, s.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 1 || c[0].DeliveryID != published[0].ID {
		t.Fatalf("claimed %v, want delivery %d sent, not suppressed", ids(c), published[0].ID)
	}
	if f := b.fingerprint(t, got.ID); f != legacy || got.Endpoint != spelledUpper {
		t.Fatalf("an Update of its event types moved the subscription to %q, fingerprint %s; want %q, %s kept", got.Endpoint, f, spelledUpper, legacy)
	}
	// A real change of its endpoint still changes the fingerprint.
	p.Endpoint = spelledOtherQ
	if got, err = subs.Update(b.ctx, nil, s.ID, p); err != nil || got.Endpoint != spelledOtherQ || b.fingerprint(t, s.ID) == legacy {
		t.Fatalf("Update to %q = %+v, %v; want the new endpoint and another fingerprint", spelledOtherQ, got, err)
	}
}

package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// onPort is a receiver's URL on port, a credential in its query: what a
// refusal of it says must show neither.
func onPort(port string) string { return "https://receiver.example:" + port + "/hooks?token=s3cret" }

// refusedBy returns a check that fails t unless err is the refusal of an
// endpoint by the rule whose text holds rule: invalid_argument, naming the
// rule, not the URL.
func refusedBy(rule string) func(t *testing.T, what string, err error) {
	return func(t *testing.T, what string, err error) {
		t.Helper()
		switch {
		case courier.CodeOf(err) != courier.CodeInvalidArgument:
			t.Errorf("%s = %v; want invalid_argument", what, err)
		case !strings.Contains(err.Error(), rule):
			t.Errorf("%s = %v; want the rule named (%q)", what, err, rule)
		case strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "receiver.example"):
			t.Errorf("%s = %v; it shows the URL", what, err)
		}
	}
}

var (
	// wantPortRefused: an endpoint on a port no dial reaches.
	wantPortRefused = refusedBy("1 to 65535")
	// wantHostRefused: an endpoint whose host is not spelled as it is
	// dialed.
	wantHostRefused = refusedBy("without a trailing dot")
)

// testANewEndpointOnAPortNoDialReachesIsRefused: an endpoint on port 0, or
// on one above 65535, was taken by Enqueue, EnqueueMany, EnqueueCommand and
// a subscription, and every attempt to it then failed with network_error
// until its budget ran out: a typo found only by the failure. Where an
// endpoint enters the store it is refused, invalid_argument, and nothing
// is written; a port with a leading zero (:0443, which dials 443) is
// taken as before.
func testANewEndpointOnAPortNoDialReachesIsRefused(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	subs := b.store.Subscriptions
	const kept = "https://a.example/h"
	moved, err := subs.Create(b.ctx, nil, subscription("acme", kept, "key-a", "*"))
	if err != nil {
		t.Fatal(err)
	}
	fingerprint := b.fingerprint(t, moved.ID)
	// Each on the database: what a call took, it committed.
	for _, url := range []string{onPort("0"), onPort("00"), onPort("65536"), onPort("99999"), "https://[2001:db8::1]:0/hooks?token=s3cret"} {
		_, err := b.store.Outbox.Enqueue(b.ctx, b.db, at(url, "n-1"))
		wantPortRefused(t, "Enqueue to "+url, err)
		_, err = b.store.Outbox.EnqueueMany(b.ctx, b.db, []store.EnqueueParams{delivery("m-1"), at(url, "m-2")})
		wantPortRefused(t, "EnqueueMany to "+url, err)
		_, err = b.store.Outbox.EnqueueCommand(b.ctx, b.db, store.CommandParams{Endpoint: url, Payload: command(t, "change", "r-1", digestA, 5, `{}`)})
		wantPortRefused(t, "EnqueueCommand to "+url, err)
		_, err = subs.Create(b.ctx, b.db, subscription("acme", url, "key-a", "*"))
		wantPortRefused(t, "Subscriptions.Create at "+url, err)
		_, err = subs.Update(b.ctx, b.db, moved.ID, subscription("acme", url, "key-a", "*"))
		wantPortRefused(t, "Subscriptions.Update to "+url, err)
	}
	h := health(t, b)
	for st, n := range h.Counts {
		if n != 0 {
			t.Errorf("refused enqueues wrote %d %s deliveries", n, st)
		}
	}
	if pins, err := b.store.Contracts.List(b.ctx); err != nil || len(pins) != 0 {
		t.Errorf("refused commands pinned %+v, %v", pins, err)
	}
	if list, err := subs.List(b.ctx, "acme"); err != nil || len(list) != 1 || list[0].Endpoint != kept || b.fingerprint(t, moved.ID) != fingerprint {
		t.Fatalf("List(acme) = %+v, %v; want the one subscription, still at %s", list, err, kept)
	}

	// A leading zero names the port it spells: taken, and kept as given.
	leading := onPort("0443")
	for what, err := range map[string]error{
		"Enqueue":        errOf(b.store.Outbox.Enqueue(b.ctx, b.db, at(leading, "z-1"))),
		"EnqueueMany":    errOf(b.store.Outbox.EnqueueMany(b.ctx, b.db, []store.EnqueueParams{at(leading, "z-2")})),
		"EnqueueCommand": errOf(b.store.Outbox.EnqueueCommand(b.ctx, b.db, store.CommandParams{Endpoint: leading, Payload: command(t, "change", "r-1", digestA, 5, `{}`)})),
		"Create":         errOf(subs.Create(b.ctx, b.db, subscription("acme", leading, "key-a", "*"))),
	} {
		if err != nil {
			t.Errorf("%s to %s = %v, want it taken", what, leading, err)
		}
	}
	if got, err := subs.Update(b.ctx, b.db, moved.ID, subscription("acme", leading, "key-a", "*")); err != nil || got.Endpoint != leading {
		t.Errorf("Update to %s = %+v, %v; want it moved there", leading, got, err)
	}
	for _, id := range []string{"z-1", "z-2"} {
		if d, err := b.store.Outbox.Lookup(b.ctx, id, leading); err != nil || d.Endpoint != leading {
			t.Errorf("Lookup(%s, %s) = %+v, %v; want it stored under the URL given", id, leading, d, err)
		}
	}
}

// errOf keeps the error of a call's two results.
func errOf[T any](_ T, err error) error { return err }

// testAnEndpointStoredOnPortZeroIsStillNamedByIt: a database written
// before new endpoints were asked for a port a dial can reach may hold a
// delivery, and a subscription, on port 0 (storedBeforeItsRule).
func testAnEndpointStoredOnPortZeroIsStillNamedByIt(t *testing.T, open OpenFunc) {
	storedBeforeItsRule(t, open, onPort("0"), "HTTPS://Receiver.Example:0/hooks?token=s3cret", onPort("65536"), wantPortRefused)
}

// testAnEndpointStoredWithARootedHostIsStillNamedByIt: a database written
// before new endpoints were asked for their host as it is dialed may hold
// a delivery, and a subscription, at a host with the root's trailing dot
// (storedBeforeItsRule).
func testAnEndpointStoredWithARootedHostIsStillNamedByIt(t *testing.T, open OpenFunc) {
	storedBeforeItsRule(t, open, "https://receiver.example./hooks?token=s3cret", "HTTPS://Receiver.Example.:443/hooks?token=s3cret",
		"https://receiver.example../hooks?token=s3cret", wantHostRefused)
}

// storedBeforeItsRule: the rule old breaks (refusedAs says how it is
// refused) is asked where an endpoint enters, not where one is named: a
// delivery stored at old is still looked up, disabled, limited and
// enabled by its URL; an Update of a subscription stored at old that
// leaves its endpoint where it is (named old, or spelling, another
// spelling of it) keeps it there, with its fingerprint; and a publish of
// its tenant still delivers to every other subscription. An Update that
// moves it moves it only to an endpoint the rule takes: not to moved.
func storedBeforeItsRule(t *testing.T, open OpenFunc, old, spelling, moved string, refusedAs func(*testing.T, string, error)) {
	b := setup(t, open, store.Config{})
	e := b.enqueue(t, at(onPort("8443"), "old"))
	// As a courier without the rule stored it.
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_outbox SET endpoint = ? WHERE id = ?"), old, e.ID); err != nil {
		t.Fatal(err)
	}
	if d, err := b.store.Outbox.Lookup(b.ctx, "old", old); err != nil || d.ID != e.ID {
		t.Fatalf("Lookup(old, %s) = %+v, %v; want delivery %d", old, d, err, e.ID)
	}
	if err := b.store.Endpoints.Disable(b.ctx, old); err != nil {
		t.Fatalf("Disable(%s) = %v", old, err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v with %s disabled", ids(c), old)
	}
	if err := b.store.Endpoints.SetLimits(b.ctx, old, store.Limits{MaxInFlight: 1}); err != nil {
		t.Fatalf("SetLimits(%s) = %v", old, err)
	}
	if err := b.store.Endpoints.Enable(b.ctx, old); err != nil {
		t.Fatalf("Enable(%s) = %v", old, err)
	}
	if h, err := b.store.Endpoints.Get(b.ctx, old); err != nil || h.Endpoint != old || h.Limits.MaxInFlight != 1 {
		t.Fatalf("Get(%s) = %+v, %v; want its limits", old, h, err)
	}

	subs := b.store.Subscriptions
	stuck, err := subs.Create(b.ctx, nil, subscription("acme", onPort("8443"), "key-a", "order.paid"))
	if err != nil {
		t.Fatal(err)
	}
	fingerprint := legacyFingerprint(old, "", stuck.KeyID, stuck.Profile)
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_subscriptions SET endpoint = ?, fingerprint = ? WHERE id = ?"),
		old, fingerprint, stuck.ID); err != nil {
		t.Fatal(err)
	}
	other, err := subs.Create(b.ctx, nil, subscription("acme", "https://b.example/h", "key-a", "order.paid"))
	if err != nil {
		t.Fatal(err)
	}
	if stuck, err = subs.Get(b.ctx, nil, stuck.ID); err != nil {
		t.Fatal(err)
	}
	p := stuck.SubscriptionParams
	p.EventTypes = append(p.EventTypes, "order.refunded")
	if got, err := subs.Update(b.ctx, nil, stuck.ID, p); err != nil || got.Endpoint != old || b.fingerprint(t, stuck.ID) != fingerprint {
		t.Fatalf("Update of its event types = %+v, %v; want it kept at %s, fingerprint %s", got, err, old, fingerprint)
	}
	p.Endpoint = spelling // another spelling of it: no move
	if got, err := subs.Update(b.ctx, nil, stuck.ID, p); err != nil || got.Endpoint != old || b.fingerprint(t, stuck.ID) != fingerprint {
		t.Fatalf("Update naming it %s = %+v, %v; want it kept at %s, fingerprint %s", p.Endpoint, got, err, old, fingerprint)
	}
	published, err := publishCommitted(b, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatalf("Publish with a subscription stored at %s = %v", old, err)
	}
	to := map[int64]bool{}
	for _, pub := range published {
		to[pub.SubscriptionID] = true
	}
	if len(published) != 2 || !to[other.ID] || !to[stuck.ID] {
		t.Fatalf("Publish = %+v; want a delivery to subscription %d and one, as before, to %d", published, other.ID, stuck.ID)
	}

	p.Endpoint = moved
	_, err = subs.Update(b.ctx, nil, stuck.ID, p)
	refusedAs(t, "Update moving it to "+p.Endpoint, err)
	p.Endpoint = onPort("8443")
	if got, err := subs.Update(b.ctx, nil, stuck.ID, p); err != nil || got.Endpoint != p.Endpoint {
		t.Fatalf("Update moving it to %s = %+v, %v", p.Endpoint, got, err)
	}
}

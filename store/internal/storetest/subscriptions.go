package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

func subscription(tenant, endpoint, key string, types ...string) store.SubscriptionParams {
	return store.SubscriptionParams{Tenant: tenant, Endpoint: endpoint, EventTypes: types, KeyID: key}
}

func testPublish(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	subs := b.store.Subscriptions
	tx := b.begin(t)
	var matching []int64
	for _, p := range []store.SubscriptionParams{
		subscription("acme", "https://a.example/h", "key-a", "order.paid"),
		subscription("acme", "https://b.example/h", "key-b", "*"),
		subscription("acme", "https://c.example/h", "key-c", "order.created", "order.paid"),
		subscription("acme", "https://d.example/h", "key-d", "order.created"), // other type
		subscription("other", "https://e.example/h", "key-e", "*"),            // other tenant
	} {
		s, err := subs.Create(b.ctx, tx, p)
		if err != nil {
			t.Fatal(err)
		}
		if s.Tenant == "acme" && (slices.Contains(s.EventTypes, "order.paid") || slices.Contains(s.EventTypes, "*")) {
			matching = append(matching, s.ID)
		}
	}
	paused := subscription("acme", "https://f.example/h", "key-f", "*")
	paused.Paused = true
	if _, err := subs.Create(b.ctx, tx, paused); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	event := store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1",
		Build: func(s store.Subscription, key string) ([]byte, error) {
			return []byte(`{"idempotency_key":"` + key + `","to":"` + s.Endpoint + `"}`), nil
		}}

	// Rolled back: nothing.
	tx = b.begin(t)
	if got, err := b.store.Outbox.Publish(b.ctx, tx, event); err != nil || len(got) != 3 {
		t.Fatalf("Publish = %d, %v", len(got), err)
	}
	tx.Rollback()
	if h := health(t, b); h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("rolled-back publish left %d deliveries", h.Counts[courier.StatusPending])
	}

	tx = b.begin(t)
	published, err := b.store.Outbox.Publish(b.ctx, tx, event)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var got []int64
	keys := map[string]bool{}
	for _, p := range published {
		got = append(got, p.SubscriptionID)
		keys[p.IdempotencyKey] = true
	}
	if !slices.Equal(got, matching) || len(keys) != 3 {
		t.Fatalf("published to %v with %d keys, want %v with 3", got, len(keys), matching)
	}
	// Published again (a publisher's retry): each delivery's key is its
	// own, so Build makes the same bytes and the deliveries are found; a
	// fresh key would have made other bytes, an idempotency collision.
	tx = b.begin(t)
	republished, err := b.store.Outbox.Publish(b.ctx, tx, event)
	if err != nil {
		t.Fatalf("Publish again = %v, want each delivery found", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, p := range republished {
		if !p.Existed || p.ID != published[i].ID || p.IdempotencyKey != published[i].IdempotencyKey {
			t.Fatalf("published again: %+v, want delivery %d found with key %s", p, published[i].ID, published[i].IdempotencyKey)
		}
	}
	// Published again with another setting: a collision naming the field.
	priority, orderingKey := event, event
	priority.Priority = event.Priority + 1
	orderingKey.OrderingKey = "order-1"
	for field, q := range map[string]store.PublishParams{"Priority": priority, "OrderingKey": orderingKey} {
		tx := b.begin(t)
		_, err := b.store.Outbox.Publish(b.ctx, tx, q)
		tx.Rollback()
		if !errors.Is(err, courier.CodeIdempotencyCollision) || !strings.Contains(err.Error(), "another "+field) {
			t.Errorf("published again with another %s: %v, want CodeIdempotencyCollision naming %s", field, err, field)
		}
	}
	claimed := b.claim(t, "w", 10, time.Minute)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d", len(claimed))
	}
	for _, c := range claimed {
		s, err := subs.Get(b.ctx, b.db, c.SubscriptionID)
		if err != nil {
			t.Fatal(err)
		}
		if c.KeyID != s.KeyID || c.Endpoint != s.Endpoint || string(c.Payload) != `{"idempotency_key":"`+keyOf(published, s.ID)+`","to":"`+s.Endpoint+`"}` {
			t.Fatalf("delivery %+v does not carry its subscription's key and payload", c)
		}
		// A retry sends the very same bytes, key included.
		if err := b.retry(c.Lease, retryParams{Code: courier.CodeNetwork}); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(time.Hour)
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if c.Attempt != 2 || !slices.ContainsFunc(claimed, func(o protocol.Claimed) bool { return string(o.Payload) == string(c.Payload) }) {
			t.Fatalf("retry payload changed: %s", c.Payload)
		}
	}
}

func keyOf(ps []store.Published, sub int64) string {
	for _, p := range ps {
		if p.SubscriptionID == sub {
			return p.IdempotencyKey
		}
	}
	return ""
}

// testSuppression: a published delivery is sent only while its
// subscription is as it was: not paused, with the same fingerprint, and still
// wanting the event's type (the reporting reference's
// subscription_changed). Otherwise its claim suppresses it.
func testSuppression(t *testing.T, open OpenFunc) {
	settled := hearing(store.EventSettled)
	b := setup(t, open, store.Config{Hook: settled.hook})
	subs := b.store.Subscriptions
	tx := b.begin(t)
	var ids []int64
	for _, e := range []string{"https://a.example/h", "https://b.example/h", "https://c.example/h", "https://d.example/h", "https://e.example/h"} {
		s, err := subs.Create(b.ctx, tx, subscription("acme", e, "key-1", "*"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.ID)
	}
	if _, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "x", EventID: "evt", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	change := func(id int64, edit func(p *store.SubscriptionParams)) {
		t.Helper()
		s, err := subs.Get(b.ctx, b.db, id)
		if err != nil {
			t.Fatal(err)
		}
		p := s.SubscriptionParams
		edit(&p)
		if _, err := subs.Update(b.ctx, b.db, id, p); err != nil {
			t.Fatal(err)
		}
	}
	change(ids[0], func(p *store.SubscriptionParams) { p.KeyID = "key-2" })                   // key rotated
	change(ids[1], func(p *store.SubscriptionParams) { p.Endpoint = "https://b2.example/h" }) // URL changed
	change(ids[2], func(p *store.SubscriptionParams) { p.Paused = true })                     // paused
	change(ids[3], func(p *store.SubscriptionParams) { p.EventTypes = []string{"y"} })        // filter no longer matches
	change(ids[4], func(p *store.SubscriptionParams) { p.EventTypes = []string{"w", "x"} })   // filter narrowed, still matches: sent
	claimed := b.claim(t, "w", 10, time.Minute)
	if len(claimed) != 1 || claimed[0].SubscriptionID != ids[4] {
		t.Fatalf("claimed %+v, want only the delivery of subscription %d", claimed, ids[4])
	}
	h := health(t, b)
	if h.Counts[courier.StatusSuppressed] != 4 {
		t.Fatalf("suppressed %d, want 4", h.Counts[courier.StatusSuppressed])
	}
	heard := settled.take()
	want := store.Event{Kind: store.EventSettled, N: 1, Status: courier.StatusSuppressed, Code: courier.CodeSubscriptionChanged}
	if len(heard) != 4 || slices.ContainsFunc(heard, func(e store.Event) bool { return e != want }) {
		t.Fatalf("the Hook heard %+v of the claim, want 4 × %+v", heard, want)
	}
	var codes []string
	if err := b.db.SelectContext(b.ctx, &codes, "SELECT last_error_code FROM courier_outbox WHERE status = 'suppressed'"); err != nil {
		t.Fatal(err)
	}
	for _, c := range codes {
		if c != string(courier.CodeSubscriptionChanged) {
			t.Fatalf("suppressed with %s", c)
		}
	}
	if _, err := subs.Update(b.ctx, b.db, ids[0], subscription("globex", "https://x.example", "k", "*")); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("Update to another tenant = %v, want invalid_argument", err)
	}
	if got, err := subs.Get(b.ctx, b.db, ids[0]); err != nil || got.Tenant != "acme" {
		t.Fatalf("after a refused Update the subscription is %+v, %v", got, err)
	}
	if _, err := subs.Update(b.ctx, b.db, 9999, subscription("acme", "https://x.example", "k", "*")); !errors.Is(err, courier.CodeNotFound) {
		t.Fatalf("Update of a missing subscription = %v", err)
	}
}

// testASubscriptionReceivesUnlessPaused: a subscription receives unless it
// is paused. One created without saying so gets a publish, and an Update
// that does not say so (a new endpoint, new event types, written from
// scratch) leaves the deliveries already enqueued for it to be sent and
// the next publish reaching it. Before, the zero value was inactive:
// such a subscription got nothing, and such an Update deactivated it and
// suppressed its deliveries.
func testASubscriptionReceivesUnlessPaused(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	subs := b.store.Subscriptions
	params := func(endpoint string, types ...string) store.SubscriptionParams {
		return store.SubscriptionParams{Tenant: "acme", Endpoint: endpoint, EventTypes: types, KeyID: "key-1"}
	}
	publish := func(eventID string) []store.Published {
		t.Helper()
		got, err := publishCommitted(b, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: eventID, Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	a, err := subs.Create(b.ctx, nil, params("https://a.example/h", "order.paid"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := subs.Create(b.ctx, nil, params("https://c.example/h", "order.paid"))
	if err != nil {
		t.Fatal(err)
	}
	if got := publish("evt-1"); len(got) != 2 || got[0].SubscriptionID != a.ID || got[1].SubscriptionID != c.ID {
		t.Fatalf("a publish to subscriptions created without Paused made %+v, want a delivery for each of %d and %d", got, a.ID, c.ID)
	}
	// Updates that do not mention Paused: a's event types widened, c moved
	// to another endpoint.
	if _, err := subs.Update(b.ctx, nil, a.ID, params("https://a.example/h", "order.paid", "order.refunded")); err != nil {
		t.Fatal(err)
	}
	if _, err := subs.Update(b.ctx, nil, c.ID, params("https://c2.example/h", "order.paid")); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int64{a.ID, c.ID} {
		if got, err := subs.Get(b.ctx, nil, s); err != nil || got.Paused {
			t.Fatalf("after an Update without Paused subscription %d is %+v, %v; want it receiving", s, got, err)
		}
	}
	claimed := b.claim(t, "w", 10, time.Minute)
	if len(claimed) != 1 || claimed[0].SubscriptionID != a.ID {
		t.Fatalf("after the Updates claimed %+v, want a's delivery (c's, under its old endpoint, is suppressed)", claimed)
	}
	// The next publish reaches both, c at its new endpoint.
	got := publish("evt-2")
	if len(got) != 2 || got[0].SubscriptionID != a.ID || got[1].SubscriptionID != c.ID {
		t.Fatalf("a publish after the Updates made %+v, want a delivery for each of %d and %d", got, a.ID, c.ID)
	}
	claimed = b.claim(t, "w", 10, time.Minute)
	endpoints := map[string]bool{}
	for _, x := range claimed {
		endpoints[x.Endpoint] = true
	}
	if len(claimed) != 2 || !endpoints["https://a.example/h"] || !endpoints["https://c2.example/h"] {
		t.Fatalf("claimed %+v after the second publish, want one delivery to a and one to c's new endpoint", claimed)
	}
}

// testPausedSubscriptionReceivesNothing: a subscription created paused is
// skipped by Publish; one paused after a publish has its delivery
// suppressed at claim (subscription_changed); an Update that keeps it
// paused repeats Paused, and one that does not resumes it.
func testPausedSubscriptionReceivesNothing(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	subs := b.store.Subscriptions
	p := subscription("acme", "https://a.example/h", "key-1", "*")
	p.Paused = true
	s, err := subs.Create(b.ctx, nil, p)
	if err != nil || !s.Paused {
		t.Fatalf("Create paused = %+v, %v", s, err)
	}
	event := store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{}`)}
	if got, err := publishCommitted(b, event); err != nil || len(got) != 0 {
		t.Fatalf("a publish to a paused subscription = %+v, %v; want nothing", got, err)
	}
	p.Paused = false
	if _, err := subs.Update(b.ctx, nil, s.ID, p); err != nil {
		t.Fatal(err)
	}
	if got, err := publishCommitted(b, event); err != nil || len(got) != 1 {
		t.Fatalf("a publish once resumed = %+v, %v; want one delivery", got, err)
	}
	p.Paused = true
	if _, err := subs.Update(b.ctx, nil, s.ID, p); err != nil {
		t.Fatal(err)
	}
	p.EventTypes = []string{"order.paid"} // another Update, still paused
	if got, err := subs.Update(b.ctx, nil, s.ID, p); err != nil || !got.Paused {
		t.Fatalf("Update repeating Paused = %+v, %v; want it paused", got, err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %+v while the subscription is paused", c)
	}
	var codes []string
	if err := b.db.SelectContext(b.ctx, &codes, "SELECT last_error_code FROM courier_outbox WHERE status = 'suppressed'"); err != nil {
		t.Fatal(err)
	}
	if len(codes) != 1 || codes[0] != string(courier.CodeSubscriptionChanged) {
		t.Fatalf("suppressed codes %v, want one subscription_changed", codes)
	}
}

// publishCommitted publishes p in a transaction of its own and commits it.
func publishCommitted(b *bundle, p store.PublishParams) ([]store.Published, error) {
	tx, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	got, err := b.store.Outbox.Publish(b.ctx, tx, p)
	if err != nil {
		return nil, err
	}
	return got, tx.Commit()
}

// fingerprint returns the fingerprint subscription id has in the
// database: the SHA-256 of what its deliveries depend on, which a
// delivery published to it keeps and its claim compares.
func (b *bundle) fingerprint(t *testing.T, id int64) string {
	t.Helper()
	var f string
	if err := b.db.GetContext(b.ctx, &f, b.db.Rebind("SELECT fingerprint FROM courier_subscriptions WHERE id = ?"), id); err != nil {
		t.Fatal(err)
	}
	return f
}

// legacyFingerprint is the fingerprint subscriptions had when they carried
// an auth mode: the SHA-256 of endpoint, auth mode, key and profile, each
// as its length, a colon, itself and a semicolon.
func legacyFingerprint(endpoint, authMode, keyID, profile string) string {
	h := sha256.New()
	for _, part := range []string{endpoint, authMode, keyID, profile} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// testUpdateKeepsALegacyAuthModesFingerprint: a subscription written when
// subscriptions carried an auth mode has it in its auth_mode column and
// its fingerprint. An Update that changes nothing keeps both, so a
// delivery enqueued for it before is sent, not suppressed as one whose
// subscription changed; one that changes its key changes the fingerprint
// as before. A new subscription's auth_mode is empty.
func testUpdateKeepsALegacyAuthModesFingerprint(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	subs := b.store.Subscriptions
	s, err := subs.Create(b.ctx, nil, subscription("acme", "https://a.example/h", "key-1", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := b.db.GetContext(b.ctx, &mode, b.db.Rebind("SELECT auth_mode FROM courier_subscriptions WHERE id = ?"), s.ID); err != nil || mode != "" {
		t.Fatalf("a new subscription's auth_mode = %q, %v; want empty", mode, err)
	}
	if want := legacyFingerprint(s.Endpoint, "", s.KeyID, s.Profile); b.fingerprint(t, s.ID) != want {
		t.Fatalf("a new subscription's fingerprint = %s, want %s", b.fingerprint(t, s.ID), want)
	}
	// As a subscription written with auth mode standard-webhooks was.
	legacy := legacyFingerprint(s.Endpoint, "standard-webhooks", s.KeyID, s.Profile)
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("UPDATE courier_subscriptions SET auth_mode = ?, fingerprint = ? WHERE id = ?"),
		"standard-webhooks", legacy, s.ID); err != nil {
		t.Fatal(err)
	}
	if s, err = subs.Get(b.ctx, nil, s.ID); err != nil || b.fingerprint(t, s.ID) != legacy {
		t.Fatalf("Get = %+v, %v; want fingerprint %s", s, err, legacy)
	}
	event := store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{}`)}
	published, err := publishCommitted(b, event)
	if err != nil || len(published) != 1 {
		t.Fatalf("Publish = %+v, %v", published, err)
	}
	got, err := subs.Update(b.ctx, nil, s.ID, s.SubscriptionParams)
	if err != nil {
		t.Fatal(err)
	}
	if f := b.fingerprint(t, got.ID); f != legacy {
		t.Fatalf("an Update that changed nothing moved the fingerprint from %s to %s", legacy, f)
	}
	if err := b.db.GetContext(b.ctx, &mode, b.db.Rebind("SELECT auth_mode FROM courier_subscriptions WHERE id = ?"), s.ID); err != nil || mode != "standard-webhooks" {
		t.Fatalf("after the Update auth_mode = %q, %v; want standard-webhooks kept", mode, err)
	}
	claimed := b.claim(t, "w", 10, time.Minute)
	if len(claimed) != 1 || claimed[0].DeliveryID != published[0].ID {
		t.Fatalf("claimed %+v, want delivery %d sent (suppressed %d)", claimed, published[0].ID, health(t, b).Counts[courier.StatusSuppressed])
	}
	// A real change still changes the fingerprint, auth mode kept in it.
	rotated := got.SubscriptionParams
	rotated.KeyID = "key-2"
	if got, err = subs.Update(b.ctx, nil, s.ID, rotated); err != nil {
		t.Fatal(err)
	}
	if want := legacyFingerprint(s.Endpoint, "standard-webhooks", "key-2", s.Profile); b.fingerprint(t, got.ID) != want {
		t.Fatalf("after a key rotation the fingerprint is %s, want %s", b.fingerprint(t, got.ID), want)
	}
}

func testBreaker(t *testing.T, open OpenFunc) {
	events := hearing(store.EventEndpoint)
	b := setup(t, open, store.Config{
		Breaker: store.BreakerConfig{Threshold: 3, Cooldown: time.Minute, DisableAfter: 24 * time.Hour},
		Hook:    events.hook,
	})
	const bad, good = "https://bad.example/h", "https://good.example/h"
	enqueue := func(id, endpoint string) {
		p := delivery(id)
		p.Endpoint = endpoint
		b.enqueue(t, p)
	}
	for i := range 5 {
		enqueue("bad-"+string(rune('a'+i)), bad)
		enqueue("good-"+string(rune('a'+i)), good)
	}
	fail := func(c protocol.Claimed) {
		if err := b.retry(c.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
			t.Fatal(err)
		}
	}
	// Three failures open the breaker; good deliveries keep flowing.
	badClaims := 0
	for _, c := range b.claim(t, "w", 6, time.Minute) {
		if c.Endpoint == bad && badClaims < 3 {
			badClaims++
			fail(c)
			continue
		}
		if c.Endpoint == bad {
			fail(c)
			continue
		}
		if err := b.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, bad); eh.State != store.EndpointOpen || eh.Reason != courier.CodeReceiverUnavailable {
		t.Fatalf("bad endpoint is %+v, want open", eh)
	}
	b.clock.Advance(30 * time.Second) // retries due, cool-down not over
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if c.Endpoint == bad {
			t.Fatalf("claimed %s while its breaker is open", c.NotificationID)
		}
		if err := b.complete(c.Lease, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if h := health(t, b); h.Counts[courier.StatusSucceeded] != 5 {
		t.Fatalf("healthy endpoint completed %d of 5", h.Counts[courier.StatusSucceeded])
	}
	// After the cool-down: exactly one probe. It fails: open again.
	b.clock.Advance(31 * time.Second)
	probe := b.claim(t, "w", 10, time.Minute)
	if len(probe) != 1 || probe[0].Endpoint != bad {
		t.Fatalf("probe claim = %d rows", len(probe))
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %d more while the probe is out", len(c))
	}
	fail(probe[0])
	b.clock.Advance(61 * time.Second)
	probe = b.claim(t, "w", 10, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("second probe claim = %d rows", len(probe))
	}
	if err := b.complete(probe[0].Lease, "a"); err != nil { // recovered
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, bad); eh.State != store.EndpointClosed {
		t.Fatalf("after a good probe: %+v", eh)
	}
	b.clock.Advance(time.Hour)
	rest := b.claim(t, "w", 10, time.Minute)
	if len(rest) != 4 {
		t.Fatalf("after recovery claimed %d, want the 4 remaining", len(rest))
	}
	// 410 disables at once; the rest waits; failed ones are redriven.
	if err := b.fail(rest[0].Lease, courier.CodeEndpointGone, 410); err != nil {
		t.Fatal(err)
	}
	for _, c := range rest[1:] {
		if err := b.fail(c.Lease, courier.CodeReceiverRejected, 400); err != nil {
			t.Fatal(err)
		}
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, bad); eh.State != store.EndpointDisabled || eh.Reason != courier.CodeEndpointGone {
		t.Fatalf("after 410: %+v", eh)
	}
	n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{Endpoint: bad})
	if err != nil || n != 4 {
		t.Fatalf("Redrive = %d, %v, want 4", n, err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %d from a disabled endpoint", len(c))
	}
	if err := b.store.Endpoints.Enable(b.ctx, bad); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 4 || c[0].Attempt < 2 {
		t.Fatalf("after Enable claimed %d", len(c))
	}
	if err := b.store.Endpoints.Disable(b.ctx, bad); err != nil { // an operator's
		t.Fatal(err)
	}
	var path []string
	for _, e := range events.take() {
		if e.EndpointRef == endpoint.Ref(bad) {
			path = append(path, string(e.From)+">"+string(e.To)+" "+string(e.Code))
		}
	}
	want := []string{
		"closed>open receiver_unavailable", "open>half_open ", "half_open>open receiver_unavailable", "open>half_open ",
		"half_open>closed ", "closed>disabled endpoint_gone", "disabled>closed ", "closed>disabled endpoint_disabled",
	}
	if !slices.Equal(path, want) {
		t.Fatalf("breaker events %v, want %v", path, want)
	}
}

// testBreakerProbeAnsweredWithARefusalCloses: a probe the endpoint answers
// with a refusal (a 4xx, not about its health) shows it is up: the breaker
// closes at once rather than wait for the probe's lease. An attempt that
// was never answered (refused before sending) changes nothing.
func testBreakerProbeAnsweredWithARefusalCloses(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	for i := range 3 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s%d", i)))
	}
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(61 * time.Second)
	probe := b.claim(t, "w", 1, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("probe claim leased %v", ids(probe))
	}
	if err := b.settle(protocol.Outcome{Lease: probe[0].Lease, Result: protocol.Failed, Code: courier.CodeDestinationForbidden}); err != nil {
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointHalfOpen {
		t.Fatalf("after an attempt never sent the endpoint is %s, want still half_open", eh.State)
	}
	b.clock.Advance(61 * time.Second) // the probe's lease has run out: probed again
	probe = b.claim(t, "w", 1, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("second probe claim leased %v", ids(probe))
	}
	if err := b.fail(probe[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointClosed || eh.ConsecutiveFailures != 0 {
		t.Fatalf("after the probe was answered 400 the endpoint is %+v, want closed", eh)
	}
}

// testBreakerCountsConcurrentFailures: failures of one endpoint settled at
// once by many workers each count: none overwrites another's (on
// PostgreSQL, settles run concurrently; each reads, changes and writes
// the breaker record in turn).
func testBreakerCountsConcurrentFailures(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1000}})
	const n = 24
	for i := range n {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("r-%02d", i)))
	}
	c := b.claim(t, "w", n, time.Minute)
	if len(c) != n {
		t.Fatalf("claimed %d, want %d", len(c), n)
	}
	errs := make(chan error, n)
	for _, x := range c {
		go func() {
			for try := 1; ; try++ {
				// A settle that waited for the breaker's lock past its bound
				// (PostgreSQL: a loaded machine's 24 transactions in one
				// line) fails busy, rolled back, and its worker tries it
				// again, as here; each round settles at least the one at
				// the head of the line, so n tries are enough, and a
				// database gone (whose code busy shares) fails the test
				// after them, not at its timeout.
				err := b.retry(x.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second})
				if courier.CodeOf(err) != courier.CodeDatabaseUnavailable || try == n || b.ctx.Err() != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range c {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint); err != nil || eh.ConsecutiveFailures != n {
		t.Fatalf("after %d concurrent failed settles: %+v, %v; want %d consecutive failures", n, eh, err, n)
	}
}

// testEventsReportWhatMoved: the Hook hears of every settled delivery and
// breaker move, and of nothing that did not move: a lease reclaimed with
// its budget spent is settled failed; enabling an endpoint that never
// failed moves nothing; probing again a half-open endpoint whose probe's
// lease ran out leaves it half open.
func testEventsReportWhatMoved(t *testing.T, open OpenFunc) {
	events := hearing(store.EventSettled, store.EventEndpoint)
	b := setup(t, open, store.Config{
		Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute},
		Hook:    events.hook,
	})
	took := events.take
	if err := b.store.Endpoints.Enable(b.ctx, "https://never.example/h"); err != nil {
		t.Fatal(err)
	}
	if got := took(); len(got) != 0 {
		t.Fatalf("enabling a healthy endpoint reported %+v", got)
	}

	once := at(fastEndpoint, "once")
	once.MaxAttempts = 1
	b.enqueue(t, once)
	b.claim(t, "w", 10, time.Minute)
	b.clock.Advance(2 * time.Minute) // the lease runs out unsettled
	b.claim(t, "w", 10, time.Minute)
	want := store.Event{Kind: store.EventSettled, N: 1, Status: courier.StatusFailed, Code: courier.CodeLeaseExpired}
	if got := took(); len(got) != 1 || got[0] != want {
		t.Fatalf("reclaim of a spent lease reported %+v, want %+v", got, want)
	}

	b.enqueue(t, at(slowEndpoint, "s1"))
	b.enqueue(t, at(slowEndpoint, "s2"))
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	took()
	b.clock.Advance(61 * time.Second) // the cool-down ends: a probe
	if c := b.claim(t, "w", 1, 10*time.Second); len(c) != 1 {
		t.Fatalf("probe claim leased %v", ids(c))
	}
	wantProbe := endpointEvent(slowEndpoint, store.EndpointOpen, store.EndpointHalfOpen, "")
	if got := took(); len(got) != 1 || got[0] != wantProbe {
		t.Fatalf("the probe reported %+v, want %+v", got, wantProbe)
	}
	b.clock.Advance(11 * time.Second) // the probe's lease runs out unsettled
	if c := b.claim(t, "w", 1, 10*time.Second); len(c) != 1 {
		t.Fatalf("second probe claim leased %v", ids(c))
	}
	for _, e := range took() {
		if e.Kind == store.EventEndpoint {
			t.Fatalf("probing a half-open endpoint again reported %+v", e)
		}
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointHalfOpen {
		t.Fatalf("after the second probe the endpoint is %s, want half_open", eh.State)
	}
}

// testSettlesSharingEndpointsDoNotDeadlock: two workers settling, at
// once, failures of the same two endpoints listed in opposite orders
// record the breakers in one order, so neither waits for a lock the other
// holds while holding one it waits for (PostgreSQL would end one settle
// with a deadlock error, and the worker would have to write it again).
func testSettlesSharingEndpointsDoNotDeadlock(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1000}})
	const rounds = 20
	for i := range rounds {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%02d", i)))
		b.enqueue(t, at(fastEndpoint, fmt.Sprintf("f-%02d", i)))
	}
	fail := func(c protocol.Claimed) protocol.Outcome {
		return protocol.Outcome{Lease: c.Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Hour}
	}
	for range rounds / 2 {
		c := b.claim(t, "w", 4, time.Minute)
		if len(c) != 4 {
			t.Fatalf("claimed %v, want 4", ids(c))
		}
		var slow, fast []protocol.Claimed
		for _, x := range c {
			if x.Endpoint == slowEndpoint {
				slow = append(slow, x)
			} else {
				fast = append(fast, x)
			}
		}
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, pair := range [][2]protocol.Claimed{{slow[0], fast[0]}, {fast[1], slow[1]}} {
			go func() {
				<-start
				st, err := b.proto().Settle(b.ctx, fail(pair[0]), fail(pair[1]))
				if err == nil {
					err = errors.Join(st[0].Err, st[1].Err)
				}
				errs <- err
			}()
		}
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("settle: %v", err)
			}
		}
	}
}

func testBreakerDisablesLongFailures(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 100, DisableAfter: time.Hour}})
	p := delivery("long")
	p.MaxAttempts = 50
	b.enqueue(t, p)
	for range 3 {
		c := b.claim(t, "w", 1, time.Minute)
		if len(c) != 1 {
			t.Fatal("not claimable while failing below the threshold")
		}
		if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeTimeout}); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(31 * time.Minute)
	}
	eh, err := b.store.Endpoints.Get(b.ctx, p.Endpoint)
	if err != nil || eh.State != store.EndpointDisabled || eh.Reason != courier.CodeEndpointDisabled || eh.ConsecutiveFailures != 3 {
		t.Fatalf("after failing for over an hour: %+v, %v", eh, err)
	}
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 0 {
		t.Fatal("claimed from a disabled endpoint")
	}
	list, err := b.store.Endpoints.List(b.ctx)
	if err != nil || len(list) != 1 || list[0].Endpoint != p.Endpoint {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

// testSubscriptionsAndPublishInvalid: a subscription no publish could
// deliver, and a publish whose event type could not be matched, are
// refused with code invalid_argument where they are written; so is every
// string PostgreSQL's text would refuse (a NUL, invalid UTF-8), on both
// engines, whether a subscription matches or not, and a List by a tenant
// no subscription could have. A publish's Priority beyond 32 bits, or its
// Deadline beyond MaxHorizon, was refused only when a subscription
// matched: the same publish succeeded, writing nothing, until one did.
func testSubscriptionsAndPublishInvalid(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for name, edit := range map[string]func(p *store.SubscriptionParams){
		"relative endpoint": func(p *store.SubscriptionParams) { p.Endpoint = "/hooks" },
		"mailto endpoint":   func(p *store.SubscriptionParams) { p.Endpoint = "mailto:ops@example.com" },
		"unknown profile":   func(p *store.SubscriptionParams) { p.Profile = "courier.v2" },
		"terminal profile":  func(p *store.SubscriptionParams) { p.Profile = "terminal" },
		"command profile":   func(p *store.SubscriptionParams) { p.Profile = "command" },
		"spaced type":       func(p *store.SubscriptionParams) { p.EventTypes = []string{"order paid"} },
		"empty type":        func(p *store.SubscriptionParams) { p.EventTypes = []string{""} },
		// What PostgreSQL's text refuses is refused on both engines.
		"tenant with NUL":       func(p *store.SubscriptionParams) { p.Tenant += nul },
		"tenant not UTF-8":      func(p *store.SubscriptionParams) { p.Tenant += notUTF8 },
		"endpoint with NUL":     func(p *store.SubscriptionParams) { p.Endpoint += nul },
		"endpoint not UTF-8":    func(p *store.SubscriptionParams) { p.Endpoint += notUTF8 },
		"type with NUL":         func(p *store.SubscriptionParams) { p.EventTypes = []string{"order.paid" + nul} },
		"type not UTF-8":        func(p *store.SubscriptionParams) { p.EventTypes = []string{"order.paid", "order." + notUTF8} },
		"key id with NUL":       func(p *store.SubscriptionParams) { p.KeyID += nul },
		"key id not UTF-8":      func(p *store.SubscriptionParams) { p.KeyID += notUTF8 },
		"key id over 256 bytes": func(p *store.SubscriptionParams) { p.KeyID = strings.Repeat("k", 257) },
		"profile with NUL":      func(p *store.SubscriptionParams) { p.Profile = "courier" + nul },
		"profile not UTF-8":     func(p *store.SubscriptionParams) { p.Profile = "courier" + notUTF8 },
		// Every claim of a published delivery reads its subscription's
		// types: a list without bound made one tenant's subscription a
		// cost on every other's sends.
		"over 256 types": func(p *store.SubscriptionParams) {
			p.EventTypes = nil
			for i := range 257 {
				p.EventTypes = append(p.EventTypes, fmt.Sprintf("order.t%d", i))
			}
		},
	} {
		p := subscription("acme", "https://a.example/h", "key-a", "order.paid")
		edit(&p)
		if _, err := b.store.Subscriptions.Create(b.ctx, b.db, p); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("%s: Create = %v, want invalid_argument", name, err)
		}
	}
	s, err := b.store.Subscriptions.Create(b.ctx, b.db, subscription("acme", "https://a.example/h", "key-a", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Subscriptions.Update(b.ctx, b.db, s.ID, subscription("acme", "relative/path", "key-a", "*")); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("Update to a relative endpoint = %v, want invalid_argument", err)
	}
	if _, err := b.store.Subscriptions.Update(b.ctx, b.db, s.ID, subscription("acme"+nul, "https://a.example/h", "key-a", "*")); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("Update to a tenant with NUL = %v, want invalid_argument", err)
	}
	// A tenant no subscription could have is refused, as Create refuses it.
	for _, tenant := range []string{"", "acme" + nul, "acme" + notUTF8, strings.Repeat("t", 257)} {
		if _, err := b.store.Subscriptions.List(b.ctx, tenant); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("List(%q) = %v, want invalid_argument", tenant, err)
		}
	}
	if subs, err := b.store.Subscriptions.List(b.ctx, "acme"); err != nil || len(subs) != 1 || subs[0].Tenant != "acme" || subs[0].Endpoint != "https://a.example/h" {
		t.Fatalf("List(acme) = %+v, %v; want the one subscription, unchanged", subs, err)
	}
	for name, p := range map[string]store.PublishParams{
		"no event type":        {Tenant: "acme", EventID: "e", Payload: []byte(`{}`)},
		"event type *":         {Tenant: "acme", EventType: "*", EventID: "e", Payload: []byte(`{}`)},
		"spaced event type":    {Tenant: "acme", EventType: "a b", EventID: "e", Payload: []byte(`{}`)},
		"bad event id":         {Tenant: "acme", EventType: "a", EventID: "e e", Payload: []byte(`{}`)},
		"payload not JSON":     {Tenant: "acme", EventType: "a", EventID: "e", Payload: []byte(`nope`)},
		"deadline too far":     {Tenant: "acme", EventType: "a", EventID: "e", Payload: []byte(`{}`), Deadline: b.clock.Now().Add(store.MaxHorizon + time.Hour)},
		"deadline in the past": {Tenant: "acme", EventType: "a", EventID: "e", Payload: []byte(`{}`), Deadline: b.clock.Now().Add(-time.Hour)},
		"no tenant":            {EventType: "a", EventID: "e", Payload: []byte(`{}`)},
		"tenant with NUL":      {Tenant: "acme" + nul, EventType: "a", EventID: "e", Payload: []byte(`{}`)},
		"tenant not UTF-8":     {Tenant: "acme" + notUTF8, EventType: "a", EventID: "e", Payload: []byte(`{}`)},
		"event type with NUL":  {Tenant: "acme", EventType: "a" + nul, EventID: "e", Payload: []byte(`{}`)},
		"event type not UTF-8": {Tenant: "acme", EventType: "a" + notUTF8, EventID: "e", Payload: []byte(`{}`)},
		"event id with NUL":    {Tenant: "acme", EventType: "a", EventID: "e" + nul, Payload: []byte(`{}`)},
		// refused whether a subscription matches or not
		"ordering key with NUL":  {Tenant: "acme", EventType: "a", EventID: "e", Payload: []byte(`{}`), OrderingKey: "k" + nul},
		"ordering key not UTF-8": {Tenant: "nobody", EventType: "a", EventID: "e", Payload: []byte(`{}`), OrderingKey: "k" + notUTF8},
		"priority over 32 bits":  {Tenant: "nobody", EventType: "a", EventID: "e", Payload: []byte(`{}`), Priority: math.MaxInt32 + 1},
		"deadline too far, no subscription": {Tenant: "nobody", EventType: "a", EventID: "e", Payload: []byte(`{}`),
			Deadline: b.clock.Now().Add(store.MaxHorizon + time.Hour)},
	} {
		tx := b.begin(t)
		_, err := b.store.Outbox.Publish(b.ctx, tx, p)
		tx.Rollback()
		if courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("%s: Publish = %v, want invalid_argument", name, err)
		}
	}
	if h := health(t, b); h.Counts[courier.StatusPending] != 0 {
		t.Fatalf("refused publishes wrote %d deliveries", h.Counts[courier.StatusPending])
	}
}

// testPublishBuildErrorWritesNothing: a Build that fails for the second
// subscription left the first's delivery written, waiting for an ordering
// key it never joined: a caller that committed anyway kept a pending
// delivery no claim would ever take. Every payload is built before
// anything is written.
func testPublishBuildErrorWritesNothing(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, e := range []string{"https://a.example/h", "https://b.example/h"} {
		if _, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", e, "k", "*")); err != nil {
			t.Fatal(err)
		}
	}
	tx := b.begin(t)
	_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "x", EventID: "e1", OrderingKey: "order-1",
		Build: func(s store.Subscription, _ string) ([]byte, error) {
			if s.Endpoint == "https://b.example/h" {
				return nil, errors.New("template missing")
			}
			return []byte(`{"a":1}`), nil
		}})
	if err == nil {
		t.Fatal("Publish with a failing Build succeeded")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if page, err := b.store.Outbox.List(b.ctx, store.ListParams{}); err != nil || len(page.Deliveries) != 0 {
		t.Fatalf("a publish whose Build failed, committed anyway, wrote %d deliveries (%v); want none", len(page.Deliveries), err)
	}
}

// testPublishNamesTheBuildOfARefusedPayload: a payload Build made that
// its subscription's profile refuses (not JSON, a duplicate key, empty,
// too large) was refused as "Payload must be one JSON document for the
// profile": a field the caller had not set, and no word of which of the
// tenant's subscriptions Build wrote it for. The refusal names Build and
// the subscription, and keeps its code; one of a Payload names the
// subscription too.
func testPublishNamesTheBuildOfARefusedPayload(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var bad int64
	for _, e := range []string{"https://a.example/h", "https://b.example/h"} {
		s, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", e, "k", "*"))
		if err != nil {
			t.Fatal(err)
		}
		bad = s.ID
	}
	for name, payload := range map[string][]byte{
		"not JSON":      []byte("report"),
		"duplicate key": []byte(`{"a":1,"a":2}`),
		"empty":         {},
	} {
		tx := b.begin(t)
		_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "x", EventID: "e1",
			Build: func(s store.Subscription, _ string) ([]byte, error) {
				if s.ID == bad {
					return payload, nil
				}
				return []byte(`{"a":1}`), nil
			}})
		tx.Rollback()
		want := fmt.Sprintf("subscription %d, whose payload Build made", bad)
		if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%s: Publish = %v, want invalid_argument saying %q", name, err, want)
		}
	}
	// One Payload is refused at the first subscription it is written for.
	tx := b.begin(t)
	_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "x", EventID: "e1", Payload: []byte("report")})
	tx.Rollback()
	if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(fmt.Sprint(err), "publish to subscription ") {
		t.Errorf("a Payload not JSON: Publish = %v, want invalid_argument naming the subscription", err)
	}
}

// testPublishSetsEachReportingDeliverysKey: one Payload published to
// subscriptions of the reporting profile went to each with the same
// idempotency_key, the one key an AdCP receiver dedupes by, so a buyer
// whose two endpoints share an Inbox ran its function for one of them.
// Each is sent the Payload, canonical, with its key set to the
// delivery's own (Published.IdempotencyKey), the same bytes again on a
// publish again; another profile's subscription gets the Payload as it
// is, and a Payload that is no JSON object is refused for a reporting
// one.
func testPublishSetsEachReportingDeliverysKey(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	profiles := map[string]string{}
	for i, profile := range []string{ack.ProfileReporting, ack.ProfileReporting, ack.ProfileCourier} {
		p := subscription("acme", fmt.Sprintf("https://buyer.example/h%d", i), "k", "*")
		p.Profile = profile
		if _, err := b.store.Subscriptions.Create(b.ctx, nil, p); err != nil {
			t.Fatal(err)
		}
		profiles[p.Endpoint] = profile
	}
	payload := []byte(`{ "task_id": "t1", "idempotency_key": "whk_theirs", "operation_id": "op" }`)
	canonical, err := ack.Canonical(payload)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(p []byte) ([]store.Published, error) {
		tx := b.begin(t)
		defer tx.Rollback()
		ps, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "report", EventID: "e1", Payload: p})
		if err == nil {
			err = tx.Commit()
		}
		return ps, err
	}
	ps, err := publish(payload)
	if err != nil || len(ps) != 3 {
		t.Fatalf("Publish = %d deliveries, %v; want 3", len(ps), err)
	}
	keys := map[string]bool{}
	sent := map[int64][]byte{}
	for _, p := range ps {
		d, err := b.store.Outbox.Get(b.ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		sent[p.ID] = d.Payload
		if profiles[d.Endpoint] != ack.ProfileReporting {
			if string(d.Payload) != string(payload) {
				t.Errorf("a courier subscription was sent %s, want the Payload as it is", d.Payload)
			}
			continue
		}
		var env struct {
			IdempotencyKey string `json:"idempotency_key"`
		}
		if err := json.Unmarshal(d.Payload, &env); err != nil {
			t.Fatal(err)
		}
		want := strings.Replace(string(canonical), "whk_theirs", p.IdempotencyKey, 1)
		if env.IdempotencyKey != p.IdempotencyKey || string(d.Payload) != want || keys[p.IdempotencyKey] {
			t.Errorf("reporting delivery %d was sent %s, want %s: the Payload, canonical, under its own key %s", p.ID, d.Payload, want, p.IdempotencyKey)
		}
		keys[p.IdempotencyKey] = true
	}
	// Published again: the same deliveries, found, their bytes the same.
	again, err := publish(payload)
	if err != nil || len(again) != 3 {
		t.Fatalf("Publish again = %d deliveries, %v; want 3", len(again), err)
	}
	for _, p := range again {
		if d, err := b.store.Outbox.Get(b.ctx, p.ID); err != nil || !p.Existed || string(d.Payload) != string(sent[p.ID]) {
			t.Errorf("published again: delivery %d existed %v, payload %s (%v); want it found as it was, %s", p.ID, p.Existed, d.Payload, err, sent[p.ID])
		}
	}
	// Published again with another Payload, nothing else changed: a
	// collision, as for any subscription, though the bytes compared are
	// the ones made for the reporting profile.
	if _, err := publish([]byte(`{"task_id":"t2","operation_id":"op"}`)); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Errorf("published again with another Payload: %v, want CodeIdempotencyCollision", err)
	}
	for _, bad := range []string{`["an array"]`, `"a string"`, `{"a":1,"a":2}`, `not JSON`} {
		if _, err := publish([]byte(bad)); courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(fmt.Sprint(err), "of the reporting profile") {
			t.Errorf("Payload %s: Publish = %v, want invalid_argument naming the reporting subscription", bad, err)
		}
	}
}

// testPublishRefusesAReportingPayloadTooLargeWithItsKey: a Payload of
// up to MaxPayloadSize that its idempotency_key takes past it, for a
// subscription of the reporting profile, was refused as "Payload must be
// 1 byte to 4 MiB" as its delivery was written, after the deliveries
// written before it: a caller that committed anyway kept those, held
// for an ordering key never joined. It is refused before anything is
// written, naming the reporting subscription.
func testPublishRefusesAReportingPayloadTooLargeWithItsKey(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, profile := range []string{ack.ProfileCourier, ack.ProfileReporting} {
		p := subscription("acme", "https://"+profile+".example/h", "k", "*")
		p.Profile = profile
		if _, err := b.store.Subscriptions.Create(b.ctx, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	payload := []byte(`{"report":"` + strings.Repeat("x", store.MaxPayloadSize-len(`{"report":""}`)) + `"}`)
	tx := b.begin(t)
	_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "x", EventID: "e1", OrderingKey: "order-1", Payload: payload})
	if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(fmt.Sprint(err), "of the reporting profile") {
		t.Errorf("Publish = %v, want invalid_argument naming the reporting subscription", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if page, err := b.store.Outbox.List(b.ctx, store.ListParams{}); err != nil || len(page.Deliveries) != 0 {
		t.Fatalf("a refused publish, committed anyway, wrote %d deliveries (%v); want none", len(page.Deliveries), err)
	}
}

// testPublishRefusesAnIntegerAReportingReceiverRefuses: a Payload with
// an integer no float64 holds (canonical JSON keeps it exactly, as Python
// does) was published to a subscription of the reporting profile, whose
// receiver reads every number as a double and refused the delivery at
// its first attempt. It is refused before anything is written, naming
// the reporting subscription; to a courier subscription alone it is
// published.
func testPublishRefusesAnIntegerAReportingReceiverRefuses(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	// Tenant acme-reporting has a courier subscription beside its
	// reporting one, which the refusal must leave unwritten too.
	for _, sub := range []struct{ tenant, profile string }{
		{"acme-" + ack.ProfileCourier, ack.ProfileCourier},
		{"acme-" + ack.ProfileReporting, ack.ProfileCourier},
		{"acme-" + ack.ProfileReporting, ack.ProfileReporting},
	} {
		p := subscription(sub.tenant, "https://"+sub.tenant+"."+sub.profile+".example/h", "k", "*")
		p.Profile = sub.profile
		if _, err := b.store.Subscriptions.Create(b.ctx, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	payload := []byte(`{"impressions":1` + strings.Repeat("0", 400) + `}`)
	tx := b.begin(t)
	defer tx.Rollback()
	_, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme-" + ack.ProfileReporting, EventType: "x", EventID: "e1", Payload: payload})
	if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(fmt.Sprint(err), "float64") {
		t.Errorf("Publish to a reporting subscription = %v, want invalid_argument naming the integer", err)
	}
	if _, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme-" + ack.ProfileCourier, EventType: "x", EventID: "e1", Payload: payload}); err != nil {
		t.Errorf("Publish to a courier subscription = %v, want it published", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	page, err := b.store.Outbox.List(b.ctx, store.ListParams{})
	if err != nil || len(page.Deliveries) != 1 || !strings.HasPrefix(page.Deliveries[0].Endpoint, "https://acme-"+ack.ProfileCourier+".") {
		t.Fatalf("deliveries %+v (%v); want tenant acme-courier's alone", page.Deliveries, err)
	}
}

// testRepublishFindsAReportingDeliveryPublishedBeforeItsKeyWasSet: a
// delivery published to a subscription of the reporting profile before
// Publish set each one's idempotency_key holds the Payload as it was
// given; published again with that Payload (a publisher's retry across
// a rolling deploy) it was an idempotency collision, since the payload
// compared was the one made with the key. It is found; another Payload
// is still a collision.
func testRepublishFindsAReportingDeliveryPublishedBeforeItsKeyWasSet(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := subscription("acme", "https://buyer.example/h", "k", "*")
	p.Profile = ack.ProfileReporting
	if _, err := b.store.Subscriptions.Create(b.ctx, nil, p); err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{ "task_id": "t1", "operation_id": "op" }`)
	publish := func(p store.PublishParams) ([]store.Published, error) {
		tx := b.begin(t)
		defer tx.Rollback()
		p.Tenant, p.EventType, p.EventID = "acme", "report", "e1"
		ps, err := b.store.Outbox.Publish(b.ctx, tx, p)
		if err == nil {
			err = tx.Commit()
		}
		return ps, err
	}
	// As an earlier Publish wrote it: the Payload's own bytes.
	first, err := publish(store.PublishParams{Build: func(store.Subscription, string) ([]byte, error) { return payload, nil }})
	if err != nil || len(first) != 1 {
		t.Fatalf("Publish = %d deliveries, %v; want 1", len(first), err)
	}
	again, err := publish(store.PublishParams{Payload: payload})
	if err != nil || len(again) != 1 || !again[0].Existed || again[0].ID != first[0].ID {
		t.Fatalf("published again with its Payload: %+v, %v; want delivery %d found", again, err, first[0].ID)
	}
	if d, err := b.store.Outbox.Get(b.ctx, first[0].ID); err != nil || string(d.Payload) != string(payload) {
		t.Fatalf("published again, the delivery holds %s (%v), want it as it was", d.Payload, err)
	}
	if _, err := publish(store.PublishParams{Payload: []byte(`{"task_id":"t2","operation_id":"op"}`)}); !errors.Is(err, courier.CodeIdempotencyCollision) {
		t.Errorf("published again with another Payload: %v, want CodeIdempotencyCollision", err)
	}
}

// testAClaimSeesPastTheRowsItEnds: a claim that ends its whole batch
// (deliveries of a paused subscription, suppressed) claims again for its
// room, so deliveries due behind them are leased by the same claim. It
// returned nothing: a worker waited a poll for each batch of them, and a
// caller of Work or couriertest.Drain stopped with deliveries due.
func testAClaimSeesPastTheRowsItEnds(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := subscription("acme", "https://a.example/h", "key-1", "*")
	s, err := b.store.Subscriptions.Create(b.ctx, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	const backlog = 10
	for i := range backlog {
		if _, err := publishCommitted(b, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: fmt.Sprintf("e-%d", i), Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	p.Paused = true
	if _, err := b.store.Subscriptions.Update(b.ctx, nil, s.ID, p); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	sendable := b.enqueue(t, delivery("behind"))
	got := b.claim(t, "w", 3, time.Minute)
	if len(got) != 1 || got[0].DeliveryID != sendable.ID {
		t.Fatalf("claim leased %v, want the delivery behind the suppressed ones", ids(got))
	}
	if h := health(t, b); h.Counts[courier.StatusSuppressed] != backlog {
		t.Fatalf("suppressed %d, want all %d of the paused subscription's", h.Counts[courier.StatusSuppressed], backlog)
	}
}

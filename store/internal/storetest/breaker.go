package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// testIdleProbeWaitsForADelivery: an open endpoint whose probe found
// nothing to send (its last delivery failed for good) is not probed again
// at every claim, each probe a statement or four and a walk of the due
// rows: it stays open, untouched, until a delivery of its own comes, and
// that delivery is its probe.
func testIdleProbeWaitsForADelivery(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	only := at(slowEndpoint, "only")
	only.MaxAttempts = 1
	b.enqueue(t, only)
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute) // the cool-down is over; nothing is left to probe with
	if c := b.claim(t, "w", 5, time.Minute); len(c) != 0 {
		t.Fatalf("claim leased %v, want nothing", ids(c))
	}
	idle, err := b.store.Endpoints.Get(b.ctx, slowEndpoint)
	if err != nil || idle.State != store.EndpointOpen {
		t.Fatalf("after a probe that found nothing the endpoint is %+v (%v), want open", idle, err)
	}
	for range 3 {
		b.clock.Advance(time.Second)
		if c := b.claim(t, "w", 5, time.Minute); len(c) != 0 {
			t.Fatalf("claim leased %v, want nothing", ids(c))
		}
	}
	if again, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); !again.UpdatedAt.Equal(idle.UpdatedAt) || again.State != store.EndpointOpen {
		t.Fatalf("idle endpoint probed again by later claims: %+v, was %+v", again, idle)
	}

	next := b.enqueue(t, at(slowEndpoint, "next"))
	var probe []protocol.Claimed
	for i := 0; i < 2 && len(probe) == 0; i++ { // the first claim may park it, the next probes with it
		probe = b.claim(t, "w", 5, time.Minute)
	}
	if len(probe) != 1 || probe[0].DeliveryID != next.ID {
		t.Fatalf("probe = %v, want the new delivery %d", ids(probe), next.ID)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointHalfOpen {
		t.Fatalf("with its probe leased the endpoint is %s, want half_open", eh.State)
	}
}

// testLateFailureKeepsTheProbeAlone: an attempt leased before the breaker
// opened that fails while the endpoint is half open counts, but only the
// probe's own outcome moves the breaker: no cool-down starts, and no
// second probe is leased while the first is in flight.
func testLateFailureKeepsTheProbeAlone(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: 5 * time.Second}})
	for i := range 6 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	fail := func(c protocol.Claimed) {
		t.Helper()
		if err := b.retry(c.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	two := b.claim(t, "w1", 2, time.Minute) // two attempts in flight
	fail(two[0])                            // opens the breaker
	b.clock.Advance(5 * time.Second)
	probe := b.claim(t, "w2", 2, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("probe claim leased %v, want one probe", ids(probe))
	}
	fail(two[1]) // the attempt from before the breaker opened fails late
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointHalfOpen || eh.ConsecutiveFailures != 2 {
		t.Fatalf("after the late failure the endpoint is %+v, want half_open (its probe in flight) with 2 failures", eh)
	}
	b.clock.Advance(5 * time.Second) // a cool-down, well within the probe's lease
	if again := b.claim(t, "w3", 2, time.Minute); len(again) != 0 {
		t.Fatalf("a second probe %v was leased while the probe %v is in flight", ids(again), ids(probe))
	}
	// The probe answers: the endpoint closes and its deliveries flow.
	if err := b.complete(probe[0].Lease, "a"); err != nil {
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointClosed {
		t.Fatalf("after the probe succeeded the endpoint is %s, want closed", eh.State)
	}
	if c := b.claim(t, "w3", 5, time.Minute); len(c) != 3 {
		t.Fatalf("after the probe succeeded the claim leased %v, want the 3 deliveries left", ids(c))
	}
}

// testAnAnswerEndsTheFailureStreak: a receiver that answers, even with a
// refusal (a 4xx), is up: the failures counted before it no longer count,
// so a failure days later starts a new streak instead of disabling the
// endpoint as failing all along.
func testAnAnswerEndsTheFailureStreak(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 5, DisableAfter: 72 * time.Hour}})
	for i := range 2 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeTimeout, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.ConsecutiveFailures != 1 {
		t.Fatalf("after a timeout the endpoint is %+v, want one failure counted", eh)
	}
	c = b.claim(t, "w", 1, time.Minute)
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointClosed || eh.ConsecutiveFailures != 0 || !eh.FailingSince.IsZero() {
		t.Fatalf("after the receiver answered 400 the endpoint is %+v, want closed, no failures counted", eh)
	}
	b.clock.Advance(96 * time.Hour)
	later := b.enqueue(t, at(slowEndpoint, "later"))
	if c = b.claim(t, "w", 1, time.Minute); len(c) != 1 || c[0].DeliveryID != later.ID {
		t.Fatalf("claim = %v, want the later delivery", ids(c))
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeTimeout}); err != nil {
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointClosed || eh.ConsecutiveFailures != 1 {
		t.Fatalf("a timeout 96 hours after the receiver answered left the endpoint %+v, want closed with one failure", eh)
	}
}

// testASuppressedProbeIsNoProbe: when the delivery a claim picks to probe
// an endpoint cannot be sent (its subscription changed since: it is
// suppressed), it is no probe: the claim probes with the next, instead of
// leaving the endpoint half open with nothing in flight for a lease.
func testASuppressedProbeIsNoProbe(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	const ep = "https://flaky.example/h"
	sub, err := b.store.Subscriptions.Create(b.ctx, nil, subscription("acme", ep, "key-1", "*"))
	if err != nil {
		t.Fatal(err)
	}
	publish := func(id string) {
		t.Helper()
		tx := b.begin(t)
		if _, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{Tenant: "acme", EventType: "x", EventID: id, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	publish("evt-1")
	c := b.claim(t, "w", 10, time.Minute)
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
		t.Fatal(err)
	}
	publish("evt-2")
	publish("evt-3")
	p := sub.SubscriptionParams
	p.KeyID = "key-2" // the deliveries so far will be suppressed
	if _, err := b.store.Subscriptions.Update(b.ctx, nil, sub.ID, p); err != nil {
		t.Fatal(err)
	}
	publish("evt-4")

	b.clock.Advance(2 * time.Minute) // the cool-down is over
	probe := b.claim(t, "w", 10, time.Minute)
	if want := fmt.Sprintf("evt-4:%d", sub.ID); len(probe) != 1 || probe[0].NotificationID != want {
		t.Fatalf("probe = %v, want %s, the one delivery that can be sent", ids(probe), want)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, ep); eh.State != store.EndpointHalfOpen || !eh.OpenUntil.Equal(probe[0].ExpiresAt) {
		t.Fatalf("with its probe in flight the endpoint is %+v, want half_open until the probe's lease ends", eh)
	}
	// evt-1's retry is due a second after the others: ahead of evt-4 in
	// claim order are evt-2 and evt-3.
	if n := health(t, b).Counts[courier.StatusSuppressed]; n != 2 {
		t.Fatalf("suppressed %d, want the 2 deliveries ahead of the probe, made under the old key", n)
	}
}

// testALateAnswerKeepsTheProbeAlone: an attempt leased before the breaker
// opened, answered late with a 4xx while the endpoint is half open, does
// not close the breaker (an open one ignores it too): the probe in flight
// decides, and no claim leases the endpoint's backlog meanwhile.
func testALateAnswerKeepsTheProbeAlone(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: 5 * time.Second}})
	for i := range 6 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	two := b.claim(t, "w1", 2, time.Minute) // two attempts in flight
	if err := b.retry(two[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(5 * time.Second)
	probe := b.claim(t, "w2", 2, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("probe claim leased %v, want one probe", ids(probe))
	}
	if err := b.fail(two[1].Lease, courier.CodeReceiverRejected, 404); err != nil { // answered late
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointHalfOpen {
		t.Fatalf("after a late 4xx of an attempt sent before the pause the endpoint is %s, want half_open", eh.State)
	}
	if c := b.claim(t, "w3", 5, time.Minute); len(c) != 0 {
		t.Fatalf("while the probe %v is in flight a claim leased %v of the endpoint", ids(probe), ids(c))
	}
	if err := b.fail(probe[0].Lease, courier.CodeReceiverRejected, 400); err != nil { // the probe's own answer
		t.Fatal(err)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointClosed {
		t.Fatalf("after the probe was answered 400 the endpoint is %s, want closed", eh.State)
	}
}

// testHealthBlocksOnADisabledEndpoint: deliveries waiting for a disabled
// endpoint need an operator (Enable), as failed ones do: Health is blocked
// with code endpoint_disabled, not ok with nothing due, until the
// endpoint is enabled again.
func testHealthBlocksOnADisabledEndpoint(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if err := b.store.Endpoints.Disable(b.ctx, slowEndpoint); err != nil {
		t.Fatal(err)
	}
	if h := health(t, b); h.Status != store.HealthOK {
		t.Fatalf("with no delivery waiting Health = %s/%s, want ok", h.Status, h.Code)
	}
	b.enqueue(t, at(slowEndpoint, "held"))
	if c := b.claim(t, "w", 5, time.Minute); len(c) != 0 { // parks it
		t.Fatalf("claimed %v of a disabled endpoint", ids(c))
	}
	if h := health(t, b); h.Status != store.HealthBlocked || h.Code != courier.CodeEndpointDisabled || h.Due != 0 {
		t.Fatalf("with a delivery waiting for a disabled endpoint Health = %s/%s (due %d), want blocked endpoint_disabled", h.Status, h.Code, h.Due)
	}
	if err := b.store.Endpoints.Enable(b.ctx, slowEndpoint); err != nil {
		t.Fatal(err)
	}
	if h := health(t, b); h.Status != store.HealthOK {
		t.Fatalf("after Enable Health = %s/%s, want ok", h.Status, h.Code)
	}
	// A delivery not due yet (a NotBefore ahead; a retry after its
	// backoff) waits for a disabled endpoint as much as a parked one.
	later := at(fastEndpoint, "later")
	later.NotBefore = b.clock.Now().Add(time.Hour)
	b.enqueue(t, later)
	if err := b.store.Endpoints.Disable(b.ctx, fastEndpoint); err != nil {
		t.Fatal(err)
	}
	if h := health(t, b); h.Status != store.HealthBlocked || h.Code != courier.CodeEndpointDisabled {
		t.Fatalf("with a delivery not yet due waiting for a disabled endpoint Health = %s/%s, want blocked endpoint_disabled", h.Status, h.Code)
	}
}

// testARateLimitAfterAClockStepBack: a rate-limited endpoint's bucket,
// stamped before the store's clock stepped back a day, does not owe the
// step: it refills (the time since is unknown) and the endpoint is sent
// to at its rate, not held until the clock catches up.
func testARateLimitAfterAClockStepBack(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, at(slowEndpoint, "s-0"))
	if got := byEndpoint(b.claimCapped(t, "w", 10, 0)); got[slowEndpoint] != 1 {
		t.Fatalf("first claim %v, want the one delivery", got)
	}
	b.clock.Advance(-24 * time.Hour) // the clock steps back a day
	for i := range 3 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i+1)))
	}
	if got := byEndpoint(b.claimCapped(t, "w", 10, 0)); got[slowEndpoint] != 1 {
		t.Fatalf("right after the step back claimed %v, want one of the endpoint's (Burst 1)", got)
	}
	b.clock.Advance(time.Second) // a token's worth at 1/s
	if got := byEndpoint(b.claimCapped(t, "w", 10, 0)); got[slowEndpoint] != 1 {
		t.Fatalf("a second later claimed %v, want one more (Rate 1/s)", got)
	}
	if got := byEndpoint(b.claimCapped(t, "w", 10, 0)); got[slowEndpoint] != 0 {
		t.Fatalf("at once again claimed %v, want none: the bucket is empty", got)
	}
}

// testARateLimitHoldsAcrossSkewedClocks: two processes whose clocks differ
// by a millisecond (on PostgreSQL each keeps its own reading of the
// server's) share an endpoint's rate: the one behind takes no bucket
// stamped a little ahead of it for a clock's step back, refilled whole.
func testARateLimitHoldsAcrossSkewedClocks(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	ahead, err := openStore(t, b.ctx, b.db, store.Config{Now: func() time.Time { return b.clock.Now().Add(time.Millisecond) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i)))
	}
	claim := func(s *store.Store) int {
		c, err := protocol.For(s).Claim(b.ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return len(c)
	}
	leased := 0
	for range 10 {
		b.clock.Advance(time.Second)
		leased += claim(ahead)
		leased += claim(b.store)
	}
	if leased > 11 {
		t.Fatalf("Rate 1/s, Burst 1 over 10 s: two processes a millisecond apart leased %d, want at most 11", leased)
	}
}

// openWith settles c as a 503 retried in an hour: with Threshold 1 it
// opens the endpoint's breaker.
func openWith(t *testing.T, b *bundle, c protocol.Claimed) {
	t.Helper()
	if err := b.retry(c.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

// endpointState returns the endpoint's breaker state.
func endpointState(t *testing.T, b *bundle, endpoint string) store.EndpointHealth {
	t.Helper()
	h, err := b.store.Endpoints.Get(b.ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// testAProbeTakesARateToken: a probe is a leased delivery, and takes a
// token like any other (Limits.Rate): with the bucket empty the endpoint
// stays open, its cool-down over, and is probed once a token is back.
// With Rate 1/min and a 1s cool-down, a failing endpoint is sent one
// request a minute, not one a second.
func testAProbeTakesARateToken(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 1.0 / 60, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	first := b.claim(t, "w", 5, time.Minute) // the bucket's one token
	if len(first) != 1 {
		t.Fatalf("first claim = %v, want one (Burst 1)", ids(first))
	}
	openWith(t, b, first[0])
	for i := range 4 { // four cool-downs, the bucket still empty
		b.clock.Advance(time.Second)
		if c := b.claim(t, "w", 5, time.Minute); len(c) != 0 {
			t.Fatalf("%ds after the bucket's token was taken: claim leased %v, want nothing (Rate 1/min)", i+1, ids(c))
		}
		if h := endpointState(t, b, slowEndpoint); h.State != store.EndpointOpen {
			t.Fatalf("with no token for a probe the endpoint is %s, want open", h.State)
		}
	}
	b.clock.Advance(56 * time.Second) // a token is back
	probe := b.claim(t, "w", 5, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("a minute on, with a token: claim leased %v, want the probe", ids(probe))
	}
	if h := endpointState(t, b, slowEndpoint); h.State != store.EndpointHalfOpen {
		t.Fatalf("with its probe leased the endpoint is %s, want half_open", h.State)
	}
}

// testAProbeSpendsItsToken: the token a probe took is gone from the
// bucket: after a probe that succeeds, a claim at the same instant leases
// nothing with Rate 1/s and Burst 1, and one a second later leases one.
func testAProbeSpendsItsToken(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 1, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	openWith(t, b, b.claim(t, "w", 5, time.Minute)[0])
	b.clock.Advance(time.Minute) // the bucket full again, the cool-down over
	probe := b.claim(t, "w", 5, time.Minute)
	if len(probe) != 1 {
		t.Fatalf("probe claim = %v, want one", ids(probe))
	}
	if err := b.complete(probe[0].Lease, "a"); err != nil {
		t.Fatal(err)
	}
	if more := b.claim(t, "w", 5, time.Minute); len(more) != 0 {
		t.Fatalf("Rate 1/s, Burst 1: after the probe %v, a claim at the same instant leased %v, want nothing", ids(probe), ids(more))
	}
	b.clock.Advance(time.Second)
	if more := b.claim(t, "w", 5, time.Minute); len(more) != 1 {
		t.Fatalf("a second later: claim leased %v, want one", ids(more))
	}
}

// testAProbeWaitsForRoom: a probe is a lease like any other, within the
// claiming worker's share (ClaimParams.EndpointCap, counting those it
// holds) and the endpoint's MaxInFlight, counting every worker's: a
// worker at its share, or an endpoint at its MaxInFlight, gets no probe
// and the endpoint stays open until there is room.
func testAProbeWaitsForRoom(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})
	for i := range 8 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	if held := b.claimCapped(t, "w", 2, 2); len(held) != 2 { // w at its share of 2, in flight
		t.Fatalf("w's claim = %v", ids(held))
	}
	v := b.claimCapped(t, "v", 2, 2)
	if len(v) != 2 {
		t.Fatalf("v's claim = %v", ids(v))
	}
	openWith(t, b, v[0]) // v's other, v[1], still in flight
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{MaxInFlight: 3}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if got := b.claimCapped(t, "w", 5, 2); len(got) != 0 {
		t.Fatalf("w, holding its share of 2, was leased the probe %v", ids(got))
	}
	if got := b.claimCapped(t, "v", 5, 2); len(got) != 0 {
		t.Fatalf("v, with the endpoint at its MaxInFlight of 3, was leased the probe %v", ids(got))
	}
	if h := endpointState(t, b, slowEndpoint); h.State != store.EndpointOpen || h.InFlight != 3 {
		t.Fatalf("with no room for a probe the endpoint is %s with %d in flight, want open with 3", h.State, h.InFlight)
	}
	if n, err := b.proto().Release(b.ctx, v[1].Lease); err != nil || n != 1 { // a slot comes back
		t.Fatalf("Release = %d, %v", n, err)
	}
	probe := b.claimCapped(t, "v", 5, 2)
	if len(probe) != 1 {
		t.Fatalf("with a slot back: v's claim leased %v, want the probe", ids(probe))
	}
	if h := endpointState(t, b, slowEndpoint); h.State != store.EndpointHalfOpen || h.InFlight != 3 {
		t.Fatalf("with its probe leased the endpoint is %s with %d in flight, want half_open with 3", h.State, h.InFlight)
	}
}

// testAProbeGivenBackIsMadeAgain: a probe given back unsent (a worker
// stopping, or its lease too short to start the attempt) leaves nothing
// in flight: the next claim probes again, rather than wait out the
// probe's lease (an hour here).
func testAProbeGivenBackIsMadeAgain(t *testing.T, open OpenFunc) {
	b, probe := probeForAnHour(t, open)
	if n, err := b.proto().Release(b.ctx, probe.Lease); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	again := b.claim(t, "w2", 5, time.Minute)
	if h := endpointState(t, b, slowEndpoint); len(again) != 1 || again[0].DeliveryID != probe.DeliveryID || h.State != store.EndpointHalfOpen {
		t.Fatalf("after its probe %d was given back unsent: claim leased %v, want it again as the probe; endpoint %s, %d in flight, OpenUntil in %v",
			probe.DeliveryID, ids(again), h.State, h.InFlight, h.OpenUntil.Sub(b.clock.Now()))
	}
}

// testAProbeSettledWithoutAnAnswerIsMadeAgain: a probe settled without an
// answer from the endpoint (cut short by a shutdown, its signing failed)
// says nothing of the endpoint's health and leaves nothing in flight: the
// next claim probes again, rather than wait out the probe's lease.
func testAProbeSettledWithoutAnAnswerIsMadeAgain(t *testing.T, open OpenFunc) {
	for _, oc := range []protocol.Outcome{
		{Result: protocol.Retry, Code: courier.CodeWorkerStopped},
		{Result: protocol.Failed, Code: courier.CodeSigningFailed},
	} {
		t.Run(string(oc.Code), func(t *testing.T) {
			b, probe := probeForAnHour(t, open)
			oc.Lease = probe.Lease
			if err := b.settle(oc); err != nil {
				t.Fatal(err)
			}
			again := b.claim(t, "w2", 5, time.Minute)
			if h := endpointState(t, b, slowEndpoint); len(again) != 1 || h.State != store.EndpointHalfOpen {
				t.Fatalf("after its probe was settled %s without an answer: claim leased %v, want a probe; endpoint %s, %d in flight, OpenUntil in %v",
					oc.Code, ids(again), h.State, h.InFlight, h.OpenUntil.Sub(b.clock.Now()))
			}
		})
	}
}

// testAProbeLeftWithoutAnAnswerIsNoLeaseExpiry: a half-open endpoint
// that a claim leaves open (nothing of it due to probe) is reported
// half_open -> open with code lease_expired only when its probe's lease
// ran out unsettled; a probe settled without an answer, within its lease,
// reopens it without a code.
func testAProbeLeftWithoutAnAnswerIsNoLeaseExpiry(t *testing.T, open OpenFunc) {
	for _, tc := range []struct {
		name     string
		end      func(b *bundle, probe protocol.Claimed) error
		wantCode courier.Code
	}{
		{"settled signing_failed", func(b *bundle, probe protocol.Claimed) error {
			return b.settle(protocol.Outcome{Lease: probe.Lease, Result: protocol.Failed, Code: courier.CodeSigningFailed})
		}, ""},
		{"lease ran out", func(b *bundle, probe protocol.Claimed) error {
			b.clock.Advance(time.Minute) // d0 waits on for 59 minutes
			return nil
		}, courier.CodeLeaseExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := hearing(store.EventEndpoint)
			b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}, Hook: events.hook})
			b.enqueue(t, at(slowEndpoint, "d0"))
			d1 := at(slowEndpoint, "d1")
			d1.MaxAttempts = 1 // its lease running out fails it: nothing is due after
			b.enqueue(t, d1)
			openWith(t, b, b.claim(t, "w", 1, time.Minute)[0]) // d0 waits an hour
			b.clock.Advance(time.Second)
			probe := b.claim(t, "w1", 5, time.Minute)
			if len(probe) != 1 {
				t.Fatalf("probe claim = %v", ids(probe))
			}
			if err := tc.end(b, probe[0]); err != nil {
				t.Fatal(err)
			}
			events.take()
			if got := b.claim(t, "w2", 5, time.Minute); len(got) != 0 {
				t.Fatalf("claim leased %v, want nothing due", ids(got))
			}
			want := []store.Event{endpointEvent(slowEndpoint, store.EndpointHalfOpen, store.EndpointOpen, tc.wantCode)}
			if got := events.take(); !reflect.DeepEqual(got, want) {
				t.Fatalf("events = %+v\nwant %+v", got, want)
			}
		})
	}
}

// probeForAnHour opens slowEndpoint's breaker, with 2 deliveries of it
// due after the one that failed, and leases its probe for an hour.
func probeForAnHour(t *testing.T, open OpenFunc) (*bundle, protocol.Claimed) {
	t.Helper()
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}})
	for i := range 3 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("d%d", i)))
	}
	openWith(t, b, b.claim(t, "w", 1, time.Minute)[0])
	b.clock.Advance(time.Second)
	probe := b.claim(t, "w1", 5, time.Hour)
	if len(probe) != 1 {
		t.Fatalf("probe claim = %v", ids(probe))
	}
	return b, probe[0]
}

// testBreakerCountsAnUnhealthyAnswerWhateverItsCode: an answer of 5xx,
// 408, 425 or 429 speaks of the endpoint's health whatever code the
// worker's policy gave it (a Classify of one's own naming a 503
// "maintenance", or failing it for good): it counts toward opening the
// breaker. It was taken as an answer that shows the endpoint up, as a 4xx
// is, and ended the streak of failures.
func testBreakerCountsAnUnhealthyAnswerWhateverItsCode(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 4, Cooldown: time.Minute}})
	for i := range 4 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("n%d", i)))
	}
	c := b.claim(t, "w", 4, time.Minute)
	if len(c) != 4 {
		t.Fatalf("claimed %v, want 4", ids(c))
	}
	for i, status := range []int{503, 429, 408, 425} {
		oc := protocol.Outcome{Lease: c[i].Lease, Result: protocol.Retry, Code: "maintenance", HTTPStatus: status, RetryDelay: time.Hour}
		if i == 0 {
			oc.Result, oc.RetryDelay = protocol.Failed, 0
		}
		if err := b.settle(oc); err != nil {
			t.Fatal(err)
		}
	}
	eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint)
	if err != nil || eh.State != store.EndpointOpen || eh.ConsecutiveFailures != 4 || eh.Reason != "maintenance" {
		t.Fatalf("after 503, 429, 408 and 425 answers the endpoint is %+v (%v), want open after 4 failures, for maintenance", eh, err)
	}
}

// testBreakerCountsAHealthCodeWhateverItsAnswer: a failure settled with
// one of the codes of an unhealthy endpoint counts against it whatever
// its answer, a 4xx too (a policy of one's own that takes a 404 for a
// receiver not deployed yet), while a 4xx with another code shows the
// endpoint up and ends the streak.
func testBreakerCountsAHealthCodeWhateverItsAnswer(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 2, Cooldown: time.Minute}})
	for i := range 3 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("n%d", i)))
	}
	c := b.claim(t, "w", 3, time.Minute)
	if len(c) != 3 {
		t.Fatalf("claimed %v, want 3", ids(c))
	}
	settle := func(i int, code courier.Code) {
		t.Helper()
		oc := protocol.Outcome{Lease: c[i].Lease, Result: protocol.Retry, Code: code, HTTPStatus: 404, RetryDelay: time.Hour}
		if err := b.settle(oc); err != nil {
			t.Fatal(err)
		}
	}
	settle(0, courier.CodeReceiverUnavailable)
	if eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint); err != nil || eh.ConsecutiveFailures != 1 {
		t.Fatalf("after a 404 settled receiver_unavailable the endpoint is %+v (%v), want 1 failure", eh, err)
	}
	settle(1, courier.CodeReceiverRejected) // an answer: the endpoint is up
	if eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint); err == nil && eh.ConsecutiveFailures != 0 {
		t.Fatalf("after a 404 settled receiver_rejected the endpoint is %+v, want its streak ended", eh)
	}
	settle(2, courier.CodeNetwork)
	if eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint); err != nil || eh.ConsecutiveFailures != 1 || eh.State != store.EndpointClosed {
		t.Fatalf("after a 404 settled network_error the endpoint is %+v (%v), want closed with 1 failure", eh, err)
	}
}

// testALateFailureKeepsAProbeGivenBackNoLeaseExpiry: a failure of an
// attempt leased before the breaker opened, settled late while the
// endpoint is half open and its probe was settled without an answer,
// counts, but does not make the probe's end look like a lease that ran
// out: the claim that then leaves the endpoint open reports it without a
// code, as it would without the late failure.
func testALateFailureKeepsAProbeGivenBackNoLeaseExpiry(t *testing.T, open OpenFunc) {
	events := hearing(store.EventEndpoint)
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Second}, Hook: events.hook})
	b.enqueue(t, at(slowEndpoint, "d0"))
	b.enqueue(t, at(slowEndpoint, "late"))
	d1 := at(slowEndpoint, "d1")
	d1.MaxAttempts = 1
	b.enqueue(t, d1)
	c := b.claim(t, "w", 2, time.Minute)
	if len(c) != 2 || c[0].NotificationID != "d0" || c[1].NotificationID != "late" {
		t.Fatalf("claim = %v, want d0 and late", ids(c))
	}
	openWith(t, b, c[0]) // d0 waits an hour
	b.clock.Advance(time.Second)
	probe := b.claim(t, "w1", 5, time.Minute)
	if len(probe) != 1 || probe[0].NotificationID != "d1" {
		t.Fatalf("probe claim = %v, want d1", ids(probe))
	}
	if err := b.settle(protocol.Outcome{Lease: probe[0].Lease, Result: protocol.Failed, Code: courier.CodeSigningFailed}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Millisecond)
	if err := b.retry(c[1].Lease, retryParams{Code: courier.CodeNetwork, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if h := endpointState(t, b, slowEndpoint); h.State != store.EndpointHalfOpen || h.ConsecutiveFailures != 2 {
		t.Fatalf("after the late failure the endpoint is %s with %d failures, want half_open with 2", h.State, h.ConsecutiveFailures)
	}
	events.take()
	if got := b.claim(t, "w2", 5, time.Minute); len(got) != 0 {
		t.Fatalf("claim leased %v, want nothing due", ids(got))
	}
	want := []store.Event{endpointEvent(slowEndpoint, store.EndpointHalfOpen, store.EndpointOpen, "")}
	if got := events.take(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %+v\nwant %+v", got, want)
	}
}

// testEndpointEventsCarryNoCredentials: an EventEndpoint names its
// endpoint by scheme and host and by its ref, never with the userinfo,
// path or query a webhook URL may hold its secret in; Resolve gives the
// URL back from the ref. The Hook once got the URL as enqueued, for each
// application to redact before it logged or counted it.
func testEndpointEventsCarryNoCredentials(t *testing.T, open OpenFunc) {
	const url = "https://user:PASSWORD@hooks.example/services/T0/B0/PATHSECRET?token=QUERYSECRET"
	events := hearing(store.EventEndpoint)
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1}, Hook: events.hook})
	b.enqueue(t, at(url, "n-1"))
	c := b.claim(t, "w", 1, time.Minute)
	if len(c) != 1 {
		t.Fatalf("claimed %v, want n-1", ids(c))
	}
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503}); err != nil {
		t.Fatal(err)
	}
	got := events.take()
	if len(got) != 1 || got[0].To != store.EndpointOpen {
		t.Fatalf("events %+v, want the breaker opening", got)
	}
	e := got[0]
	if e.Endpoint != "https://hooks.example/…" || len(e.EndpointRef) != 32 {
		t.Fatalf("the event names its endpoint %q, ref %q; want https://hooks.example/… and a ref", e.Endpoint, e.EndpointRef)
	}
	for _, secret := range []string{"PASSWORD", "PATHSECRET", "QUERYSECRET"} {
		if strings.Contains(fmt.Sprintf("%+v", e), secret) {
			t.Errorf("the event %+v holds %s", e, secret)
		}
	}
	if back, err := b.store.Endpoints.Resolve(b.ctx, e.EndpointRef); err != nil || back != url {
		t.Fatalf("Resolve(%s) = %q, %v; want the URL", e.EndpointRef, back, err)
	}
}

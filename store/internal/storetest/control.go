package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// Delivery control: the claim's rules for fair share (ClaimParams.
// EndpointCap), endpoint limits (Endpoints.SetLimits) and ordering keys
// (EnqueueParams.OrderingKey).

const (
	slowEndpoint = "https://slow.example/hooks"
	fastEndpoint = "https://fast.example/hooks"
	// retryHorizon is a Store's default Config.RetryHorizon.
	retryHorizon = 72 * time.Hour
)

// at returns enqueue parameters for a delivery to endpoint.
func at(endpoint, id string) store.EnqueueParams {
	p := delivery(id)
	p.Endpoint = endpoint
	return p
}

// claimCapped claims with an endpoint cap.
func (b *bundle) claimCapped(t *testing.T, owner string, limit, capPerEndpoint int) []protocol.Claimed {
	t.Helper()
	c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: owner, Limit: limit, Lease: time.Minute, EndpointCap: capPerEndpoint})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// byEndpoint counts claimed deliveries by endpoint.
func byEndpoint(c []protocol.Claimed) map[string]int {
	m := make(map[string]int)
	for _, d := range c {
		m[d.Endpoint]++
	}
	return m
}

// ids returns the notification ids of claimed deliveries, in claim order.
func ids(c []protocol.Claimed) []string {
	out := make([]string, len(c))
	for i, d := range c {
		out[i] = d.NotificationID
	}
	return out
}

// testClaimKeepsEachEndpointToItsCap: a worker's claim leases no more of
// one endpoint's deliveries than its cap, counting the leases the worker
// already holds, and fills the rest of its batch from the other endpoints,
// even when the capped endpoint's backlog comes first in claim order. A
// settle, a release and an expired lease each give the slot back.
func testClaimKeepsEachEndpointToItsCap(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for i := range 20 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%02d", i)))
	}
	b.clock.Advance(time.Millisecond)
	for i := range 3 {
		b.enqueue(t, at(fastEndpoint, fmt.Sprintf("f-%d", i)))
	}
	first := b.claimCapped(t, "w", 8, 3)
	if got := byEndpoint(first); got[slowEndpoint] != 3 || got[fastEndpoint] != 3 {
		t.Fatalf("first claim by endpoint = %v, want 3 of each (the cap), the fast ones past the slow backlog", got)
	}
	if c := b.claimCapped(t, "w", 8, 3); len(c) != 0 {
		t.Fatalf("claimed %v with the slow endpoint at its cap and nothing else due", ids(c))
	}
	eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint)
	if err != nil || eh.InFlight != 3 {
		t.Fatalf("slow endpoint: InFlight %d, %v; want 3", eh.InFlight, err)
	}

	// The cap is the worker's own: another worker has its own share.
	if got := byEndpoint(b.claimCapped(t, "v", 8, 3)); got[slowEndpoint] != 3 {
		t.Fatalf("another worker's claim by endpoint = %v, want its own 3 slow", got)
	}

	// A settle gives the slot back.
	var slow []protocol.Claimed
	for _, c := range first {
		if c.Endpoint == slowEndpoint {
			slow = append(slow, c)
		}
	}
	if err := b.complete(slow[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if c := b.claimCapped(t, "w", 8, 3); len(c) != 1 || c[0].Endpoint != slowEndpoint || c[0].NotificationID != "s-06" {
		t.Fatalf("after a settle claimed %v, want the next slow delivery s-06", ids(c))
	}
	// So does a release.
	if n, err := b.proto().Release(b.ctx, slow[1].Lease); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	if c := b.claimCapped(t, "w", 8, 3); len(c) != 1 || c[0].NotificationID != slow[1].NotificationID {
		t.Fatalf("after a release claimed %v, want %s again", ids(c), slow[1].NotificationID)
	}
	// And an expired lease: the claim that reclaims it has the room.
	b.clock.Advance(2 * time.Minute)
	if got := byEndpoint(b.claimCapped(t, "w", 8, 3)); got[slowEndpoint] != 3 {
		t.Fatalf("after the leases expired claimed %v, want 3 slow", got)
	}
	// Without a cap the claim takes what is due.
	if got := byEndpoint(b.claimCapped(t, "u", 20, 0)); got[slowEndpoint] != 20-1-3 {
		t.Fatalf("uncapped claim by endpoint = %v, want every other unfinished slow delivery (%d)", got, 20-1-3)
	}
}

// testParkedDeliveriesWaitOutOfTheDueIndex: the deliveries a claim passes
// over because their endpoint has no room are parked (Delivery.Held is
// endpoint), out of the due index though still a backlog Health counts,
// and come back in their order once the endpoint has room; the outbox
// stays valid for Check throughout.
func testParkedDeliveriesWaitOutOfTheDueIndex(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var sent []store.Enqueued
	for i := range 6 {
		sent = append(sent, b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i))))
	}
	c := b.claimCapped(t, "w", 6, 1)
	if len(c) != 1 || c[0].NotificationID != "s-0" {
		t.Fatalf("claimed %v, want s-0 alone", ids(c))
	}
	for _, e := range sent[1:] {
		if d := b.get(t, e.ID); d.Status != courier.StatusPending || d.Held != store.HeldByEndpoint {
			t.Fatalf("delivery %d: %s held %q, want pending held by its endpoint", e.ID, d.Status, d.Held)
		}
	}
	h, err := b.store.Outbox.Health(b.ctx)
	if err != nil || h.Due != 5 {
		t.Fatalf("Health.Due = %d, %v; want 5: parked for room, the rest still wait to be sent", h.Due, err)
	}
	if ch, err := b.store.Outbox.Check(b.ctx, 0); err != nil || len(ch.Invalid) != 0 {
		t.Fatalf("Check with parked rows: %+v, %v", ch.Invalid, err)
	}
	for i := 1; i < 6; i++ {
		if err := b.complete(c[0].Lease, ""); err != nil {
			t.Fatal(err)
		}
		if c = b.claimCapped(t, "w", 6, 1); len(c) != 1 || c[0].NotificationID != fmt.Sprintf("s-%d", i) {
			t.Fatalf("claimed %v, want s-%d: parked deliveries come back in order", ids(c), i)
		}
	}
}

// testParkedDeliveriesEndAtTheirDeadline: deliveries parked by an
// endpoint that has no room for good (disabled) end at their deadline as
// every delivery does (failed, expired), rather than wait for Enable
// however long past it, pending, never pruned, with Health ok. A parked
// head of an ordering key that ends is a failed head: it holds its key
// (OrderingHoldKey), as any failed head does.
func testParkedDeliveriesEndAtTheirDeadline(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{RetryHorizon: time.Hour})
	var sent []store.Enqueued
	for _, p := range []store.EnqueueParams{at(slowEndpoint, "a"), at(slowEndpoint, "b"), keyed("k-1", "order-1"), keyed("k-2", "order-1")} {
		p.Endpoint = slowEndpoint
		sent = append(sent, b.enqueue(t, p))
	}
	if err := b.store.Endpoints.Disable(b.ctx, slowEndpoint); err != nil {
		t.Fatal(err)
	}
	if c := b.claim(t, "w", 10, time.Minute); len(c) != 0 {
		t.Fatalf("claimed %v from a disabled endpoint", ids(c))
	}
	for _, e := range sent[:3] {
		if d := b.get(t, e.ID); d.Held != store.HeldByEndpoint {
			t.Fatalf("delivery %d: %s held %q, want parked", e.ID, d.Status, d.Held)
		}
	}
	b.clock.Advance(30 * time.Minute) // within the horizon: they wait
	b.claim(t, "w", 10, time.Minute)
	if d := b.get(t, sent[0].ID); d.Status != courier.StatusPending {
		t.Fatalf("before its deadline a parked delivery is %s, want pending", d.Status)
	}
	b.clock.Advance(24 * time.Hour)
	b.claim(t, "w", 10, time.Minute)
	for _, e := range sent[:3] {
		if d := b.get(t, e.ID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
			t.Errorf("delivery %d, a day past its deadline: %s %q held %q, want failed expired", e.ID, d.Status, d.LastErrorCode, d.Held)
		}
	}
	if d := b.get(t, sent[3].ID); d.Status != courier.StatusPending || d.Held != store.HeldByKey {
		t.Errorf("the key's second delivery: %s held %q, want pending behind its failed head", d.Status, d.Held)
	}
	if h, err := b.store.Outbox.Health(b.ctx); err != nil || h.Status != store.HealthBlocked || h.Failed != 3 {
		t.Fatalf("Health = %+v, %v; want blocked by the 3 failed", h, err)
	}
}

// testEndpointMaxInFlightHoldsAcrossWorkers: an endpoint's MaxInFlight
// bounds the leases of every worker together, whatever their own caps,
// and a settle frees a slot for any of them.
func testEndpointMaxInFlightHoldsAcrossWorkers(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{MaxInFlight: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i)))
	}
	var held []protocol.Claimed
	for _, owner := range []string{"a", "b", "c"} {
		held = append(held, b.claimCapped(t, owner, 5, 0)...)
	}
	if len(held) != 3 {
		t.Fatalf("three workers claimed %d, want 3 (MaxInFlight)", len(held))
	}
	eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint)
	if err != nil || eh.InFlight != 3 || eh.Limits != (store.Limits{MaxInFlight: 3}) {
		t.Fatalf("Get = %+v, %v", eh, err)
	}
	list, err := b.store.Endpoints.List(b.ctx)
	if err != nil || len(list) != 1 || list[0].Endpoint != slowEndpoint || list[0].InFlight != 3 || list[0].Limits.MaxInFlight != 3 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := b.complete(held[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if c := b.claimCapped(t, "c", 5, 0); len(c) != 1 {
		t.Fatalf("after a settle claimed %d, want the one freed slot", len(c))
	}
	// Removing the limits lets the rest go.
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if c := b.claimCapped(t, "a", 10, 0); len(c) != 10-4 {
		t.Fatalf("without limits claimed %d, want the other %d", len(c), 10-4)
	}
}

// claimedOf claims a batch of 20 (no share) and counts the deliveries to
// endpoint it leased.
func (b *bundle) claimedOf(t *testing.T, endpoint string) int {
	t.Helper()
	n := 0
	for _, c := range b.claimCapped(t, "w", 20, 0) {
		if c.Endpoint == endpoint {
			n++
		}
	}
	return n
}

// testEndpointRateIsATokenBucket: an endpoint's Rate and Burst let Burst
// deliveries go at once, then Rate per second, the bucket refilling with
// the store's clock up to Burst.
func testEndpointRateIsATokenBucket(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 2, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%02d", i)))
	}
	b.enqueue(t, at(fastEndpoint, "f"))
	steps := []struct {
		wait time.Duration
		want int
	}{
		{0, 3},                       // the full bucket
		{0, 0},                       // empty
		{500 * time.Millisecond, 1},  // one token at 2/s
		{250 * time.Millisecond, 0},  // half a token
		{250 * time.Millisecond, 1},  // the other half
		{time.Second, 2},             // two more
		{10 * time.Second, 3},        // refilled only up to Burst
		{1500 * time.Millisecond, 3}, // three tokens
	}
	for i, s := range steps {
		b.clock.Advance(s.wait)
		if got := b.claimedOf(t, slowEndpoint); got != s.want {
			t.Fatalf("step %d (after %s): claimed %d, want %d", i, s.wait, got, s.want)
		}
	}
}

// testSetLimitsAgainKeepsTheBucket: setting an endpoint's limits again
// (each instance of an application applying its configuration as it
// starts) keeps the tokens its bucket holds, refilled at the rate set
// before, up to the new Burst: the rate holds however often the limits
// are set. A bucket gets its first fill only when a rate is set where
// none was.
func testSetLimitsAgainKeepsTheBucket(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for i := range 20 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%02d", i)))
	}
	set := func(l store.Limits) {
		t.Helper()
		if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, l); err != nil {
			t.Fatal(err)
		}
	}
	set(store.Limits{MaxInFlight: 100})
	set(store.Limits{MaxInFlight: 100, Rate: 2, Burst: 3}) // a rate where none was: a full bucket
	if got := b.claimedOf(t, slowEndpoint); got != 3 {
		t.Fatalf("first claim under Rate 2, Burst 3 leased %d, want the full bucket's 3", got)
	}
	steps := []struct {
		name   string
		wait   time.Duration
		limits store.Limits
		want   int
	}{
		{"set again at once", 0, store.Limits{MaxInFlight: 100, Rate: 2, Burst: 3}, 0},
		{"set again half a second later", 500 * time.Millisecond, store.Limits{MaxInFlight: 100, Rate: 2, Burst: 3}, 1},
		{"Burst raised", 0, store.Limits{Rate: 2, Burst: 10}, 0},
		{"a second later, Burst lowered to 1", time.Second, store.Limits{Rate: 2, Burst: 1}, 1},
	}
	for _, s := range steps {
		b.clock.Advance(s.wait)
		set(s.limits)
		if got := b.claimedOf(t, slowEndpoint); got != s.want {
			t.Fatalf("%s: claimed %d, want %d", s.name, got, s.want)
		}
	}
	set(store.Limits{}) // removed: the next rate starts full
	set(store.Limits{Rate: 2, Burst: 3})
	if got := b.claimedOf(t, slowEndpoint); got != 3 {
		t.Fatalf("a rate set after the limits were removed: claimed %d, want a full bucket's 3", got)
	}
}

// testSetLimitsAgainAfterAClockStepBack: limits set again after the
// store's clock stepped back reckon the bucket as a claim does. A step
// of less than a minute (processes whose readings of the clock differ a
// little) refills nothing until the clock is past the bucket's stamp
// again; a step of more is a clock that went back, the time since
// unknown, and the bucket is refilled whole rather than owe the step.
func testSetLimitsAgainAfterAClockStepBack(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for i := range 5 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i)))
	}
	limits := store.Limits{Rate: 2, Burst: 3}
	set := func() {
		t.Helper()
		if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, limits); err != nil {
			t.Fatal(err)
		}
	}
	set()
	if got := b.claimedOf(t, slowEndpoint); got != 3 {
		t.Fatalf("first claim leased %d, want the full bucket's 3", got)
	}
	steps := []struct {
		name string
		wait time.Duration
		want int
	}{
		{"30 s back", -30 * time.Second, 0},
		{"back where the bucket was stamped, and half a second on", 30*time.Second + 500*time.Millisecond, 1},
		{"a day back", -24 * time.Hour, 3},
	}
	for i, s := range steps {
		b.clock.Advance(s.wait)
		for j := range 5 { // due on the clock as it now reads
			b.enqueue(t, at(slowEndpoint, fmt.Sprintf("step-%d-%d", i, j)))
		}
		set()
		if got := b.claimedOf(t, slowEndpoint); got != s.want {
			t.Fatalf("%s, limits set again: claimed %d, want %d", s.name, got, s.want)
		}
	}
}

// testEndpointRateHoldsAcrossPriorities: one claim that reads several
// priorities (a statement each) leases no more of a rate-limited
// endpoint than its bucket holds, and leaves the bucket empty, not owing.
func testEndpointRateHoldsAcrossPriorities(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 1, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	for p := range 3 {
		for i := range 3 {
			e := at(slowEndpoint, fmt.Sprintf("p%d-%d", p, i))
			e.Priority = p
			b.enqueue(t, e)
		}
	}
	if got := ids(b.claimCapped(t, "w", 20, 0)); !slices.Equal(got, []string{"p0-0", "p0-1"}) {
		t.Fatalf("one claim leased %v of an endpoint with Rate 1, Burst 2; want p0-0 and p0-1", got)
	}
	b.clock.Advance(time.Second)
	if got := ids(b.claimCapped(t, "w", 20, 0)); !slices.Equal(got, []string{"p0-2"}) {
		t.Fatalf("a second later claimed %v, want the one token's p0-2", got)
	}
}

// testLimitsInvalid: limits no claim could honour are refused with code
// invalid_argument, naming the field; a Rate alone gets a burst of one
// second's worth.
func testLimitsInvalid(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for name, tc := range map[string]struct {
		endpoint string
		limits   store.Limits
	}{
		"negative in flight": {slowEndpoint, store.Limits{MaxInFlight: -1}},
		"negative rate":      {slowEndpoint, store.Limits{Rate: -1}},
		"NaN rate":           {slowEndpoint, store.Limits{Rate: math.NaN()}},
		"huge rate":          {slowEndpoint, store.Limits{Rate: 1e9}},
		"burst without rate": {slowEndpoint, store.Limits{Burst: 5}},
		"relative endpoint":  {"/hooks", store.Limits{MaxInFlight: 1}},
	} {
		err := b.store.Endpoints.SetLimits(b.ctx, tc.endpoint, tc.limits)
		if courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("%s: SetLimits = %v, want invalid_argument", name, err)
		}
	}
	if err := b.store.Endpoints.SetLimits(b.ctx, slowEndpoint, store.Limits{Rate: 2.5}); err != nil {
		t.Fatal(err)
	}
	if eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint); err != nil || eh.Limits != (store.Limits{Rate: 2.5, Burst: 3}) {
		t.Fatalf("Get = %+v, %v; want rate 2.5 with burst 3", eh.Limits, err)
	}
	// An operator's Disable or Enable of what is no endpoint is refused
	// the same way, with nothing recorded (on PostgreSQL a NUL byte or
	// invalid UTF-8 would otherwise fail in the database).
	// So are the reads by endpoint (Get, BlockedKeys) and SetLimits: what
	// no delivery could be enqueued to is invalid_argument, never an
	// unknown endpoint's answer on one engine and a failure on the other.
	for _, endpoint := range []string{"not a url", "https://h.example/p" + nul, "https://h.example/p" + notUTF8, ""} {
		if err := b.store.Endpoints.Disable(b.ctx, endpoint); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Disable(%q) = %v, want invalid_argument", endpoint, err)
		}
		if err := b.store.Endpoints.Enable(b.ctx, endpoint); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Enable(%q) = %v, want invalid_argument", endpoint, err)
		}
		if err := b.store.Endpoints.SetLimits(b.ctx, endpoint, store.Limits{MaxInFlight: 1}); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("SetLimits(%q) = %v, want invalid_argument", endpoint, err)
		}
		if _, err := b.store.Endpoints.Get(b.ctx, endpoint); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("Get(%q) = %v, want invalid_argument", endpoint, err)
		}
		if endpoint == "" {
			continue // BlockedKeys' "" is every endpoint
		}
		if _, err := b.store.Endpoints.BlockedKeys(b.ctx, endpoint, 10); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("BlockedKeys(%q) = %v, want invalid_argument", endpoint, err)
		}
	}
	if eps, err := b.store.Endpoints.List(b.ctx); err != nil || len(eps) != 1 {
		t.Fatalf("List = %+v, %v; want the one endpoint with limits", eps, err)
	}
}

// keyed returns enqueue parameters for a delivery with an ordering key.
func keyed(id, key string) store.EnqueueParams {
	p := delivery(id)
	p.OrderingKey = key
	return p
}

// testOrderingKeySendsOneAtATimeInOrder: within (endpoint, key) only the
// oldest unfinished delivery is claimable; a retry holds its key, not the
// endpoint; a delivery enqueued while its key's head is in flight waits
// for it.
func testOrderingKeySendsOneAtATimeInOrder(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, p := range []store.EnqueueParams{keyed("a1", "a"), keyed("a2", "a"), keyed("b1", "b"), delivery("free1"), keyed("a3", "a")} {
		b.enqueue(t, p)
	}
	first := b.claim(t, "w", 10, time.Minute)
	if got := ids(first); !slices.Equal(got, []string{"a1", "b1", "free1"}) {
		t.Fatalf("claimed %v, want each key's head and the delivery without a key", got)
	}
	a1 := first[0]
	if d, err := b.store.Outbox.Lookup(b.ctx, "a2", delivery("a2").Endpoint); err != nil || d.Held != store.HeldByKey || d.OrderingKey != "a" {
		t.Fatalf("a2 = %+v, %v; want held by its key a", d, err)
	}
	// A retry holds its key, not the endpoint.
	if err := b.retry(a1.Lease, retryParams{Code: courier.CodeReceiverUnavailable, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, delivery("free2"))
	b.enqueue(t, keyed("b2", "b"))
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"free2"}) {
		t.Fatalf("with a1 waiting to retry claimed %v, want free2 only (b2 waits for b1)", got)
	}
	b.clock.Advance(time.Second)
	again := b.claim(t, "w", 10, time.Minute)
	if got := ids(again); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("claimed %v, want a1's retry", got)
	}
	if err := b.complete(again[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	next := b.claim(t, "w", 10, time.Minute)
	if got := ids(next); !slices.Equal(got, []string{"a2"}) {
		t.Fatalf("after a1 succeeded claimed %v, want a2", got)
	}
	if err := b.complete(first[1].Lease, ""); err != nil { // b1
		t.Fatal(err)
	}
	if err := b.complete(next[0].Lease, ""); err != nil { // a2
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"b2", "a3"}) && !slices.Equal(got, []string{"a3", "b2"}) {
		t.Fatalf("claimed %v, want a3 and b2", got)
	}
}

// testEnqueueManyKeepsAKeysOrderAsListed: EnqueueMany returns its results
// in the order ps lists them, and the deliveries of one ordering key are
// sent in that order too, whatever their notification ids, although the
// batch is written by endpoint, key and notification id.
func testEnqueueManyKeepsAKeysOrderAsListed(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	ps := []store.EnqueueParams{keyed("k-z", "k"), delivery("free-b"), keyed("k-a", "k"), delivery("free-a"), keyed("k-m", "k")}
	got, err := inCommitted(t, b, func(tx *sqlx.Tx) ([]store.Enqueued, error) { return b.store.Outbox.EnqueueMany(b.ctx, tx, ps) })
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for i, e := range got {
		if d := b.get(t, e.ID); d.NotificationID != ps[i].NotificationID {
			t.Fatalf("result %d is %s, want %s: the order ps lists them", i, d.NotificationID, ps[i].NotificationID)
		}
	}
	var sent []string
	for range len(ps) {
		c := b.claim(t, "w", 10, time.Minute)
		for _, d := range c {
			if strings.HasPrefix(d.NotificationID, "k-") {
				sent = append(sent, d.NotificationID)
			}
			if err := b.complete(d.Lease, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if want := []string{"k-z", "k-a", "k-m"}; !slices.Equal(sent, want) {
		t.Fatalf("key k sent %v, want %v: the order EnqueueMany listed them in", sent, want)
	}
}

// testOrderingFailedHeadHoldsKey: under OrderingHoldKey (the default) a failed
// head holds its key, and the endpoint shows it blocked, until an operator
// redrives the head (sent again first) or cancels it (the next one goes).
// A delivery expiring at its claim is a failed head too.
// testOrderingQuarantinedHeadIsCancelled: a head quarantined at claim
// (its stored bytes altered) holds its key like a failed one; it cannot
// be redriven, and cancelling it lets the next delivery of the key go.
func testOrderingQuarantinedHeadIsCancelled(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	k1 := b.enqueue(t, keyed("k1", "k"))
	b.enqueue(t, keyed("k2", "k"))
	b.alterPayload(t, k1.ID, []byte(`{"altered":true}`))
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v, want none: k1 quarantined, k2 behind it", ids(got))
	}
	if d := b.get(t, k1.ID); d.Status != courier.StatusQuarantined {
		t.Fatalf("k1 is %s, want quarantined", d.Status)
	}
	if blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 10); err != nil || len(blocked) != 1 || blocked[0].Head != k1.ID {
		t.Fatalf("BlockedKeys = %+v, %v; want k held by k1", blocked, err)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: k1.ID}); err != nil || n != 0 {
		t.Fatalf("Redrive of the quarantined head = %d, %v; want 0 moved", n, err)
	}
	if err := b.store.Outbox.Cancel(b.ctx, k1.ID); err != nil {
		t.Fatalf("Cancel of the quarantined head: %v", err)
	}
	if d := b.get(t, k1.ID); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled head: %s %s", d.Status, d.LastErrorCode)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("after cancelling the quarantined head claimed %v, want k2", got)
	}
}

func testOrderingFailedHeadHoldsKey(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, id := range []string{"k1", "k2", "k3"} {
		b.enqueue(t, keyed(id, "k"))
	}
	c := b.claim(t, "w", 10, time.Minute)
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v behind a failed head", ids(got))
	}
	endpoint := delivery("k1").Endpoint
	blocked, err := b.store.Endpoints.BlockedKeys(b.ctx, "", 10)
	if err != nil || len(blocked) != 1 || blocked[0].OrderingKey != "k" || blocked[0].Head != c[0].DeliveryID || blocked[0].Endpoint != endpoint {
		t.Fatalf("BlockedKeys = %+v, %v", blocked, err)
	}
	if eh, err := b.store.Endpoints.Get(b.ctx, endpoint); err != nil || eh.BlockedKeys != 1 {
		t.Fatalf("Get = %+v, %v; want one blocked key", eh, err)
	}
	// Redrive: the head goes again, first.
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: c[0].DeliveryID}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	c = b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("after the redrive claimed %v, want k1 alone", got)
	}
	if eh, _ := b.store.Endpoints.Get(b.ctx, endpoint); eh.BlockedKeys != 0 {
		t.Fatalf("BlockedKeys = %d after the redrive, want 0", eh.BlockedKeys)
	}
	// It fails again; cancelling it lets k2 go.
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Outbox.Cancel(b.ctx, c[0].DeliveryID); err != nil {
		t.Fatalf("Cancel of the failed head: %v", err)
	}
	if d := b.get(t, c[0].DeliveryID); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled head: %s %s", d.Status, d.LastErrorCode)
	}
	c = b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("after cancelling the head claimed %v, want k2", got)
	}
	// A failed delivery that holds no key is cancelled too: an operator
	// dismisses it, and Health stops counting it.
	b.enqueue(t, delivery("plain"))
	p := b.claim(t, "w", 10, time.Minute)
	if err := b.fail(p[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	failed := health(t, b).Failed
	if err := b.store.Outbox.Cancel(b.ctx, p[0].DeliveryID); err != nil {
		t.Fatalf("Cancel of a failed delivery without a key = %v", err)
	}
	if d := b.get(t, p[0].DeliveryID); d.Status != courier.StatusSuppressed || d.LastErrorCode != courier.CodeCancelled {
		t.Fatalf("cancelled failed delivery: %s %s", d.Status, d.LastErrorCode)
	}
	if n := health(t, b).Failed; n != failed-1 {
		t.Fatalf("Health counts %d failed after the cancel, want %d", n, failed-1)
	}
	// k2's deadline passes while it is leased and retried: the claim that
	// reaches it ends it expired, and it holds the key.
	if err := b.retry(c[0].Lease, retryParams{Code: courier.CodeTimeout, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(retryHorizon)
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v past k2's deadline", ids(got))
	}
	if d := b.get(t, c[0].DeliveryID); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired {
		t.Fatalf("k2: %s %s, want failed expired", d.Status, d.LastErrorCode)
	}
	if blocked, _ := b.store.Endpoints.BlockedKeys(b.ctx, endpoint, 10); len(blocked) != 1 || blocked[0].Head != c[0].DeliveryID {
		t.Fatalf("BlockedKeys = %+v, want k2 holding k", blocked)
	}
}

// testOrderingSkipFailedLetsTheNextGo: under OrderingSkipFailed a failed head
// makes way for the next delivery of its key; redriven, it waits for the
// key's current head and goes next.
func testOrderingSkipFailedLetsTheNextGo(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{OrderingOnFailure: store.OrderingSkipFailed})
	for _, id := range []string{"k1", "k2", "k3"} {
		b.enqueue(t, keyed(id, "k"))
	}
	k1 := b.claim(t, "w", 10, time.Minute)[0]
	if err := b.fail(k1.Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	k2 := b.claim(t, "w", 10, time.Minute)
	if got := ids(k2); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("after k1 failed claimed %v, want k2", got)
	}
	if blocked, _ := b.store.Endpoints.BlockedKeys(b.ctx, "", 10); len(blocked) != 0 {
		t.Fatalf("BlockedKeys = %+v under OrderingSkipFailed", blocked)
	}
	if n, err := b.store.Outbox.Redrive(b.ctx, store.RedriveParams{ID: k1.DeliveryID}); err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v", n, err)
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v while k2 is in flight", ids(got))
	}
	if err := b.complete(k2[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("after k2 claimed %v, want the redriven k1 before k3", got)
	}
}

// testOrderingKeyInvalid: an ordering key is 1-256 bytes of visible
// ASCII, and part of a delivery's settings: enqueueing the same identity
// under another key is an idempotency collision.
func testOrderingKeyInvalid(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, k := range []string{"with space", "tab\tkey", string(make([]byte, 257)), "é"} {
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, keyed("n", k))
		tx.Rollback()
		if courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("OrderingKey %q: %v, want invalid_argument", k, err)
		}
	}
	b.enqueue(t, keyed("n", "order/7"))
	if e := b.enqueue(t, keyed("n", "order/7")); !e.Existed {
		t.Fatal("the same delivery with the same key was not a no-op")
	}
	for _, k := range []string{"order/8", ""} {
		tx := b.begin(t)
		_, err := b.store.Outbox.Enqueue(b.ctx, tx, keyed("n", k))
		tx.Rollback()
		if !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Errorf("the same delivery under key %q: %v, want CodeIdempotencyCollision", k, err)
		}
	}
}

// testOrderingKeyConcurrentEnqueuesTakeTurns: two transactions enqueueing
// the same key at once end with one head: the second waits for the first
// and queues behind it, and a rolled-back enqueue leaves the key free.
func testOrderingKeyConcurrentEnqueuesTakeTurns(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	rolled := b.begin(t)
	if _, err := b.store.Outbox.Enqueue(b.ctx, rolled, keyed("gone", "k")); err != nil {
		t.Fatal(err)
	}
	if err := rolled.Rollback(); err != nil {
		t.Fatal(err)
	}
	first := b.begin(t)
	if _, err := b.store.Outbox.Enqueue(b.ctx, first, keyed("k1", "k")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Go(func() {
		tx, err := b.db.BeginTxx(b.ctx, nil)
		if err == nil {
			if _, err = b.store.Outbox.Enqueue(b.ctx, tx, keyed("k2", "k")); err == nil {
				err = tx.Commit()
			} else {
				tx.Rollback()
			}
		}
		errs <- err
	})
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-errs; err != nil {
		t.Fatalf("second enqueue: %v", err)
	}
	c := b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("claimed %v, want k1 alone", got)
	}
	if err := b.complete(c[0].Lease, ""); err != nil {
		t.Fatal(err)
	}
	if got := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(got, []string{"k2"}) {
		t.Fatalf("claimed %v, want k2", got)
	}
}

// testOrderingKeySurvivesLeaseExpiry: a head whose worker died keeps its
// key: the reclaimed head is retried first, and a head reclaimed with its
// budget spent fails and holds the key.
func testOrderingKeySurvivesLeaseExpiry(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	p := keyed("k1", "k")
	p.MaxAttempts = 2
	b.enqueue(t, p)
	b.enqueue(t, keyed("k2", "k"))
	for attempt := 1; attempt <= 2; attempt++ {
		c := b.claim(t, "w", 10, time.Minute)
		if got := ids(c); !slices.Equal(got, []string{"k1"}) {
			t.Fatalf("attempt %d: claimed %v, want k1", attempt, got)
		}
		b.clock.Advance(2 * time.Minute) // the worker died
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v behind a head whose budget ran out", ids(got))
	}
	if blocked, _ := b.store.Endpoints.BlockedKeys(b.ctx, "", 10); len(blocked) != 1 {
		t.Fatalf("BlockedKeys = %+v, want k held by k1", blocked)
	}
}

// testPublishOrderingKey: a publish's ordering key orders each
// subscription's deliveries of the key.
func testPublishOrderingKey(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	sub, err := b.store.Subscriptions.Create(b.ctx, b.db, subscription("t", "https://sub.example/hooks", "k", "order.updated"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e1", "e2"} {
		tx := b.begin(t)
		if _, err := b.store.Outbox.Publish(b.ctx, tx, store.PublishParams{
			Tenant: "t", EventType: "order.updated", EventID: id, Payload: []byte(`{"id":"` + id + `"}`), OrderingKey: "order-7",
		}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	c := b.claim(t, "w", 10, time.Minute)
	if got := ids(c); !slices.Equal(got, []string{fmt.Sprintf("e1:%d", sub.ID)}) {
		t.Fatalf("claimed %v, want e1 alone", got)
	}
}

// testClaimRefusesAnOwnerOutsideTheFormat: a claim's owner is 1-256
// bytes of visible ASCII, as client.Config.Owner; another (a NUL or
// invalid UTF-8 among them, which PostgreSQL would fail on) is refused
// with invalid_argument on both engines, and nothing is leased.
func testClaimRefusesAnOwnerOutsideTheFormat(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("n-1"))
	for _, owner := range []string{"", "w" + nul, "w" + notUTF8, "worker one", strings.Repeat("w", 257)} {
		c, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: owner, Limit: 1, Lease: time.Minute})
		if courier.CodeOf(err) != courier.CodeInvalidArgument || len(c) != 0 {
			t.Errorf("Claim by %q = %v, %v; want invalid_argument", owner, ids(c), err)
		}
	}
	if got := ids(b.claim(t, "w", 1, time.Minute)); !slices.Equal(got, []string{"n-1"}) {
		t.Fatalf("claimed %v after the refused claims, want n-1", got)
	}
}

// testSettleRefusesAStatusNoAnswerCarries: an outcome's HTTP status is
// 0 (none) or what an HTTP/1 status line holds, three digits; another
// (one past 2^31 does not fit PostgreSQL's integer columns, and SQLite
// kept it) is refused alone, on every engine, and the outcomes settled with it
// are applied. On PostgreSQL it failed the whole settle, so that every
// delivery in the batch stayed leased until its lease ran out.
func testSettleRefusesAStatusNoAnswerCarries(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("n-1"))
	b.enqueue(t, delivery("n-2"))
	c := b.claimCapped(t, "w", 2, 0)
	if len(c) != 2 {
		t.Fatalf("claimed %v, want n-1 and n-2", ids(c))
	}
	for _, status := range []int{-1, 1000, math.MaxInt} {
		st, err := b.proto().Settle(b.ctx,
			protocol.Outcome{Lease: c[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: status})
		if err != nil || courier.CodeOf(st[0].Err) != courier.CodeInvalidArgument {
			t.Errorf("settle with HTTP status %d = %+v, %v; want invalid_argument", status, st, err)
		}
	}
	st, err := b.proto().Settle(b.ctx,
		protocol.Outcome{Lease: c[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: math.MaxInt},
		protocol.Outcome{Lease: c[1].Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 999})
	if err != nil || courier.CodeOf(st[0].Err) != courier.CodeInvalidArgument || st[1].Err != nil || st[1].Status != courier.StatusFailed {
		t.Fatalf("settle of an outcome with HTTP status MaxInt and a valid one = %+v, %v; want the first refused, the second failed", st, err)
	}
	if d := b.get(t, c[0].DeliveryID); d.Status != courier.StatusLeased || d.LastHTTPStatus != 0 {
		t.Fatalf("the refused outcome's delivery is %s (HTTP %d), want still leased", d.Status, d.LastHTTPStatus)
	}
	if d := b.get(t, c[1].DeliveryID); d.LastHTTPStatus != 999 {
		t.Fatalf("the applied outcome's delivery has HTTP %d, want 999", d.LastHTTPStatus)
	}
}

// testSettleRefusesCodesOutsideTheFormat: a retry or failure whose code is
// not a code (^[a-z][a-z0-9_.-]{0,127}$), or an outcome whose lease token
// is none a claim hands out (on PostgreSQL a NUL would fail the whole
// batch), is refused with invalid_argument, and the delivery stays leased
// as it was: nothing is written.
func testSettleRefusesCodesOutsideTheFormat(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("n-1"))
	c := b.claimCapped(t, "w", 1, 0)
	if len(c) != 1 {
		t.Fatalf("claimed %v, want n-1", ids(c))
	}
	for _, oc := range []protocol.Outcome{
		{Result: protocol.Retry, Code: "Not A Code"},
		{Result: protocol.Failed, Code: "receiver rejected"},
		{Result: protocol.Failed, Code: courier.Code("x" + strings.Repeat("y", 128))},
		{Result: protocol.Retry, Code: ""},
		{Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, RetryDelay: -time.Second},
		{Result: protocol.Succeeded, RemoteCode: "Not A Code"},
	} {
		oc.Lease = c[0].Lease
		if err := b.settle(oc); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("settle %s with code %q = %v, want invalid_argument", oc.Result, oc.Code, err)
		}
	}
	for _, token := range []string{"", c[0].Token + nul, c[0].Token + notUTF8} {
		l := c[0].Lease
		l.Token = token
		if err := b.complete(l, ""); courier.CodeOf(err) != courier.CodeInvalidArgument {
			t.Errorf("settle with lease token %q = %v, want invalid_argument", token, err)
		}
	}
	if d := b.get(t, c[0].DeliveryID); d.Status != courier.StatusLeased || d.Attempts != 1 || d.LastErrorCode != "" {
		t.Fatalf("after the refused settles: %s, %d attempts, code %q; want still leased, 1 attempt, no code", d.Status, d.Attempts, d.LastErrorCode)
	}

	// Settled together (a worker group-commits unrelated deliveries), an
	// invalid outcome is refused alone: the other is applied.
	b.enqueue(t, delivery("n-2"))
	c2 := b.claimCapped(t, "w", 1, 0)
	if len(c2) != 1 {
		t.Fatalf("claimed %v, want n-2", ids(c2))
	}
	badToken := c[0].Lease
	badToken.Token += nul
	st, err := b.proto().Settle(b.ctx,
		protocol.Outcome{Lease: c[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, RetryDelay: -time.Second},
		protocol.Outcome{Lease: badToken, Result: protocol.Failed, Code: courier.CodeReceiverRejected},
		protocol.Outcome{Lease: c2[0].Lease, Result: protocol.Succeeded, AckSHA256: ack.Digest(nil)})
	if err != nil || courier.CodeOf(st[0].Err) != courier.CodeInvalidArgument || courier.CodeOf(st[1].Err) != courier.CodeInvalidArgument ||
		st[2].Err != nil || st[2].Status != courier.StatusSucceeded {
		t.Fatalf("settle of two invalid outcomes and a valid one = %+v, %v; want the first two refused, the third succeeded", st, err)
	}
	if d := b.get(t, c[0].DeliveryID); d.Status != courier.StatusLeased {
		t.Fatalf("the refused outcome's delivery is %s, want still leased", d.Status)
	}
}

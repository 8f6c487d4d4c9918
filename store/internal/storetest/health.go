package storetest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// testHealthPrecedence: with these blocking conditions present, Health's
// code is the first of integrity_mismatch, leases_expired,
// contract_changed, deliveries_failed that holds: what stops deliveries
// now before what already happened (see Outbox.Health for why courier
// differs from the reference's order); resolving each in turn reveals the
// next. endpoint_disabled and deliveries_overdue, which come between the
// last two, have tests of their own.
func testHealthPrecedence(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	// A failed delivery.
	b.enqueue(t, delivery("failed"))
	c := b.claim(t, "w", 1, time.Minute)
	if err := b.fail(c[0].Lease, courier.CodeReceiverRejected, 400); err != nil {
		t.Fatal(err)
	}
	// A command held back by a changed contract.
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{"n":1}`)})
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
		t.Fatal(err)
	}
	// A quarantined delivery.
	q := b.enqueue(t, delivery("tampered"))
	b.alterPayload(t, q.ID, []byte(`{}`))
	// A lease that runs out unsettled.
	b.enqueue(t, delivery("stalled"))
	if c := b.claim(t, "w", 10, 10*time.Second); len(c) != 1 || c[0].NotificationID != "stalled" {
		t.Fatalf("claim = %+v, want the stalled delivery alone", c)
	}
	b.clock.Advance(20 * time.Second)

	want := func(code courier.Code) {
		t.Helper()
		if h := health(t, b); h.Status != store.HealthBlocked || h.Code != code {
			t.Fatalf("Health = %s/%s (quarantined %d, expired leases %d, mismatches %d, failed %d), want blocked/%s",
				h.Status, h.Code, h.Counts[courier.StatusQuarantined], h.ExpiredLeases, h.ContractMismatches, h.Failed, code)
		}
	}
	want(courier.CodeIntegrity)
	if _, err := b.db.ExecContext(b.ctx, b.db.Rebind("DELETE FROM courier_outbox WHERE id = ?"), q.ID); err != nil {
		t.Fatal(err)
	}
	want(courier.CodeLeasesExpired)
	b.claim(t, "w", 10, time.Minute) // reclaims the lease, and claims its retry
	want(courier.CodeContractChanged)
	if n, err := b.store.Contracts.FailMismatched(b.ctx, sourceEndpoint); err != nil || n != 1 {
		t.Fatalf("FailMismatched = %d, %v", n, err)
	}
	want(courier.CodeFailedPresent)
}

// testHealthCountsOperations: Health counts command deliveries by
// operation, each by status, every operation and status present, zero or
// not; other deliveries are not commands.
func testHealthCountsOperations(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, cmd := range []struct{ op, id string }{{"change", "c1"}, {"change", "c2"}, {"tombstone", "t1"}} {
		body := `{"n":1}`
		if cmd.op != "change" {
			body = "null"
		}
		b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, cmd.op, cmd.id, digestA, 5, body)})
	}
	b.enqueue(t, delivery("not-a-command"))
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		switch c.NotificationID {
		case "change:c1":
			if err := b.complete(c.Lease, "ack"); err != nil {
				t.Fatal(err)
			}
		case "tombstone:t1":
			if err := b.fail(c.Lease, courier.CodeReceiverRejected, 400); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := health(t, b)
	zero := func() map[courier.Status]int {
		m := map[courier.Status]int{}
		for _, st := range courier.Statuses() {
			m[st] = 0
		}
		return m
	}
	want := map[string]map[courier.Status]int{"change": zero(), "cancellation": zero(), "tombstone": zero()}
	want["change"][courier.StatusSucceeded], want["change"][courier.StatusLeased] = 1, 1
	want["tombstone"][courier.StatusFailed] = 1
	if len(h.Operations) != len(want) {
		t.Fatalf("Operations = %v, want %v", h.Operations, want)
	}
	for op, counts := range want {
		if !maps.Equal(h.Operations[op], counts) {
			t.Fatalf("Operations[%s] = %v, want %v", op, h.Operations[op], counts)
		}
	}
}

// testContractsList: Contracts.List and Get say, per pinned endpoint,
// how many unfinished deliveries a changed pin holds back.
func testContractsList(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	const other = "https://other-source.example/commands"
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r1", digestA, 5, `{"n":1}`)})
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "r2", digestA, 5, `{"n":2}`)})
	b.mustEnqueueCommand(t, store.CommandParams{Endpoint: other, Payload: command(t, "change", "r1", digestA, 5, `{"n":1}`)})
	if err := b.store.Contracts.Pin(b.ctx, sourceEndpoint, digestB); err != nil {
		t.Fatal(err)
	}
	list, err := b.store.Contracts.List(b.ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	got := map[string]store.Contract{}
	for _, k := range list {
		got[k.Endpoint] = k
	}
	if k := got[sourceEndpoint]; k.CapabilitiesSHA256 != digestB || k.Mismatched != 2 || !k.PinnedAt.Equal(b.clock.Now()) {
		t.Fatalf("re-pinned endpoint = %+v, want digest b with 2 mismatched", k)
	}
	if k := got[other]; k.CapabilitiesSHA256 != digestA || k.Mismatched != 0 {
		t.Fatalf("other endpoint = %+v, want digest a with none mismatched", k)
	}
	if k, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); err != nil || k.Mismatched != 2 {
		t.Fatalf("Get = %+v, %v; want 2 mismatched", k, err)
	}
}

// testHealthCountsABacklogWaitingForRoom: the deliveries a claim parks
// because their endpoint is at a worker's share of it are a backlog
// waiting to be sent, and Health's Due and OldestDueAge count them, so a
// lag alert sees a slow endpoint's backlog; those parked behind an open
// endpoint are held back, and are not counted.
func testHealthCountsABacklogWaitingForRoom(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Hour}})
	for i := range 20 {
		b.enqueue(t, at(fastEndpoint, fmt.Sprintf("f-%d", i)))
	}
	for i := range 3 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i)))
	}
	b.clock.Advance(time.Hour)
	if h := health(t, b); h.Due != 23 || h.OldestDueAge != time.Hour {
		t.Fatalf("before a claim: due %d, oldest %v; want 23, 1h", h.Due, h.OldestDueAge)
	}
	c := b.claimCapped(t, "w", 10, 2) // two of each endpoint; the rest parked
	if len(c) != 4 {
		t.Fatalf("claim leased %v, want two of each endpoint", ids(c))
	}
	if h := health(t, b); h.Due != 19 || h.OldestDueAge != time.Hour || h.Status != store.HealthOK {
		t.Fatalf("after a claim at the share: due %d, oldest %v, %s; want the 19 parked, 1h, ok", h.Due, h.OldestDueAge, h.Status)
	}
	for _, d := range c {
		if d.Endpoint == slowEndpoint { // the breaker opens: its parked delivery is held back
			if err := b.retry(d.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Minute}); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if h := health(t, b); h.Due != 18 || h.OldestDueAge != time.Hour {
		t.Fatalf("after the slow endpoint opened: due %d, oldest %v; want the fast endpoint's 18, 1h", h.Due, h.OldestDueAge)
	}
}

// testHealthCountsNoBacklogOfAHeldEndpointBeforeAClaim: Due and
// OldestDueAge leave out the deliveries of an endpoint that is disabled
// or open, as none is sent until it is enabled or a probe gets through.
// They did so only once a claim had parked them: right after a Disable
// (or a breaker opening) its deliveries still in the due index were
// counted as due, a backlog for lag alerts that no worker would send, and
// the figures changed at the next claim with nothing sent. Overdue counts
// them, parked or not: the first claim to reach them ends them.
func testHealthCountsNoBacklogOfAHeldEndpointBeforeAClaim(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Hour}})
	for i := range 3 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i)))
	}
	b.clock.Advance(time.Hour)
	for i := range 2 {
		b.enqueue(t, at(fastEndpoint, fmt.Sprintf("f-%d", i)))
	}
	b.clock.Advance(time.Minute)
	if h := health(t, b); h.Due != 5 || h.OldestDueAge != time.Hour+time.Minute {
		t.Fatalf("before the disable: due %d, oldest %v; want 5, 1h1m", h.Due, h.OldestDueAge)
	}
	if err := b.store.Endpoints.Disable(b.ctx, slowEndpoint); err != nil {
		t.Fatal(err)
	}
	if h := health(t, b); h.Due != 2 || h.OldestDueAge != time.Minute || h.Code != courier.CodeEndpointDisabled {
		t.Fatalf("right after the disable: due %d, oldest %v, %s; want the fast endpoint's 2, 1m, endpoint_disabled", h.Due, h.OldestDueAge, h.Code)
	}
	if err := b.store.Endpoints.Enable(b.ctx, slowEndpoint); err != nil {
		t.Fatal(err)
	}
	if h := health(t, b); h.Due != 5 || h.Status != store.HealthOK {
		t.Fatalf("after the enable: due %d, %s; want 5, ok", h.Due, h.Status)
	}
	// The slow endpoint's breaker opens on a 503 to one of its
	// deliveries; the other two stay in the due index, no claim having
	// reached them since.
	var slow []protocol.Claimed
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if c.Endpoint == slowEndpoint {
			slow = append(slow, c)
			continue
		}
		if err := b.complete(c.Lease, "ack"); err != nil {
			t.Fatal(err)
		}
	}
	if len(slow) != 3 {
		t.Fatalf("claimed %d of the slow endpoint's deliveries, want 3", len(slow))
	}
	for i, c := range slow {
		if i == 0 {
			if err := b.retry(c.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := b.retry(c.Lease, retryParams{Code: courier.CodeWorkerStopped, Delay: time.Second}); err != nil { // given back
			t.Fatal(err)
		}
	}
	b.clock.Advance(time.Second)
	if eh, _ := b.store.Endpoints.Get(b.ctx, slowEndpoint); eh.State != store.EndpointOpen {
		t.Fatalf("the slow endpoint is %s after a 503, want open", eh.State)
	}
	if h := health(t, b); h.Due != 0 || h.OldestDueAge != 0 || h.Counts[courier.StatusRetryWait] != 3 {
		t.Fatalf("with the slow endpoint open: due %d, oldest %v, retrying %d; want 0, 0, 3", h.Due, h.OldestDueAge, h.Counts[courier.StatusRetryWait])
	}
	// Past their deadline they are overdue, parked or not.
	if err := b.store.Endpoints.Disable(b.ctx, slowEndpoint); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(100 * 24 * time.Hour)
	if h := health(t, b); h.Due != 0 || h.Overdue != 3 {
		t.Fatalf("past their deadline: due %d, overdue %d; want 0, 3", h.Due, h.Overdue)
	}
}

// testHealthCountsTheBacklogOfAnEndpointPastItsCoolDown: an open
// endpoint holds its deliveries back while its cool-down runs, and a
// half-open one while its probe is in flight; past that the next claims
// probe it, and its due deliveries are a backlog waiting for a worker
// like any other. Health left them out of Due and OldestDueAge for as
// long as the endpoint's record said open: after a probe that found
// nothing to send, which leaves the endpoint open until a probe gets
// through, a backlog of it hours old read as none, Health ok, while no
// worker ran.
func testHealthCountsTheBacklogOfAnEndpointPastItsCoolDown(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	first := b.enqueue(t, at(slowEndpoint, "s-0"))
	got := b.claim(t, "w", 10, time.Minute)
	if len(got) != 1 {
		t.Fatalf("claimed %v, want the one delivery", ids(got))
	}
	if err := b.retry(got[0].Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Second)
	if h := health(t, b); h.Due != 0 {
		t.Fatalf("during the cool-down: due %d, want 0", h.Due)
	}
	b.clock.Advance(time.Minute)
	if h := health(t, b); h.Due != 1 || h.OldestDueAge != time.Minute {
		t.Fatalf("past the cool-down: due %d, oldest %v; want 1, 1m", h.Due, h.OldestDueAge)
	}
	// A probe that finds nothing to send leaves the endpoint open.
	if err := b.store.Outbox.Cancel(b.ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if got := b.claim(t, "w", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %v, want none", ids(got))
	}
	if eh, err := b.store.Endpoints.Get(b.ctx, slowEndpoint); err != nil || eh.State != store.EndpointOpen {
		t.Fatalf("after a probe that found nothing the endpoint is %s (%v), want open", eh.State, err)
	}
	for i := range 5 {
		b.enqueue(t, at(slowEndpoint, fmt.Sprintf("s-%d", i+1)))
	}
	b.clock.Advance(6 * time.Hour)
	if h := health(t, b); h.Due != 5 || h.OldestDueAge != 6*time.Hour {
		t.Fatalf("6h with no worker: due %d, oldest %v; want 5, 6h", h.Due, h.OldestDueAge)
	}
	// The claims park them and probe the endpoint: while the probe is in
	// flight the others are held back.
	var probes []protocol.Claimed
	for range 2 {
		probes = append(probes, b.claim(t, "w", 10, time.Minute)...)
	}
	if len(probes) != 1 {
		t.Fatalf("two claims leased %v, want one probe", ids(probes))
	}
	if h := health(t, b); h.Due != 0 {
		t.Fatalf("with the probe in flight: due %d, want 0", h.Due)
	}
}

package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// modelEndpoint is what BreakerConfig, EndpointState and EndpointHealth
// say of one endpoint's breaker.
type modelEndpoint struct {
	state        store.EndpointState
	failures     int
	failingSince time.Time
	openUntil    time.Time // open: its cool-down's end; half open: its probe's lease's end
	reason       courier.Code
	probe        int64 // half open: the probe in flight (0 when given back or settled without an answer)
	again        bool  // half open: its probe was given back or settled without an answer
	idle         bool  // open: its last probe found nothing to send
}

// modelDelivery is one delivery as the model sees it.
type modelDelivery struct {
	id          int64
	endpoint    string
	maxAttempts int
	attempts    int
	done        bool
	parked      bool
	lease       *protocol.Lease // while leased
}

// breakerModel drives a store with a fake clock and keeps what its
// endpoints' breakers should be.
type breakerModel struct {
	t      *testing.T
	b      *bundle
	cfg    store.BreakerConfig
	heard  *heard
	eps    map[string]*modelEndpoint
	ds     []*modelDelivery
	want   []store.Event
	log    []string
	serial int
}

func (m *breakerModel) now() time.Time { return m.b.clock.Now() }

func (m *breakerModel) ep(e string) *modelEndpoint {
	if m.eps[e] == nil {
		m.eps[e] = &modelEndpoint{state: store.EndpointClosed}
	}
	return m.eps[e]
}

func (m *breakerModel) emit(e string, from, to store.EndpointState, code courier.Code) {
	if from != to {
		m.want = append(m.want, endpointEvent(e, from, to, code))
	}
}

func (m *breakerModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("after steps:\n  %s\n%s", joinLines(m.log), fmt.Sprintf(format, args...))
}

func joinLines(l []string) string {
	out := ""
	for i, s := range l {
		if i > 0 {
			out += "\n  "
		}
		out += s
	}
	return out
}

// closeUp is a breaker closing: its record deleted.
func (me *modelEndpoint) closeUp() {
	*me = modelEndpoint{state: store.EndpointClosed}
}

// record applies a settled outcome to the model's breaker, from the docs
// of BreakerConfig, and returns the move it made, as the settle reports it
// (protocol.Settled.Breaker).
func (m *breakerModel) record(d *modelDelivery, oc protocol.Outcome) protocol.BreakerMove {
	me := m.ep(d.endpoint)
	now := m.now()
	gone := oc.Code == courier.CodeEndpointGone
	health := oc.Result != protocol.Succeeded && !gone && (slices.Contains([]courier.Code{
		courier.CodeReceiverUnavailable, courier.CodeRequestTimeout, courier.CodeRateLimited, courier.CodeTimeout, courier.CodeNetwork,
	}, oc.Code) || oc.HTTPStatus >= 500 || oc.HTTPStatus == 408 || oc.HTTPStatus == 425 || oc.HTTPStatus == 429)
	answered := oc.Result != protocol.Succeeded && !gone && !health && oc.HTTPStatus != 0
	probe := me.state == store.EndpointHalfOpen && me.probe == d.id
	from := me.state
	switch {
	case me.state == store.EndpointDisabled:
	case oc.Result == protocol.Succeeded:
		me.closeUp()
	case answered:
		if me.state == store.EndpointClosed || probe {
			me.closeUp()
		}
	case gone:
		me.state, me.reason = store.EndpointDisabled, courier.CodeEndpointGone
		me.idle = false
	case health:
		me.failures++
		if me.failingSince.IsZero() {
			me.failingSince = now
		}
		switch {
		case now.Sub(me.failingSince) >= m.cfg.DisableAfter:
			me.state, me.reason = store.EndpointDisabled, courier.CodeEndpointDisabled
		case me.state == store.EndpointHalfOpen && !probe:
			// the probe in flight (or the one to make again) decides
		case me.state == store.EndpointHalfOpen || me.failures >= m.cfg.Threshold:
			me.state, me.reason, me.openUntil = store.EndpointOpen, oc.Code, now.Add(m.cfg.Cooldown)
			me.probe, me.again, me.idle = 0, false, false
		default:
			me.reason = oc.Code
		}
	default: // no answer: nothing learnt of the endpoint
		if probe {
			me.probe, me.again, me.openUntil = 0, true, now
		}
	}
	if me.state != store.EndpointHalfOpen {
		me.probe, me.again = 0, false
	}
	m.emit(d.endpoint, from, me.state, me.reason)
	var moved protocol.BreakerMove
	if from != me.state {
		moved = protocol.BreakerMove{From: string(from), To: string(me.state), Code: me.reason}
		if me.state == store.EndpointOpen {
			moved.Until = me.openUntil
		}
	}
	return moved
}

// claim claims with the model's expectations of each endpoint.
func (m *breakerModel) claim(owner string, lease time.Duration, capPer int) {
	now := m.now()
	// Leases run out first: their deliveries are due again, or failed.
	for _, d := range m.ds {
		if d.lease != nil && !d.lease.ExpiresAt.After(now) {
			d.lease = nil
			if d.attempts >= d.maxAttempts {
				d.done = true
			}
		}
	}
	c, err := m.b.proto().Claim(m.b.ctx, protocol.ClaimParams{Owner: owner, Limit: 50, Lease: lease, EndpointCap: capPer})
	if err != nil {
		m.fatalf("Claim: %v", err)
	}
	got := map[string][]protocol.Claimed{}
	for _, l := range c {
		got[l.Endpoint] = append(got[l.Endpoint], l)
	}
	for _, e := range []string{slowEndpoint, fastEndpoint} {
		me := m.ep(e)
		var due []*modelDelivery
		owned := 0
		parked := false
		for _, d := range m.ds {
			switch {
			case d.endpoint != e || d.done:
			case d.lease != nil:
				if d.lease.Owner == owner {
					owned++
				}
			default:
				due = append(due, d)
				parked = parked || d.parked
			}
		}
		room := len(due)
		if capPer > 0 {
			room = min(room, capPer-owned)
		}
		room = max(room, 0)
		want := 0
		from, until, probing := me.state, me.openUntil, me.probe != 0
		switch me.state {
		case store.EndpointClosed:
			want = room
		case store.EndpointOpen, store.EndpointHalfOpen:
			dueProbe := me.state == store.EndpointHalfOpen && !me.openUntil.After(now) ||
				me.state == store.EndpointOpen && !me.openUntil.After(now) && (!me.idle || parked)
			if me.state == store.EndpointHalfOpen && me.again {
				dueProbe = true
			}
			if !dueProbe {
				break
			}
			lapsed := me.state == store.EndpointHalfOpen && !me.again
			var code courier.Code
			if lapsed {
				code = courier.CodeLeaseExpired
			}
			switch {
			case capPer > 0 && capPer-owned <= 0: // no room: open, a later claim probes
				// Its cool-down's end kept: a probe given back at this
				// instant reads as one that found nothing, and waits for
				// the deliveries this claim parks.
				me.state, me.probe, me.again, me.idle = store.EndpointOpen, 0, false, me.openUntil.Equal(now)
				m.emit(e, from, me.state, code)
			case len(due) == 0: // nothing to send: open until a delivery comes
				me.state, me.openUntil, me.probe, me.again, me.idle = store.EndpointOpen, now, 0, false, true
				m.emit(e, from, me.state, code)
			default:
				want = 1
				me.state, me.openUntil, me.again, me.idle = store.EndpointHalfOpen, now.Add(lease), false, false
				m.emit(e, from, me.state, "")
			}
		}
		switch n := len(got[e]); {
		case from == store.EndpointOpen && until.After(now) && n > 0:
			m.fatalf("claim leased %d of %s, open until %v: sent before its cool-down ended", n, e, until)
		case from == store.EndpointHalfOpen && probing && until.After(now) && n > 0:
			m.fatalf("claim leased %d of %s with its probe %d in flight", n, e, me.probe)
		case from != store.EndpointClosed && n > 1:
			m.fatalf("claim leased %d of %s, %s: more than one probe", n, e, from)
		}
		if len(got[e]) != want {
			m.fatalf("claim by %s (lease %v, cap %d) leased %d of %s (%s before), want %d; endpoint now %+v",
				owner, lease, capPer, len(got[e]), e, from, want, m.health(e))
		}
		leased := map[int64]bool{}
		for _, l := range got[e] {
			d := m.find(l.DeliveryID)
			if d == nil || d.done || d.lease != nil {
				m.fatalf("claim leased %d, which the model has as done or leased", l.DeliveryID)
			}
			d.lease, d.parked = &l.Lease, false
			d.attempts++
			leased[d.id] = true
			if me.state == store.EndpointHalfOpen {
				me.probe = d.id
				if !l.ExpiresAt.Equal(me.openUntil) {
					m.fatalf("probe's lease ends %v, want %v", l.ExpiresAt, me.openUntil)
				}
			}
		}
		for _, d := range due {
			if !leased[d.id] {
				d.parked = true // a claim parks what it cannot lease
			}
		}
	}
	m.log = append(m.log, fmt.Sprintf("claim %s lease=%v cap=%d -> %d", owner, lease, capPer, len(c)))
}

func (m *breakerModel) find(id int64) *modelDelivery {
	for _, d := range m.ds {
		if d.id == id {
			return d
		}
	}
	return nil
}

func (m *breakerModel) health(e string) store.EndpointHealth {
	h, err := m.b.store.Endpoints.Get(m.b.ctx, e)
	if err != nil {
		m.fatalf("Get: %v", err)
	}
	return h
}

// check compares the stored breakers and the events heard with the
// model's.
func (m *breakerModel) check() {
	m.t.Helper()
	got := m.heard.take()
	// One claim probes endpoints in its own order: each endpoint's events
	// are compared in order, not how they interleave.
	byEndpoint := func(a, b store.Event) int { return strings.Compare(a.Endpoint, b.Endpoint) }
	slices.SortStableFunc(got, byEndpoint)
	slices.SortStableFunc(m.want, byEndpoint)
	if len(got) != len(m.want) || (len(got) > 0 && !slices.Equal(got, m.want)) {
		m.fatalf("events %+v, want %+v", got, m.want)
	}
	m.want = nil
	for _, e := range []string{slowEndpoint, fastEndpoint} {
		me, h := m.ep(e), m.health(e)
		bad := h.State != me.state || h.ConsecutiveFailures != me.failures || !h.FailingSince.Equal(me.failingSince) ||
			h.Reason != me.reason
		switch me.state {
		case store.EndpointOpen:
			bad = bad || !h.OpenUntil.Equal(me.openUntil)
		case store.EndpointHalfOpen:
			bad = bad || !h.OpenUntil.Equal(me.openUntil)
		}
		inFlight := 0
		for _, d := range m.ds {
			if d.endpoint == e && d.lease != nil {
				inFlight++
			}
		}
		bad = bad || h.InFlight != inFlight
		if bad {
			m.fatalf("%s is %+v, want %+v (in flight %d)", e, h, *me, inFlight)
		}
	}
}

// testBreakerFollowsItsModel drives two endpoints through seeded random
// enqueues, claims, outcomes, releases, clock moves and operators'
// Disable and Enable, and after each step compares each endpoint's
// breaker, and the EventEndpoint events reported, with a model made from
// BreakerConfig's doc: Threshold failures that speak of the endpoint's
// health open it for Cooldown; then one probe (half open), and no other
// delivery, is sent; the probe's success or answer closes it, its failure
// opens it again, its being given back or settled without an answer makes
// the next claim probe again (no lease_expired: nothing ran out), its
// lease running out too; a 410 or DisableAfter of failures disables it.
func testBreakerFollowsItsModel(t *testing.T, open OpenFunc) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			runBreakerModel(t, open, seed)
		})
	}
}

func runBreakerModel(t *testing.T, open OpenFunc, seed uint64) {
	cfg := store.BreakerConfig{Threshold: 2, Cooldown: 5 * time.Second, DisableAfter: 30 * time.Minute}
	h := hearing(store.EventEndpoint)
	m := &breakerModel{t: t, b: setup(t, open, store.Config{Breaker: cfg, Hook: h.hook}), cfg: cfg, heard: h, eps: map[string]*modelEndpoint{}}
	rng := rand.New(rand.NewPCG(seed, 30))
	endpoints := []string{slowEndpoint, fastEndpoint}
	type outcome struct {
		result protocol.Result
		code   courier.Code
		status int
	}
	outcomes := []outcome{
		{protocol.Succeeded, "", 200},
		{protocol.Retry, courier.CodeReceiverUnavailable, 503},
		{protocol.Retry, courier.CodeRateLimited, 429},
		{protocol.Retry, courier.CodeTimeout, 0},
		{protocol.Retry, courier.CodeNetwork, 0},
		{protocol.Retry, courier.CodeReceiverUnavailable, 503},
		{protocol.Retry, courier.CodeTimeout, 0},
		{protocol.Failed, courier.CodeReceiverRejected, 400},
		{protocol.Failed, courier.CodeEndpointGone, 410},
		{protocol.Retry, "maintenance", 503}, // a worker's own Classify: counts all the same
		{protocol.Retry, courier.CodeRequestTimeout, 408},
		{protocol.Retry, "too_early", 425},
		{protocol.Failed, courier.CodeReceiverRejected, 301},
		{protocol.Retry, courier.CodeWorkerStopped, 0},
		{protocol.Failed, courier.CodeSigningFailed, 0},
	}
	// live are the leases not run out; a third of the time a half-open
	// endpoint's probe alone, or its late attempts (leased before it
	// opened) alone: those are what the breaker turns on.
	live := func() []*modelDelivery {
		var l, probes, late []*modelDelivery
		for _, d := range m.ds {
			if d.lease == nil || !d.lease.ExpiresAt.After(m.now()) {
				continue
			}
			l = append(l, d)
			if me := m.ep(d.endpoint); me.state == store.EndpointHalfOpen && me.probe == d.id {
				probes = append(probes, d)
			} else if me.state != store.EndpointClosed {
				late = append(late, d)
			}
		}
		switch k := rng.IntN(3); {
		case k == 0 && len(probes) > 0:
			return probes
		case k == 1 && len(late) > 0:
			return late
		}
		return l
	}
	// Odd seeds are slow workers: their leases, the probes' too, run out
	// more often than they are settled.
	settles := []int{14, 3}[seed%2]
	for range 300 {
		switch k := rng.IntN(27 + settles); {
		case k < 6: // enqueue
			outstanding := 0
			for _, d := range m.ds {
				if !d.done {
					outstanding++
				}
			}
			if outstanding >= []int{8, 3}[seed%2] {
				continue
			}
			m.serial++
			e := endpoints[rng.IntN(2)]
			p := at(e, fmt.Sprintf("d%d", m.serial))
			p.MaxAttempts = []int{1, 2, 1000}[rng.IntN(3)]
			enq := m.b.enqueue(t, p)
			m.ds = append(m.ds, &modelDelivery{id: enq.ID, endpoint: e, maxAttempts: p.MaxAttempts})
			m.log = append(m.log, fmt.Sprintf("enqueue %d to %s (max %d)", enq.ID, e, p.MaxAttempts))
		case k < 14: // claim
			lease := []time.Duration{time.Minute, 3001 * time.Millisecond}[rng.IntN(2)] // never ending together with a lease of the other length: whole seconds pass
			m.claim([]string{"w1", "w2"}[rng.IntN(2)], lease, rng.IntN(2))
		case k < 14+settles: // settle
			l := live()
			if len(l) == 0 {
				continue
			}
			d := l[rng.IntN(len(l))]
			o := outcomes[rng.IntN(len(outcomes))]
			switch me := m.ep(d.endpoint); {
			case o.code == courier.CodeEndpointGone && rng.IntN(4) > 0:
				o = outcomes[1] // a 410 now and then
			case me.state == store.EndpointHalfOpen && me.probe == d.id && rng.IntN(2) == 0:
				o = outcomes[len(outcomes)-1-rng.IntN(2)] // a probe that found no answer
			}
			oc := protocol.Outcome{Lease: *d.lease, Result: o.result, Code: o.code, HTTPStatus: o.status}
			if o.result == protocol.Succeeded {
				oc.AckSHA256 = "a"
			}
			m.log = append(m.log, fmt.Sprintf("settle %d (%s) %s %s %d", d.id, d.endpoint, o.result, o.code, o.status))
			settled, err := m.b.proto().Settle(m.b.ctx, oc)
			if err == nil {
				err = settled[0].Err
			}
			if err != nil {
				m.fatalf("settle: %v", err)
			}
			d.lease = nil
			d.done = o.result == protocol.Failed || o.result == protocol.Succeeded || d.attempts >= d.maxAttempts
			want, got := m.record(d, oc), settled[0].Breaker
			if got.From != want.From || got.To != want.To || got.Code != want.Code || !got.Until.Equal(want.Until) {
				m.fatalf("the settle reported the breaker's move %+v, want %+v", got, want)
			}
		case k < 16+settles: // release
			l := live()
			if len(l) == 0 {
				continue
			}
			d := l[rng.IntN(len(l))]
			m.log = append(m.log, fmt.Sprintf("release %d (%s)", d.id, d.endpoint))
			if n, err := m.b.proto().Release(m.b.ctx, *d.lease); err != nil || n != 1 {
				m.fatalf("Release = %d, %v", n, err)
			}
			d.lease = nil
			d.attempts-- // a lease given back unsent is no attempt
			for _, o := range m.ds {
				d.parked = d.parked || o.endpoint == d.endpoint && o.parked && !o.done && o.lease == nil
			}
			if me := m.ep(d.endpoint); me.state == store.EndpointHalfOpen && me.probe == d.id {
				me.probe, me.again, me.openUntil = 0, true, m.now()
			}
		case k < 24+settles: // the clock moves
			step := []time.Duration{time.Second, 4 * time.Second, 11 * time.Second, 61 * time.Second}[rng.IntN(4)]
			m.b.clock.Advance(step)
			m.log = append(m.log, fmt.Sprintf("advance %v", step))
		case k < 25+settles: // Disable
			e := endpoints[rng.IntN(2)]
			if err := m.b.store.Endpoints.Disable(m.b.ctx, e); err != nil {
				m.fatalf("Disable: %v", err)
			}
			me := m.ep(e)
			from := me.state
			me.state, me.reason, me.probe, me.again, me.idle = store.EndpointDisabled, courier.CodeEndpointDisabled, 0, false, false
			m.emit(e, from, me.state, me.reason)
			m.log = append(m.log, "disable "+e)
		default: // Enable
			e := endpoints[rng.IntN(2)]
			if err := m.b.store.Endpoints.Enable(m.b.ctx, e); err != nil {
				m.fatalf("Enable: %v", err)
			}
			me := m.ep(e)
			from := me.state
			me.closeUp()
			m.emit(e, from, me.state, "")
			m.log = append(m.log, "enable "+e)
		}
		m.check()
	}
}

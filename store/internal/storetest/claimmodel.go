package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// claimModelEndpoints are the model's endpoints: the second has a
// MaxInFlight, changed on the way, the third a rate; the others have no
// limits but the workers' shares.
var claimModelEndpoints = []string{
	"https://m0.example/hooks",
	"https://m1.example/hooks",
	"https://m2.example/hooks",
	"https://m3.example/hooks",
}

const (
	claimModelRate  = 2.0 // per second, of claimModelEndpoints[2]
	claimModelBurst = 2
)

// claimModelDelivery is what the model knows of one enqueued delivery.
type claimModelDelivery struct {
	endpoint  string
	key       string
	seq       int  // enqueue order
	completed bool // a lease of it was completed
}

// claimModel drives one Store at random and keeps what the claim's rules
// are checked against.
type claimModel struct {
	t           *testing.T
	b           *bundle
	rnd         *rand.Rand
	deliveries  map[int64]*claimModelDelivery
	order       []int64 // ids in enqueue order
	leases      map[int64]protocol.Lease
	maxInFlight map[string]int
	rateSince   time.Time // when claimModelEndpoints[2]'s bucket was set full
	rateTaken   int       // leases of claimModelEndpoints[2] since
	step        int
}

// testClaimFollowsItsModel: the claim's rules under random operations:
// enqueues to several endpoints with priorities, ordering keys, NotBefore
// and deadlines; claims by two workers with random batches and shares;
// settles of every kind, releases, leases left to expire; endpoint limits
// changed, or set again as they were, on the way; breakers that trip on
// the failures. After every claim the test checks what a user relies on,
// against the deliveries as they were just before it and just after it:
//
//   - nothing is leased twice at once;
//   - within an ordering key at most one is in flight, claimed only once
//     every delivery enqueued before it has finished;
//   - a claim leases an endpoint no further than the worker's share or
//     the endpoint's MaxInFlight, its rate no further than its bucket;
//   - every delivery claimed was due, its deadline not yet come;
//   - a claim that filled its batch left no due delivery of a lower
//     priority than one it leased, on an endpoint it had room on (closed
//     breaker, below share and MaxInFlight, no rate), not held by its key;
//     a breaker's probe is leased first, whatever its priority.
//
// At the end every delivery is drained with generous batches and shares:
// each has succeeded (exactly those whose lease was completed) or failed.
func testClaimFollowsItsModel(t *testing.T, open OpenFunc) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			b := setup(t, open, store.Config{OrderingOnFailure: store.OrderingSkipFailed, Breaker: store.BreakerConfig{Threshold: 2, Cooldown: 20 * time.Second}})
			m := &claimModel{
				t: t, b: b, rnd: rand.New(rand.NewPCG(seed, 36)),
				deliveries: map[int64]*claimModelDelivery{}, leases: map[int64]protocol.Lease{},
				maxInFlight: map[string]int{},
			}
			m.setLimits(claimModelEndpoints[1], store.Limits{MaxInFlight: 2})
			m.setLimits(claimModelEndpoints[2], store.Limits{Rate: claimModelRate, Burst: claimModelBurst})
			m.rateSince = b.clock.Now()
			for m.step = range 300 {
				switch op := m.rnd.IntN(20); {
				case op < 7:
					m.enqueue()
				case op < 13:
					m.claim(fmt.Sprint("w", m.rnd.IntN(2)), 1+m.rnd.IntN(4), m.rnd.IntN(4), true)
				case op < 18:
					m.settleOne()
				case op < 19:
					if m.rnd.IntN(2) == 0 {
						m.setLimits(claimModelEndpoints[1], store.Limits{MaxInFlight: 1 + m.rnd.IntN(3)})
					} else { // set again, as an application starting: the rate holds from the first fill
						m.setLimits(claimModelEndpoints[2], store.Limits{Rate: claimModelRate, Burst: claimModelBurst})
					}
				default:
					d := time.Duration(1+m.rnd.IntN(20)) * time.Second
					if m.rnd.IntN(5) == 0 {
						d = 2 * time.Minute // past the leases
					}
					b.clock.Advance(d)
				}
			}
			m.drain()
		})
	}
}

func (m *claimModel) setLimits(endpoint string, l store.Limits) {
	m.t.Helper()
	if err := m.b.store.Endpoints.SetLimits(m.b.ctx, endpoint, l); err != nil {
		m.t.Fatalf("step %d: SetLimits: %v", m.step, err)
	}
	m.maxInFlight[endpoint] = l.MaxInFlight
}

func (m *claimModel) enqueue() {
	m.t.Helper()
	n := len(m.order)
	p := at(claimModelEndpoints[m.rnd.IntN(len(claimModelEndpoints))], fmt.Sprintf("n%03d", n))
	p.Priority = m.rnd.IntN(3)
	if m.rnd.IntN(5) < 2 {
		p.OrderingKey = fmt.Sprint("k", m.rnd.IntN(3))
	}
	now := m.b.clock.Now()
	if m.rnd.IntN(4) == 0 {
		p.NotBefore = now.Add(time.Duration(m.rnd.IntN(30)) * time.Second)
	}
	if m.rnd.IntN(6) == 0 {
		p.Deadline = now.Add(time.Duration(1+m.rnd.IntN(10)) * time.Minute)
		if p.Deadline.Before(p.NotBefore) || p.Deadline.Equal(p.NotBefore) {
			p.Deadline = p.NotBefore.Add(time.Minute)
		}
	}
	e := m.b.enqueue(m.t, p)
	m.deliveries[e.ID] = &claimModelDelivery{endpoint: p.Endpoint, key: p.OrderingKey, seq: n}
	m.order = append(m.order, e.ID)
}

// snapshot lists every delivery, by id.
func (m *claimModel) snapshot() map[int64]store.Delivery {
	m.t.Helper()
	out := map[int64]store.Delivery{}
	for before := int64(0); ; {
		page, err := m.b.store.Outbox.List(m.b.ctx, store.ListParams{Limit: 1000, Before: before})
		if err != nil {
			m.t.Fatalf("step %d: List: %v", m.step, err)
		}
		for _, d := range page.Deliveries {
			out[d.ID] = d
		}
		if page.NextBefore == 0 {
			return out
		}
		before = page.NextBefore
	}
}

// breakers are the endpoints' breaker states.
func (m *claimModel) breakers() map[string]store.EndpointState {
	m.t.Helper()
	out := map[string]store.EndpointState{}
	for _, e := range claimModelEndpoints {
		h, err := m.b.store.Endpoints.Get(m.b.ctx, e)
		if err != nil {
			m.t.Fatalf("step %d: Endpoints.Get: %v", m.step, err)
		}
		out[e] = h.State
	}
	return out
}

// finished reports whether a delivery of status s is done with: no
// attempt of it is made any more, and its ordering key has moved on.
func finished(s courier.Status) bool {
	return s == courier.StatusSucceeded || s == courier.StatusFailed || s == courier.StatusSuppressed || s == courier.StatusQuarantined
}

// claim claims as owner and checks the claim's rules; check is false for
// the drain, which checks the leases only.
func (m *claimModel) claim(owner string, limit, share int, check bool) []protocol.Claimed {
	t := m.t
	t.Helper()
	now := m.b.clock.Now()
	for id, l := range m.leases {
		if !l.ExpiresAt.After(now) {
			delete(m.leases, id) // void: a claim reclaims it
		}
	}
	before := m.snapshot()
	breakersBefore := m.breakers()
	got, err := m.b.proto().Claim(m.b.ctx, protocol.ClaimParams{Owner: owner, Limit: limit, Lease: time.Minute, EndpointCap: share})
	if err != nil {
		t.Fatalf("step %d: Claim: %v", m.step, err)
	}
	after := m.snapshot()
	breakersAfter := m.breakers()
	where := fmt.Sprintf("step %d: Claim(%s, limit %d, share %d) at %s", m.step, owner, limit, share, now.Format("15:04:05"))
	if len(got) > limit {
		t.Fatalf("%s: leased %d", where, len(got))
	}
	claimed := map[int64]bool{}
	leasedOn := map[string]int{}
	maxPriority := math.MinInt
	for _, c := range got {
		id := c.DeliveryID
		d, was := m.deliveries[id], before[id]
		switch {
		case d == nil:
			t.Fatalf("%s: leased %d, never enqueued", where, id)
		case claimed[id]:
			t.Fatalf("%s: leased %s twice", where, c.NotificationID)
		case m.leases[id].Token != "":
			t.Fatalf("%s: leased %s, still leased to %s until %s", where, c.NotificationID, m.leases[id].Owner, m.leases[id].ExpiresAt)
		case was.Status == courier.StatusLeased && was.LeaseExpiresAt.After(now):
			t.Fatalf("%s: leased %s, leased in the store until %s", where, c.NotificationID, was.LeaseExpiresAt)
		case was.Status != courier.StatusLeased && was.Status != courier.StatusPending && was.Status != courier.StatusRetryWait:
			t.Fatalf("%s: leased %s, which was %s", where, c.NotificationID, was.Status)
		case was.Status != courier.StatusLeased && was.NextAttemptAt.After(now):
			t.Fatalf("%s: leased %s, not due until %s", where, c.NotificationID, was.NextAttemptAt.Format("15:04:05"))
		case !was.Deadline.After(now):
			t.Fatalf("%s: leased %s, its deadline %s come", where, c.NotificationID, was.Deadline.Format("15:04:05"))
		}
		claimed[id] = true
		leasedOn[d.endpoint]++
		if probe := breakersBefore[d.endpoint] != store.EndpointClosed; !probe && c.Priority > maxPriority {
			maxPriority = c.Priority // a probe goes first, whatever its priority
		}
		m.leases[id] = c.Lease
		if d.key != "" {
			for _, e := range m.order {
				o := m.deliveries[e]
				if o.seq < d.seq && o.endpoint == d.endpoint && o.key == d.key && !finished(after[e].Status) {
					t.Fatalf("%s: leased %s of key %s before %s, enqueued earlier and %s", where, c.NotificationID, d.key, after[e].NotificationID, after[e].Status)
				}
			}
		}
		if d.endpoint == claimModelEndpoints[2] {
			m.rateTaken++
		}
	}
	// The leases the store holds are the model's.
	perOwner, perEndpoint, perKey := map[string]int{}, map[string]int{}, map[string]int{}
	for id, d := range after {
		if d.Status != courier.StatusLeased || !d.LeaseExpiresAt.After(now) {
			continue
		}
		l, ok := m.leases[id]
		if !ok || l.Owner != d.LeaseOwner {
			t.Fatalf("%s: %s leased to %q in the store, model's lease %+v", where, d.NotificationID, d.LeaseOwner, l)
		}
		perEndpoint[d.Endpoint]++
		if d.LeaseOwner == owner {
			perOwner[d.Endpoint]++
		}
		if d.OrderingKey != "" {
			k := d.Endpoint + " " + d.OrderingKey
			if perKey[k]++; perKey[k] > 1 {
				t.Fatalf("%s: key %s has two deliveries in flight", where, k)
			}
		}
	}
	for id := range m.leases {
		if d := after[id]; d.Status != courier.StatusLeased {
			t.Fatalf("%s: the model's lease of %s is %s in the store", where, d.NotificationID, d.Status)
		}
	}
	for e, n := range leasedOn {
		if share > 0 && perOwner[e] > share {
			t.Fatalf("%s: %s holds %d leases of %s, its share %d", where, owner, perOwner[e], e, share)
		}
		if mif := m.maxInFlight[e]; mif > 0 && perEndpoint[e] > mif {
			t.Fatalf("%s: %d leases of %s (%d just leased), MaxInFlight %d", where, perEndpoint[e], e, n, mif)
		}
	}
	if bound := claimModelBurst + int(now.Sub(m.rateSince).Seconds()*claimModelRate); m.rateTaken > bound {
		t.Fatalf("%s: %d leases of %s since its bucket was filled %s ago, at most %d", where, m.rateTaken, claimModelEndpoints[2], now.Sub(m.rateSince), bound)
	}
	if !check || len(got) < limit {
		return got
	}
	// A full batch: nothing due of a lower priority than the batch's
	// highest was passed over on an endpoint with room.
	for _, id := range m.order {
		d, was, is := m.deliveries[id], before[id], after[id]
		switch {
		case claimed[id] || was.Priority >= maxPriority:
		case was.Status != courier.StatusPending && was.Status != courier.StatusRetryWait:
		case was.NextAttemptAt.After(now) || !was.Deadline.After(now):
		case is.Status != was.Status || is.Held == store.HeldByKey:
		case breakersBefore[d.endpoint] != store.EndpointClosed || breakersAfter[d.endpoint] != store.EndpointClosed:
		case d.endpoint == claimModelEndpoints[2]:
		case share > 0 && perOwner[d.endpoint] >= share:
		case m.maxInFlight[d.endpoint] > 0 && perEndpoint[d.endpoint] >= m.maxInFlight[d.endpoint]:
		default:
			var leased []string
			for _, c := range got {
				leased = append(leased, fmt.Sprintf("%s(p%d %s %s)", c.NotificationID, c.Priority, c.Endpoint, breakersBefore[c.Endpoint]))
			}
			t.Fatalf("%s: leased %v and left %s of priority %d due on %s (held %q), with room", where, leased, was.NotificationID, was.Priority, d.endpoint, was.Held)
		}
	}
	return got
}

// settleOne settles, releases or forgets (to expire) one lease the model
// holds.
func (m *claimModel) settleOne() {
	m.t.Helper()
	if len(m.leases) == 0 {
		return
	}
	ids := make([]int64, 0, len(m.leases))
	for id := range m.leases {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	id := ids[m.rnd.IntN(len(ids))]
	l := m.leases[id]
	delete(m.leases, id)
	var err error
	switch op := m.rnd.IntN(20); {
	case op < 10:
		err = m.b.complete(l, "")
		if err == nil {
			m.deliveries[id].completed = true
		}
	case op < 15:
		err = m.b.retry(l, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Duration(1+m.rnd.IntN(30)) * time.Second})
	case op < 17:
		err = m.b.fail(l, courier.CodeReceiverRejected, 400)
	case op < 19:
		_, err = m.b.proto().Release(m.b.ctx, l)
	default:
		m.leases[id] = l // left to expire
		return
	}
	if err != nil && (courier.CodeOf(err) != courier.CodeLeaseLost || l.ExpiresAt.After(m.b.clock.Now())) {
		m.t.Fatalf("step %d: settle of %d: %v", m.step, id, err)
	}
}

// drain completes every delivery with generous batches and shares, the
// clock moving on while nothing is due, and checks that each has
// finished: succeeded exactly when a lease of it was completed.
func (m *claimModel) drain() {
	t := m.t
	t.Helper()
	for round := 0; ; round++ {
		if round > 400 {
			t.Fatalf("drain: deliveries still unfinished after %d rounds", round)
		}
		for _, l := range m.leases {
			if err := m.b.complete(l, ""); err != nil && courier.CodeOf(err) != courier.CodeLeaseLost {
				t.Fatalf("drain: complete: %v", err)
			} else if err == nil {
				m.deliveries[l.DeliveryID].completed = true
			}
		}
		clear(m.leases)
		m.step++
		if got := m.claim("drain", protocol.MaxClaimBatch, 0, false); len(got) > 0 {
			continue
		}
		done := true
		for _, d := range m.snapshot() {
			done = done && finished(d.Status)
		}
		if done {
			break
		}
		m.b.clock.Advance(10 * time.Second)
	}
	all := m.snapshot()
	if len(all) != len(m.order) {
		t.Fatalf("drain: %d deliveries in the store, %d enqueued", len(all), len(m.order))
	}
	for _, id := range m.order {
		d, is := m.deliveries[id], all[id]
		switch {
		case is.Status == courier.StatusSucceeded && !d.completed:
			t.Errorf("%s succeeded, never completed", is.NotificationID)
		case d.completed && is.Status != courier.StatusSucceeded:
			t.Errorf("%s completed, now %s", is.NotificationID, is.Status)
		case is.Status != courier.StatusSucceeded && is.Status != courier.StatusFailed:
			t.Errorf("%s ended %s (%s)", is.NotificationID, is.Status, is.LastErrorCode)
		}
	}
}

// testParkedDeliveriesGoInPriorityOrder: a claim leases an endpoint's
// parked deliveries no further than the priorities waiting elsewhere, in
// the due index or parked at another endpoint: a claim whose batch is
// full leaves no delivery of a lower priority than one it leased, on an
// endpoint it has room on. A claim leased an endpoint's parked deliveries
// of every priority at once, or those of the endpoint parked longest,
// before a lower priority waiting behind them.
func testParkedDeliveriesGoInPriorityOrder(t *testing.T, open OpenFunc) {
	const a, c = "https://a.example/hooks", "https://c.example/hooks"
	enqueue := func(b *bundle, endpoint, id string, priority int) {
		p := at(endpoint, id)
		p.Priority = priority
		b.enqueue(t, p)
		b.clock.Advance(time.Millisecond)
	}
	// park claims each endpoint's first delivery at a share of one,
	// parking the rest, and completes them: the endpoints have room again.
	park := func(b *bundle) {
		for _, d := range b.claimCapped(t, "w", 10, 1) {
			if err := b.complete(d.Lease, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("its own of a higher priority", func(t *testing.T) {
		b := setup(t, open, store.Config{})
		enqueue(b, a, "a0", 0)
		enqueue(b, a, "a1", 0)
		enqueue(b, a, "a2", 2)
		park(b) // a1, a2 parked
		enqueue(b, c, "c1", 1)
		if got := strings.Join(ids(b.claimCapped(t, "w", 2, 2)), " "); got != "a1 c1" {
			t.Fatalf("claimed %s, want a1 c1 (priority 0, then 1)", got)
		}
	})
	t.Run("another endpoint's parked later", func(t *testing.T) {
		b := setup(t, open, store.Config{})
		enqueue(b, a, "a0", 2)
		enqueue(b, a, "a1", 2)
		enqueue(b, c, "c0", 1)
		enqueue(b, c, "c1", 1)
		park(b) // a1 and c1 parked, a1 due first
		if got := strings.Join(ids(b.claimCapped(t, "w", 1, 1)), " "); got != "c1" {
			t.Fatalf("claimed %s, want c1 (priority 1, before a1's 2)", got)
		}
	})
}

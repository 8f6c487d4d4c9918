package crash_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/crash"
	"github.com/courier-go/courier/store"
)

var (
	flagControlN     = flag.Int("crash.control.n", 600, "business transactions per engine in TestCrashControl (half keyed terminal notifications, a quarter fan-out events to two subscriptions, a quarter commands)")
	flagControlKills = flag.Int("crash.control.kills", 30, "kill points per engine in TestCrashControl")
	flagControlFlaky = flag.Float64("crash.control.flaky", 0.05, "probability that the control receiver answers a request 503 outside its outage windows; 0 turns the outages off too")
)

// TestCrashControl is TestCrash with delivery control at work while the
// processes die: ordering keys on terminal notifications and on fan-out
// events (Publish to two subscriptions), commands (EnqueueCommand to a
// handler.Source), endpoint limits (MaxInFlight on every endpoint, a rate
// on two), two workers in the sender sharing them, a breaker that the
// receiver's outage windows and flaky 503s open, and encrypted payloads
// and inbox records. Beside TestCrash's verdicts (every committed business
// transaction's deliveries processed exactly once, none for a rolled-back
// one, each delivery succeeded once) it checks that
//
//   - per (endpoint, ordering key) the receiver applied the deliveries in
//     enqueue order, and never had two of a key in flight at once;
//   - no ordering key is left with a head once the outbox drained;
//   - the receiver never had more requests to an endpoint in flight than
//     its MaxInFlight, nor the store more leases (polled);
//   - the receiver's two counts leave out a request whose client had gone
//     by the time the overlapping one was answered, and one of a lease
//     that had expired while a freeze held its sender (crash.Overlap.Judge):
//     such overlaps are logged, not failed;
//   - the stored payloads and the receiver's inbox records are sealed;
//   - the attempts log holds every attempt once, those of the leases a
//     killed sender held included;
//   - the breakers opened, if the receiver answered 503 often enough.
//
// -crash.seed reproduces a run's schedule (the processes' timing is not).
func TestCrashControl(t *testing.T) {
	onBothEngines(t, run{
		stream: 100, n: *flagControlN, kills: *flagControlKills, freezes: *flagFreezes, selfKill: *flagSelfKill, timeout: *flagTimeout,
		mode: crash.ModeControl, flaky: *flagControlFlaky,
	})
}

// breakerEvidence is how many attempts answered 503 a control run needs
// before a breaker that no poll found open fails it: a default run has
// several times as many, and its polls find the breakers open often.
const breakerEvidence = 30

// controlStats is what the parent saw of the endpoints while the run went.
type controlStats struct {
	subscriptions map[string]int64 // label -> subscription id
	polls         int
	states        map[string]map[store.EndpointState]int // label -> polls that found it in each state
	maxLeased     map[string]int                         // label -> most leases seen at once
	overLimit     []string                               // polls that found more leases than MaxInFlight
}

func (h *harness) label(endpoint string) string {
	return endpoint[strings.LastIndexByte(endpoint, '/')+1:]
}

// setUpControl subscribes the two event endpoints and sets every
// endpoint's limits, before the sender starts.
func (h *harness) setUpControl() {
	h.t.Helper()
	h.control = &controlStats{subscriptions: make(map[string]int64), states: make(map[string]map[store.EndpointState]int), maxLeased: make(map[string]int)}
	for _, label := range []string{crash.LabelEventsA, crash.LabelEventsB} {
		sub, err := h.sender.Subscriptions.Create(h.ctx, h.sender.DB(), store.SubscriptionParams{
			Tenant: crash.ControlTenant, Endpoint: h.base.EndpointOf(label), EventTypes: []string{crash.ControlEventType},
			KeyID: "crash",
		})
		if err != nil {
			h.t.Fatal(err)
		}
		h.control.subscriptions[label] = sub.ID
	}
	for _, label := range crash.ControlLabels {
		if err := h.sender.Endpoints.SetLimits(h.ctx, h.base.EndpointOf(label), crash.ControlLimits[label]); err != nil {
			h.t.Fatal(err)
		}
	}
}

// observe polls the endpoints' breakers and leases (ModeControl).
func (h *harness) observe() {
	h.t.Helper()
	if h.control == nil {
		return
	}
	list, err := h.sender.Endpoints.List(h.ctx)
	if err != nil {
		h.fatal(err)
	}
	c := h.control
	c.polls++
	for _, e := range list {
		label := h.label(e.Endpoint)
		if c.states[label] == nil {
			c.states[label] = make(map[store.EndpointState]int)
		}
		c.states[label][e.State]++
		c.maxLeased[label] = max(c.maxLeased[label], e.InFlight)
		if limit := crash.ControlLimits[label].MaxInFlight; limit > 0 && e.InFlight > limit {
			c.overLimit = append(c.overLimit, fmt.Sprintf("%s:%d>%d", label, e.InFlight, limit))
		}
	}
}

// keysLeft lists the ordering keys that still have a head.
func (h *harness) keysLeft(ctx context.Context) string {
	var left []string
	err := h.rows(ctx, h.sender, "ordering_keys_left", func(scan func(...any) error) error {
		var endpoint, key string
		var head int64
		if err := scan(&endpoint, &key, &head); err != nil {
			return err
		}
		d, err := h.sender.Outbox.Get(ctx, head)
		left = append(left, fmt.Sprintf("%s/%s head=%d (%s %s attempts=%d held=%q err=%v)", h.label(endpoint), key, head, d.NotificationID, d.Status, d.Attempts, d.Held, err))
		return nil
	})
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%d %v", len(left), sample(left))
}

// delivery is one expected delivery of a control run.
type delivery struct{ id, label string }

// checkControl reads the truth of a control run and reports every broken
// promise as an error, then logs the run's figures.
func (h *harness) checkControl(ctx context.Context, sender, receiver *store.Store, began, up, killed, drained, stopped time.Time) {
	t := h.t
	t.Helper()
	orders, err := h.column(ctx, sender, "committed_orders")
	if err != nil {
		t.Fatal(err)
	}
	committed := make(map[string]bool, len(orders))
	for _, id := range orders {
		committed[id] = true
	}

	// What each committed business transaction must have delivered: its
	// deliveries (notification id, endpoint) and effects (order id, label).
	wantDeliveries := make(map[delivery]bool)
	wantEffects := make(map[delivery]bool)
	var missingOrders, unexpectedOrders []string
	kinds := make(map[string]int)
	for i := range h.r.n {
		id, err := crash.OrderID(crash.ModeControl, h.r.seed, i)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case crash.RolledBack(h.r.seed, i) && committed[id]:
			unexpectedOrders = append(unexpectedOrders, id)
		case !crash.RolledBack(h.r.seed, i) && !committed[id]:
			missingOrders = append(missingOrders, id)
		}
		if crash.RolledBack(h.r.seed, i) {
			continue
		}
		kind := crash.ControlKind(i)
		kinds[kind]++
		switch kind {
		case crash.KindTerminal:
			wantDeliveries[delivery{id, crash.LabelTerminal}] = true
			wantEffects[delivery{id, crash.LabelTerminal}] = true
		case crash.KindEvent:
			for _, label := range []string{crash.LabelEventsA, crash.LabelEventsB} {
				nid := id + ":" + strconv.FormatInt(h.control.subscriptions[label], 10)
				wantDeliveries[delivery{nid, label}] = true
				wantEffects[delivery{id, label}] = true
			}
		case crash.KindCommand:
			wantDeliveries[delivery{id, crash.LabelSource}] = true
			wantEffects[delivery{id, crash.LabelSource}] = true
		}
	}
	if len(missingOrders) > 0 || len(unexpectedOrders) > 0 {
		t.Errorf("orders: %d never committed %v, %d committed though rolled back %v",
			len(missingOrders), sample(missingOrders), len(unexpectedOrders), sample(unexpectedOrders))
	}

	// The outbox: exactly the expected deliveries, each succeeded, each
	// payload sealed.
	var notSucceeded, phantomDeliveries, plain []string
	seen := make(map[delivery]bool)
	if err := h.rows(ctx, sender, "outbox_deliveries", func(scan func(...any) error) error {
		var id, endpoint, status string
		var payload []byte
		if err := scan(&id, &endpoint, &status, &payload); err != nil {
			return err
		}
		d := delivery{id, h.label(endpoint)}
		switch {
		case !wantDeliveries[d] || seen[d]:
			phantomDeliveries = append(phantomDeliveries, d.label+"/"+id)
		case status != string(courier.StatusSucceeded):
			notSucceeded = append(notSucceeded, fmt.Sprintf("%s/%s:%s", d.label, id, status))
		}
		seen[d] = true
		if json.Valid(payload) {
			plain = append(plain, d.label+"/"+id)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for d := range wantDeliveries {
		if !seen[d] {
			notSucceeded = append(notSucceeded, d.label+"/"+d.id+":[no delivery]")
		}
	}
	if len(notSucceeded) > 0 || len(phantomDeliveries) > 0 {
		t.Errorf("outbox: %d expected deliveries not exactly once succeeded %v; %d deliveries not expected %v",
			len(notSucceeded), sample(notSucceeded), len(phantomDeliveries), sample(phantomDeliveries))
	}
	if len(plain) > 0 {
		t.Errorf("outbox: %d payloads stored in the clear though the store encrypts %v", len(plain), sample(plain))
	}

	// The receiver's inbox: every record kept under the run's payload key,
	// its answer sealed.
	var plainRecords []string
	records := 0
	if err := h.rows(ctx, receiver, "inbox_records", func(scan func(...any) error) error {
		var sender, key, keyID string
		var answer []byte
		if err := scan(&sender, &key, &keyID, &answer); err != nil {
			return err
		}
		records++
		if keyID != crash.PayloadKeyID || answer != nil && json.Valid(answer) {
			plainRecords = append(plainRecords, fmt.Sprintf("%s/%s:key_id=%q", sender, key, keyID))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if records < len(wantEffects) || len(plainRecords) > 0 {
		t.Errorf("inbox: %d records for %d effects; %d not sealed under %s though the store encrypts %v",
			records, len(wantEffects), len(plainRecords), crash.PayloadKeyID, sample(plainRecords))
	}

	// The receiver: every expected effect exactly once, nothing else, and
	// per (endpoint, key) in enqueue order.
	effects := make(map[delivery]int)
	last := make(map[string]int) // label/key -> seq of the last effect
	var outOfOrder []string
	if err := h.rows(ctx, receiver, "control_effects", func(scan func(...any) error) error {
		var id, label, key string
		var seq int
		if err := scan(&id, &label, &key, &seq); err != nil {
			return err
		}
		effects[delivery{id, label}]++
		if key == "" {
			return nil
		}
		lk := label + "/" + key
		if prev, ok := last[lk]; ok && seq <= prev {
			outOfOrder = append(outOfOrder, fmt.Sprintf("%s:%d-after-%d", lk, seq, prev))
		}
		last[lk] = max(last[lk], seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var lost, duplicated, phantom []string
	for d := range wantEffects {
		switch n := effects[d]; {
		case n == 0:
			lost = append(lost, d.label+"/"+d.id)
		case n > 1:
			duplicated = append(duplicated, fmt.Sprintf("%s/%s×%d", d.label, d.id, n))
		}
	}
	for d := range effects {
		if !wantEffects[d] {
			phantom = append(phantom, d.label+"/"+d.id)
		}
	}
	if len(lost) > 0 || len(duplicated) > 0 || len(phantom) > 0 {
		t.Errorf("effects: %d never processed %v, %d processed more than once %v, %d processed though never committed %v",
			len(lost), sample(lost), len(duplicated), sample(duplicated), len(phantom), sample(phantom))
	}
	if len(outOfOrder) > 0 {
		t.Errorf("ordering: %d effects applied after a later one of their key %v", len(outOfOrder), sample(outOfOrder))
	}
	if left := h.keysLeft(ctx); !strings.HasPrefix(left, "0 ") {
		t.Errorf("ordering keys still headed after the drain: %s", left)
	}

	// The attempts log: one success per delivery, every attempt once.
	h.checkOneSuccessEach(ctx, t, sender)
	h.checkAttemptNumbers(ctx, t, sender)
	outcomes := make(map[string]int)
	attempts := 0
	if err := h.rows(ctx, sender, "attempt_outcomes", func(scan func(...any) error) error {
		var outcome, code string
		var n int
		if err := scan(&outcome, &code, &n); err != nil {
			return err
		}
		attempts += n
		if code != "" && code != outcome {
			outcome += " " + code
		}
		outcomes[outcome] += n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	health, err := sender.Outbox.Check(ctx, 100_000) // Health, and every row's invariants
	if err != nil {
		t.Fatal(err)
	}
	if health.Status != store.HealthOK {
		t.Errorf("outbox health %s (%s), want ok: %+v", health.Status, health.Code, health)
	}

	// What the receivers and the parent saw of the limits and the breaker.
	overlaps, peaks := h.notes.read()
	var violations, abandoned, leaseExpired []string
	for _, o := range overlaps {
		switch o.Judge(h.pastLease) {
		case crash.Breach:
			violations = append(violations, o.String())
		case crash.Abandoned:
			abandoned = append(abandoned, o.String())
		case crash.LeaseExpired:
			leaseExpired = append(leaseExpired, o.String())
		}
	}
	if len(violations) > 0 {
		t.Errorf("receiver: %d requests over a limit: %v", len(violations), strings.Join(violations, "\n"))
	}
	if len(abandoned) > 0 {
		t.Logf("receiver: %d requests overlapped only requests their sender had given up on: %v", len(abandoned), strings.Join(abandoned, "\n"))
	}
	if len(leaseExpired) > 0 {
		t.Logf("receiver: %d requests overlapped only requests of leases that expired while their sender was frozen (or were such a request): %v", len(leaseExpired), strings.Join(leaseExpired, "\n"))
	}
	c := h.control
	if len(c.overLimit) > 0 {
		t.Errorf("store: %d polls found more leases than MaxInFlight: %v", len(c.overLimit), sample(c.overLimit))
	}
	// The outage windows answer 503 to every request for a quarter of a
	// second at a time, more failures in a row than the breaker's
	// threshold: a run with many such answers in which no poll found a
	// breaker open has not had the breaker at work. (A short run may see
	// too few answers, or no poll land on an open breaker.)
	opened := 0
	for _, st := range c.states {
		opened += st[store.EndpointOpen] + st[store.EndpointHalfOpen]
	}
	unavailable := outcomes["retry "+string(courier.CodeReceiverUnavailable)]
	if unavailable >= breakerEvidence && opened == 0 {
		t.Errorf("breaker: none of %d polls found an endpoint's breaker open or half open, though %d attempts were answered 503", c.polls, unavailable)
	}
	var figures []string
	for _, label := range crash.ControlLabels {
		st := c.states[label]
		figures = append(figures, fmt.Sprintf("%s[max_in_flight=%d receiver_peak=%d store_peak=%d polls_open=%d polls_half_open=%d]",
			label, crash.ControlLimits[label].MaxInFlight, peaks[label], c.maxLeased[label], st[store.EndpointOpen], st[store.EndpointHalfOpen]))
	}
	var outcomeList []string
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range outcomes {
			if !yield(k) {
				return
			}
		}
	}) {
		outcomeList = append(outcomeList, fmt.Sprintf("%s=%d", k, outcomes[k]))
	}
	t.Logf("%s control: seed=%d n=%d committed=%d (terminal=%d event=%d command=%d) busy_retries=%d deliveries=%d kills=%d (sender=%d [enqueueing=%d, holding_leases=%d, leases_orphaned=%d] receiver=%d receiver_after_commit=%d) freezes=%d (leases_frozen=%d, settles_fenced=%d, writes_withheld=%d) "+
		"attempts=%d %v lost=%d duplicates=%d phantom=%d out_of_order=%d violations=%d overlaps_with_abandoned=%d overlaps_with_expired_leases=%d polls=%d %s "+
		"setup=%v kill_phase=%v drain=%v stop=%v total=%v",
		h.r.engine, h.r.seed, h.r.n, len(committed), kinds[crash.KindTerminal], kinds[crash.KindEvent], kinds[crash.KindCommand], h.notes.retries(), len(wantDeliveries),
		h.senderKills+h.receiverKills+h.selfKills, h.senderKills, h.senderKillsEnqueueing, h.senderKillsWithLeases, h.orphanedLeases,
		h.receiverKills, h.selfKills, h.freezes, h.frozenLeases, h.fenced, h.withheld, attempts, outcomeList,
		len(lost), len(duplicated), len(phantom)+len(phantomDeliveries), len(outOfOrder), len(violations), len(abandoned), len(leaseExpired), c.polls, strings.Join(figures, " "),
		up.Sub(began).Round(time.Millisecond), killed.Sub(up).Round(time.Millisecond), drained.Sub(killed).Round(time.Millisecond), stopped.Sub(drained).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// notes collects the lines the children write of their watch
// (crash.OverlapLine, crash.PeakLine), and counts the senders' retries of
// busy business transactions (crash.BusyRetryMessage), from every
// incarnation.
type notes struct {
	mu          sync.Mutex
	overlaps    []crash.Overlap
	peaks       map[string]int
	busyRetries int
}

// writer returns the stderr tap of one child: it splits its own lines.
func (n *notes) writer() io.Writer { return &lineWriter{lineFunc: n.add} }

func (n *notes) add(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case strings.HasPrefix(line, crash.OverlapLine):
		var o crash.Overlap
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, crash.OverlapLine)), &o); err != nil {
			// Unreadable, it is judged a breach: nothing excuses it.
			o = crash.Overlap{What: "unreadable " + strings.TrimSpace(line), Others: []crash.Request{{}}}
		}
		n.overlaps = append(n.overlaps, o)
	case strings.HasPrefix(line, crash.PeakLine):
		var label string
		var count int
		for _, f := range strings.Fields(strings.TrimPrefix(line, crash.PeakLine)) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "endpoint":
				label = v
			case "in_flight":
				count, _ = strconv.Atoi(v)
			}
		}
		if n.peaks == nil {
			n.peaks = make(map[string]int)
		}
		n.peaks[label] = max(n.peaks[label], count)
	case strings.Contains(line, crash.BusyRetryMessage):
		n.busyRetries++
	}
}

// retries returns how many busy business transactions the senders ran
// again.
func (n *notes) retries() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.busyRetries
}

func (n *notes) read() (overlaps []crash.Overlap, peaks map[string]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.overlaps), n.peaks
}

// frozenLease is a lease a frozen sender held (harness.freeze): the
// delivery, by its endpoint's label and notification id, and the attempt.
type frozenLease struct {
	label, id string
	attempt   int
}

// pastLease reports whether r, a request to the control endpoint label,
// was sent under a lease that a frozen sender held and that had expired
// by at (see crash.LeaseExpired).
func (h *harness) pastLease(label string, r crash.Request, at time.Time) bool {
	expires, ok := h.frozen[frozenLease{label, r.ID, r.Attempt}]
	return ok && !at.Before(expires)
}

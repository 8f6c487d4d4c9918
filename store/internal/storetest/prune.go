package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pruning"
	"github.com/courier-go/courier/store"
)

// testPruneNeedsARetention: the outbox's, the attempts log's and the
// inbox's prunes refuse a zero OlderThan (invalid_argument naming it) and
// delete nothing. It once deleted every record however new: an inbox
// record of a delivery accepted a moment ago went, so its redelivery
// ran the application's function again, and a delivered notification's
// row went, so an enqueue retried after its commit sent it again. The
// replay cache's prune, whose pairs carry their own expiry, runs. The
// inbox's prune refuses any retention under a day: a Standard Webhooks or
// AdCP HMAC request replayed inside its signature's tolerance is refused
// by its record alone, and a prune minutes after it let the replay run
// the application's function again.
func testPruneNeedsARetention(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	b.enqueue(t, delivery("r-1"))
	for _, c := range b.claim(t, "w", 1, time.Minute) {
		if err := b.complete(c.Lease, "ack"); err != nil {
			t.Fatal(err)
		}
	}
	b.processed(t, "r-1")
	b.clock.Advance(time.Second)
	counts := pruning.For(b.store)
	for name, prune := range map[string]func(context.Context, store.PruneParams) (int, error){
		"Outbox.Prune":         b.store.Outbox.Prune,
		"Outbox.PruneAttempts": b.store.Outbox.PruneAttempts,
		"Inbox.Prune":          b.store.Inbox.Prune,
		// Their dry runs' counts refuse it alike.
		"the outbox's count":  func(ctx context.Context, p store.PruneParams) (int, error) { return counts.Outbox(ctx, p.OlderThan) },
		"the attempts' count": func(ctx context.Context, p store.PruneParams) (int, error) { return counts.Attempts(ctx, p.OlderThan) },
		"the inbox's count":   func(ctx context.Context, p store.PruneParams) (int, error) { return counts.Inbox(ctx, p.OlderThan) },
	} {
		for _, p := range []store.PruneParams{{}, {OlderThan: time.Nanosecond}} { // none, or less than the stamps' microsecond
			n, err := prune(b.ctx, p)
			if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "PruneParams.OlderThan") || n != 0 {
				t.Errorf("%s with OlderThan %v = %d, %v; want invalid_argument naming PruneParams.OlderThan", name, p.OlderThan, n, err)
			}
		}
	}
	for table, want := range map[string]int{"courier_outbox": 1, "courier_attempts": 1, "courier_inbox": 1} {
		var got int
		if err := b.db.GetContext(b.ctx, &got, "SELECT COUNT(*) FROM "+table); err != nil || got != want {
			t.Errorf("%s holds %d rows (%v), want %d", table, got, err, want)
		}
	}
	if n, err := b.store.Replay.Prune(b.ctx, store.PruneParams{}); err != nil || n != 0 {
		t.Errorf("Replay.Prune with no OlderThan = %d, %v; want it to run", n, err)
	}
	// The inbox keeps a record a day, however short the retention asked.
	b.clock.Advance(10 * time.Minute)
	for _, older := range []time.Duration{time.Microsecond, 10 * time.Minute, 24*time.Hour - time.Microsecond} {
		n, err := b.store.Inbox.Prune(b.ctx, store.PruneParams{OlderThan: older})
		if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "PruneParams.OlderThan") || n != 0 {
			t.Errorf("Inbox.Prune with OlderThan %v = %d, %v; want invalid_argument naming PruneParams.OlderThan", older, n, err)
		}
	}
	var kept int
	if err := b.db.GetContext(b.ctx, &kept, "SELECT COUNT(*) FROM courier_inbox"); err != nil || kept != 1 {
		t.Errorf("courier_inbox holds %d rows (%v) after refused prunes, want 1", kept, err)
	}
	// The shortest retention is explicit: a microsecond takes the outbox's
	// and the attempts log's records, a day the inbox's.
	b.clock.Advance(24 * time.Hour)
	for name, prune := range map[string]func(context.Context, store.PruneParams) (int, error){
		"Outbox.Prune":         b.store.Outbox.Prune,
		"Outbox.PruneAttempts": b.store.Outbox.PruneAttempts,
	} {
		if n, err := prune(b.ctx, store.PruneParams{OlderThan: time.Microsecond}); err != nil || n != 1 {
			t.Errorf("%s with OlderThan 1µs = %d, %v; want its one record", name, n, err)
		}
	}
	if n, err := b.store.Inbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 1 {
		t.Errorf("Inbox.Prune with OlderThan 24h = %d, %v; want its one record", n, err)
	}
}

// testPruneRefusesNegativeBounds: a negative OlderThan, BatchSize or
// MaxRows is invalid_argument naming the field, for every retention pass,
// and deletes nothing; a negative MaxRows once pruned nothing without a
// word, and a negative BatchSize was taken for the default.
func testPruneRefusesNegativeBounds(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		b.enqueue(t, delivery(id))
	}
	for _, c := range b.claim(t, "w", 3, time.Minute) {
		if err := b.complete(c.Lease, "ack"); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(48 * time.Hour)
	passes := map[string]func(context.Context, store.PruneParams) (int, error){
		"Outbox.Prune":         b.store.Outbox.Prune,
		"Outbox.PruneAttempts": b.store.Outbox.PruneAttempts,
		"Inbox.Prune":          b.store.Inbox.Prune,
		"Replay.Prune":         b.store.Replay.Prune,
	}
	for field, p := range map[string]store.PruneParams{
		"OlderThan": {OlderThan: -time.Hour},
		"BatchSize": {OlderThan: 24 * time.Hour, BatchSize: -1},
		"MaxRows":   {OlderThan: 24 * time.Hour, MaxRows: -1},
	} {
		batches := 0
		p.OnBatch = func(int) { batches++ }
		for name, prune := range passes {
			n, err := prune(b.ctx, p)
			if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "PruneParams."+field) || n != 0 {
				t.Errorf("%s with a negative %s = %d, %v; want invalid_argument naming PruneParams.%s", name, field, n, err, field)
			}
		}
		if batches != 0 {
			t.Errorf("a negative %s ran %d prune statements", field, batches)
		}
	}
	// The rows were there to prune: a pass with sound bounds, its batch
	// size defaulted, removes them.
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Hour}); err != nil || n != 3 {
		t.Fatalf("Prune = %d, %v; want the 3 succeeded deliveries", n, err)
	}
}

// testPruneTakesTheOldestFirst: a bounded Outbox.Prune removes the
// finished deliveries last updated longest ago first, succeeded and
// suppressed ones alike, whichever batch they fall in.
func testPruneTakesTheOldestFirst(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	var ids []int64
	for i := range 6 { // succeeded and suppressed by turns, a minute apart
		e := b.enqueue(t, delivery(fmt.Sprintf("o-%d", i)))
		ids = append(ids, e.ID)
		if i%2 == 0 {
			c := b.claim(t, "w", 1, time.Minute)
			if len(c) != 1 || b.complete(c[0].Lease, "ack") != nil {
				t.Fatalf("claim = %+v: want delivery %d, completed", c, e.ID)
			}
		} else if err := b.store.Outbox.Cancel(b.ctx, e.ID); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	b.clock.Advance(48 * time.Hour)
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: time.Hour, BatchSize: 2, MaxRows: 3}); err != nil || n != 3 {
		t.Fatalf("Prune = %d, %v; want 3", n, err)
	}
	var left []int64
	if err := b.db.SelectContext(b.ctx, &left, "SELECT id FROM courier_outbox ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, ids[3:]) {
		t.Fatalf("Prune of 3 left %v; want the 3 updated last, %v", left, ids[3:])
	}
}

// testPruneTakesDeadEndpointsRecords: Outbox.Prune deletes the breaker
// records past their age of endpoints with nothing left to send (one
// open after its last deliveries failed, one closed with a failure
// counted), and keeps those of an endpoint with a retry waiting and of a
// disabled one. A later delivery to a pruned endpoint is sent at once.
func testPruneTakesDeadEndpointsRecords(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 2, Cooldown: time.Minute}})
	const dead, streak, busy, disabled = "https://dead.example/h", "https://streak.example/h", "https://busy.example/h", "https://disabled.example/h"
	enqueue := func(endpoint, id string, maxAttempts int) {
		p := at(endpoint, id)
		p.MaxAttempts = maxAttempts
		b.enqueue(t, p)
	}
	enqueue(dead, "d-1", 1)
	enqueue(dead, "d-2", 1)
	enqueue(streak, "s-1", 1)
	enqueue(busy, "b-1", 3)
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if err := b.retry(c.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.store.Endpoints.Disable(b.ctx, disabled); err != nil {
		t.Fatal(err)
	}
	records := func() map[string]store.EndpointState {
		t.Helper()
		list, err := b.store.Endpoints.List(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(map[string]store.EndpointState)
		for _, e := range list {
			got[e.Endpoint] = e.State
		}
		return got
	}
	before := records()
	if want := map[string]store.EndpointState{dead: store.EndpointOpen, streak: store.EndpointClosed, busy: store.EndpointClosed, disabled: store.EndpointDisabled}; !maps.Equal(before, want) {
		t.Fatalf("breaker records %v, want %v", before, want)
	}
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 0 {
		t.Fatalf("Prune of young records = %d, %v; want 0", n, err)
	}
	b.clock.Advance(48 * time.Hour)
	if n, err := b.counted(t, "Outbox.Prune", b.store.Outbox.Prune, pruning.For(b.store).Outbox, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want the 2 records of endpoints with nothing to send", n, err)
	}
	if got, want := records(), map[string]store.EndpointState{busy: store.EndpointClosed, disabled: store.EndpointDisabled}; !maps.Equal(got, want) {
		t.Fatalf("after Prune breaker records %v, want %v", got, want)
	}
	enqueue(dead, "d-3", 1)
	if c := ids(b.claim(t, "w", 10, time.Minute)); !slices.Contains(c, "d-3") {
		t.Fatalf("claim = %v, want d-3 sent at once to the pruned endpoint", c)
	}
}

// testPruneTakesGoneEndpointsRecords: Outbox.Prune deletes the records,
// past their age, of endpoints the breaker disabled (one that answered
// 410 Gone, one failing for DisableAfter) once nothing is left to send to
// them; it keeps those an operator disabled (Disable, of an endpoint with
// no deliveries or of one failing for less than DisableAfter), which hold
// back deliveries to come until Enable, and that of a gone endpoint with
// a delivery waiting. They once stayed for good: every endpoint that ever
// went away kept a row, read by every claim's look for endpoints to
// probe. A later delivery to a pruned endpoint is sent at once.
func testPruneTakesGoneEndpointsRecords(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute, DisableAfter: time.Hour}})
	const (
		gone    = "https://gone.example/h"    // 410 Gone, nothing left to send
		failing = "https://failing.example/h" // disabled by the breaker after DisableAfter
		waiting = "https://waiting.example/h" // 410 Gone, a delivery waiting
		held    = "https://held.example/h"    // an operator's Disable, no deliveries
		paused  = "https://paused.example/h"  // an operator's Disable of a failing endpoint
	)
	enqueue := func(endpoint, id string, maxAttempts int) {
		p := at(endpoint, id)
		p.MaxAttempts = maxAttempts
		b.enqueue(t, p)
	}
	enqueue(gone, "g-1", 1)
	enqueue(failing, "f-1", 2)
	enqueue(waiting, "w-1", 1)
	enqueue(paused, "p-1", 3)
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		var err error
		switch c.Endpoint {
		case gone, waiting:
			err = b.fail(c.Lease, courier.CodeEndpointGone, 410)
		default:
			err = b.retry(c.Lease, retryParams{Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, Delay: time.Minute})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []string{held, paused} {
		if err := b.store.Endpoints.Disable(b.ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// The failing endpoint's probe, two hours on, fails again: it has
	// failed for longer than DisableAfter, and is disabled.
	b.clock.Advance(2 * time.Hour)
	probed := false
	for range 3 {
		for _, c := range b.claim(t, "w", 10, time.Minute) {
			if c.Endpoint != failing {
				t.Fatalf("claimed %s of %s; want only the failing endpoint's probe", c.NotificationID, c.Endpoint)
			}
			if err := b.fail(c.Lease, courier.CodeReceiverUnavailable, 503); err != nil {
				t.Fatal(err)
			}
			probed = true
		}
		if probed {
			break
		}
	}
	state := func(endpoint string) store.EndpointState {
		t.Helper()
		h, err := b.store.Endpoints.Get(b.ctx, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		return h.State
	}
	for _, e := range []string{gone, failing, waiting, held, paused} {
		if got := state(e); got != store.EndpointDisabled {
			t.Fatalf("%s is %s, want disabled", e, got)
		}
	}
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 0 {
		t.Fatalf("Prune of young records = %d, %v; want 0", n, err)
	}
	b.clock.Advance(48 * time.Hour)
	enqueue(waiting, "w-2", 1)
	if n, err := b.counted(t, "Outbox.Prune", b.store.Outbox.Prune, pruning.For(b.store).Outbox, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want the 2 records of endpoints the breaker disabled with nothing to send", n, err)
	}
	for e, want := range map[string]store.EndpointState{
		gone: store.EndpointClosed, failing: store.EndpointClosed,
		waiting: store.EndpointDisabled, held: store.EndpointDisabled, paused: store.EndpointDisabled,
	} {
		if got := state(e); got != want {
			t.Errorf("after Prune %s is %s, want %s", e, got, want)
		}
	}
	enqueue(gone, "g-2", 1)
	if c := ids(b.claim(t, "w", 10, time.Minute)); !slices.Equal(c, []string{"g-2"}) {
		t.Fatalf("claim = %v, want g-2 sent at once to the pruned endpoint, and nothing to the disabled ones", c)
	}
}

// testPruneLeavesOnlyWhatAnOperatorSettles: a year of traffic, pruned by
// every retention pass, leaves in courier's tables only what an operator
// must act on or set: the deliveries that failed for good, the ordering
// key one of them blocks, the endpoint an operator disabled, its limits
// and its contract pin. Once the operator settles them (Cancel, Enable,
// the zero Limits), the next pass leaves only the pin, which guards the
// commands to come (see Contracts). Each pass deletes what its count (a
// dry run's, internal/pruning) counted just before.
func testPruneLeavesOnlyWhatAnOperatorSettles(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{
		Breaker:           store.BreakerConfig{Threshold: 1, Cooldown: time.Minute, DisableAfter: time.Hour},
		OrderingOnFailure: store.OrderingHoldKey,
	})
	const (
		live    = "https://receiver.example/hooks"
		gone    = "https://gone.example/h"
		refused = "https://refused.example/h"
		idle    = "https://idle.example/h"
		held    = "https://held.example/h"
	)
	var failed []int64
	for i := range 3 { // one key's deliveries, sent one after the other
		b.enqueue(t, keyed(fmt.Sprintf("k-%d", i), "k"))
	}
	blocked := at(refused, "b-1")
	blocked.OrderingKey, blocked.MaxAttempts = "kb", 1
	failed = append(failed, b.enqueue(t, blocked).ID)
	g := at(gone, "g-1")
	g.MaxAttempts = 1
	failed = append(failed, b.enqueue(t, g).ID)
	i := at(idle, "i-1")
	i.MaxAttempts = 1
	failed = append(failed, b.enqueue(t, i).ID)
	if err := b.store.Outbox.Cancel(b.ctx, b.enqueue(t, delivery("c-1")).ID); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		for _, c := range b.claim(t, "w", 10, time.Minute) {
			var err error
			switch c.Endpoint {
			case live:
				err = b.complete(c.Lease, "ack")
			case refused:
				err = b.fail(c.Lease, courier.CodeReceiverRejected, 400)
			case gone:
				err = b.fail(c.Lease, courier.CodeEndpointGone, 410)
			case idle:
				err = b.fail(c.Lease, courier.CodeReceiverUnavailable, 503)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := b.store.Endpoints.Disable(b.ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.SetLimits(b.ctx, held, store.Limits{MaxInFlight: 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Contracts.Pin(b.ctx, held, strings.Repeat("a", 64)); err != nil {
		t.Fatal(err)
	}
	b.processed(t, "r-1")
	if _, err := b.store.Replay.Remember(b.ctx, "key", "nonce", b.clock.Now().Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	counts := pruning.For(b.store)
	prune := func() {
		t.Helper()
		week := store.PruneParams{OlderThan: 7 * 24 * time.Hour}
		for name, pass := range map[string]struct {
			prune func(context.Context, store.PruneParams) (int, error)
			count pruning.Count
		}{
			"Outbox.Prune": {b.store.Outbox.Prune, counts.Outbox}, "Outbox.PruneAttempts": {b.store.Outbox.PruneAttempts, counts.Attempts},
			"Inbox.Prune": {b.store.Inbox.Prune, counts.Inbox}, "Replay.Prune": {b.store.Replay.Prune, counts.Replay},
		} {
			if _, err := b.counted(t, name, pass.prune, pass.count, week); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	rows := func(want map[string]int) {
		t.Helper()
		for table, n := range want {
			var got int
			if err := b.db.GetContext(b.ctx, &got, "SELECT COUNT(*) FROM "+table); err != nil || got != n {
				t.Errorf("%s holds %d rows (%v), want %d", table, got, err, n)
			}
		}
	}
	b.clock.Advance(365 * 24 * time.Hour)
	prune()
	rows(map[string]int{
		"courier_outbox": 3, "courier_attempts": 0, "courier_inbox": 0, "courier_replay": 0, "courier_replay_counts": 0,
		"courier_ordering_keys": 1, "courier_endpoints": 1, "courier_endpoint_limits": 1, "courier_contracts": 1,
		"courier_subscriptions": 0,
	})
	for _, id := range failed {
		if err := b.store.Outbox.Cancel(b.ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.store.Endpoints.Enable(b.ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Endpoints.SetLimits(b.ctx, held, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(8 * 24 * time.Hour)
	prune()
	rows(map[string]int{
		"courier_outbox": 0, "courier_ordering_keys": 0, "courier_endpoints": 0, "courier_endpoint_limits": 0, "courier_contracts": 1,
	})
}

// testPruneKeepsAnEndpointDisabledAgain: an operator's Disable of a
// failing endpoint, given again later (a script that applies what it
// wants each run, or a second operator), is still an operator's Disable:
// Outbox.Prune keeps its record until Enable, however long ago the
// endpoint began to fail. The second Disable once stamped the record
// anew, so that it read as failing for DisableAfter when disabled, which
// is how the prune knows the breaker's; the record went, and deliveries
// to come went out to the endpoint the operator held back.
func testPruneKeepsAnEndpointDisabledAgain(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute, DisableAfter: time.Hour}})
	const paused = "https://paused.example/h"
	p := at(paused, "p-1")
	p.MaxAttempts = 1
	b.enqueue(t, p)
	for _, c := range b.claim(t, "w", 10, time.Minute) {
		if err := b.fail(c.Lease, courier.CodeReceiverUnavailable, 503); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.store.Endpoints.Disable(b.ctx, paused); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Hour)
	if err := b.store.Endpoints.Disable(b.ctx, paused); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(48 * time.Hour)
	if n, err := b.store.Outbox.Prune(b.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 0 {
		t.Fatalf("Prune = %d, %v; want nothing pruned (a failed delivery, an operator's Disable)", n, err)
	}
	if h, err := b.store.Endpoints.Get(b.ctx, paused); err != nil || h.State != store.EndpointDisabled {
		t.Fatalf("after Prune the endpoint disabled twice is %s (%v), want disabled", h.State, err)
	}
	b.enqueue(t, at(paused, "p-2"))
	if c := ids(b.claim(t, "w", 10, time.Minute)); len(c) != 0 {
		t.Fatalf("claim = %v, want nothing sent to the disabled endpoint", c)
	}
}

// counted runs prune with p just after count, its dry run's count (see
// internal/pruning), and fails the test unless the prune deleted what the
// count counted.
func (b *bundle) counted(t *testing.T, name string, prune func(context.Context, store.PruneParams) (int, error), count pruning.Count, p store.PruneParams) (int, error) {
	t.Helper()
	want, err := count(b.ctx, p.OlderThan)
	if err != nil {
		t.Fatalf("counting %s: %v", name, err)
	}
	n, err := prune(b.ctx, p)
	if err == nil && n != want {
		t.Fatalf("%s = %d; its count counted %d", name, n, want)
	}
	return n, err
}

package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/protocol"
)

// Run delivers until ctx is done or Stop is called, and returns nil once
// every attempt it started is settled. When ctx is done, the attempts in
// flight are cut short at once and settled as retries with code
// worker_stopped, due again at once, their deliveries' budgets spared, and
// what Run claimed and had not started is given back (see Worker); for a
// soft shutdown call Stop instead. Run returns an error only for a
// configuration it cannot run with, and for a Store that was closed
// (store.Store.Close), on which no claim can succeed: it hears of
// the Close at once, not at its next poll (a claim waiting in the
// database is cut short, leasing nothing), and returns the Store's error,
// code database_unavailable, once the attempts in flight are settled (as
// far as the closed Store lets them be). Nothing more is sent once the
// Store is closed: no outcome could be recorded, and a request sent would
// be sent again once its lease expired. The Store is looked at last as the
// transport comes to write a request, once it has a connection for it; a
// request being written or answered as the Close lands was sent, and its
// outcome goes unrecorded: it is sent again once its lease expires, for
// the receiver to dedupe. What was claimed and not yet sent is not given
// back either, for the closed Store cannot: its leases expire, as Run
// logs once, at Warn, with how many it left. Any other claim that fails
// is logged and made again on a timer of its own (see PollInterval), or
// at the next wake-up or poll if sooner.
func (w *Worker) Run(ctx context.Context) error {
	if !w.enter() {
		return nil
	}
	defer w.leave()
	w.warnIgnoredProxy(ctx)
	defer w.reportLeftToLeases(ctx) // once every attempt of the Run has ended
	actx, cancel := w.attemptContext(ctx)
	defer cancel()
	wake := w.listen(ctx)
	defer wake.close()

	var inflight sync.WaitGroup
	defer inflight.Wait()
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	// A claim that failed spent the wake-up that called for it: the Run
	// claims again on a timer, as it listens again (see wakeups.retry).
	var again doublingTimer
	defer again.stop()

	// Claims wait until at least half a batch fits: a claim is a write
	// transaction, and taking rows one at a time as slots free up would
	// cost one per delivery. With an endpoint holding its whole share the
	// others' share must still be claimed as it frees up: the wait is for
	// no more than that share, and, with attempts that stall holding
	// more, for no more than the slots they leave (see claimForRun).
	minClaim := max(1, min(w.cfg.BatchSize, w.cfg.Concurrency)/2)
	if others := w.cfg.Concurrency - w.cfg.EndpointConcurrency; others > 0 {
		minClaim = min(minClaim, others)
	}
	afterShort := max(1, w.cfg.EndpointConcurrency/2)
	start := func(c protocol.Claimed, claimedAt time.Time) bool {
		// The slots were free when the claim counted them, but a Work of
		// the worker's may have taken some since: waiting for one, the
		// Run still stops at once.
		if !w.takeSlot(ctx) {
			return false
		}
		inflight.Add(1)
		n := w.begin()
		go func() {
			defer inflight.Done()
			defer w.end(n) // even if a callback ends the goroutine (runtime.Goexit)
			w.deliver(actx, n, c, claimedAt)
		}()
		return true
	}
	for !w.isStopping(ctx) {
		rc, ok, err := w.claimForRun(ctx, actx, minClaim, start)
		if !ok {
			break
		}
		if errors.Is(err, protocol.ErrClosed) {
			return err
		}
		var retry <-chan time.Time
		if err != nil {
			retry = again.next(w.cfg.PollInterval)
		} else {
			again.delay = 0
		}
		// A full batch started means more may be due: claim again as soon
		// as there is room for another. So may a part of one: the claim
		// leases no more of an endpoint than its room (EndpointConcurrency,
		// its limits), which an attempt gives back as its lease is settled.
		// Otherwise wait for a wake-up or the next poll, or for room when
		// there was none.
		var ready func() bool // the room to wait for; nil for none
		switch {
		case rc.want < minClaim, rc.want == rc.got && w.cfg.Concurrency-len(w.slots) < minClaim:
			ready = w.slotFreed(rc.seen) // too few slots
		case rc.want == rc.got:
			continue
		default:
			// The claim came back short with slots free: the endpoints in
			// flight were at their room. Each of their attempts gives one
			// delivery back as its lease is settled; let half a share come
			// back first, or a claim is made per delivery. Room given
			// back before the claim was the claim's: only what came since
			// counts (a claim for it would lease nothing).
			if need := min(afterShort, w.roomToCome(rc.seen)); need > 0 {
				ready = w.givenBack(rc.seen, need)
			}
		}
		if !w.await(ctx, ready, poll.C, wake, retry) {
			break
		}
	}
	return nil
}

// claimForRun makes one claim of Run's, in the worker's claim turn (see
// Worker.claiming): as many deliveries as there are free slots for, up to
// BatchSize, if that is at least minClaim. Before the turn passes on, it
// starts with start, which takes a slot, each delivery whose lease still
// covers an attempt; it gives back the others, and the rest of the batch
// when start reports that the worker stopped while it waited for a slot.
// It returns what the claim came to, false once the worker stops, and the
// claim's error; the error of a closed Store is not logged, as Run
// returns it.
func (w *Worker) claimForRun(ctx, actx context.Context, minClaim int, start func(protocol.Claimed, time.Time) bool) (rc runClaim, ok bool, err error) {
	if !w.takeClaimTurn(ctx) {
		return rc, false, nil
	}
	// ended before the slots are counted: a slot freed after it is one
	// more; given is read again as the claim's transaction begins, if a
	// claim is made.
	rc.seen = w.roomNow()
	rc.want = min(w.cfg.Concurrency-len(w.slots), w.cfg.BatchSize)
	// Slots held by attempts that have run for a PollInterval already may
	// not come back before their Timeout: endpoints that stall, each
	// holding its share or all its limits allow. When those leave fewer
	// than minClaim for the others, waiting for half a batch would starve
	// every other endpoint meanwhile, so the claim is for the slots left,
	// however few, once all of them are free. Such a claim comes when an
	// attempt that long ends (at most Concurrency of them a PollInterval)
	// or when the attempts the last one started have all ended: one claim
	// per round of the slots left, as often as the other endpoints answer.
	if others := w.cfg.Concurrency - w.lingering(w.cfg.PollInterval); others < minClaim {
		minClaim = max(1, others)
	}
	// On a closed Store the claim is made even without room, or a reading
	// of the clock: it fails at once, leasing nothing, and its error is
	// what Run returns.
	closed := w.storeClosed()
	if rc.want < minClaim && !closed {
		w.passClaimTurn()
		return rc, true, nil
	}
	claimedAt, told := w.now(ctx)
	if !told && !closed {
		w.passClaimTurn()
		return rc, true, errClock
	}
	// The room given back before the claim's transaction began is the
	// claim's (claimSaw); what comes after counts as the next claim's.
	// Should the claim fail before it begins, all of it does.
	w.claimSaw = w.given.Load()
	batch, began, err := w.claim(ctx, max(rc.want, 1))
	before := claimedAt
	claimedAt = leasedFrom(before, began, 0) // the earliest: what gives leases back measures from it
	rc.seen.given = w.claimSaw
	if w.claimed != nil {
		w.claimed(len(batch))
	}
	if err != nil && !w.isStopping(ctx) && !errors.Is(err, protocol.ErrClosed) {
		w.cfg.Logger.ErrorContext(ctx, "worker: claim failed", slog.Any(logkey.Error, err))
	}
	if w.isStopping(actx) { // stopped during the claim: none of it starts
		w.passClaimTurn()
		w.release(actx, claimedAt, leasesOf(batch)...)
		return rc, false, nil
	}
	// What the claim itself took out of the leases may leave them too
	// short for an attempt: those are given back, and only the deliveries
	// that start count toward a full batch, or a claim that takes too long
	// would be made again and again at once.
	var short []protocol.Lease
	for i, c := range batch {
		leasedAt := leasedFrom(before, began, c.Pass)
		if now, told := w.now(actx); !told || !w.leaseCovers(actx, c, leasedAt, now) {
			short = append(short, c.Lease)
			continue
		}
		if !start(c, leasedAt) { // stopped while waiting for a slot
			w.passClaimTurn()
			w.release(actx, claimedAt, append(short, leasesOf(batch[i:])...)...)
			return rc, false, nil
		}
		rc.got++
	}
	w.passClaimTurn()
	w.release(actx, claimedAt, short...)
	return rc, true, err
}

// runClaim is what one claim of Run's came to: how many deliveries it
// wanted (the free slots, up to BatchSize), how many of them it started,
// and the room counters as it saw them.
type runClaim struct {
	want, got int
	seen      mark
}

// takeClaimTurn waits until no other claim of the worker is in progress
// and takes the turn, unless ctx ends or Stop is called first. The one in
// progress holds the turn no longer than its claim, which its own context
// or Stop cuts short (see claim), and, in Run, the taking of slots for
// what it starts, which attempts that end give back.
func (w *Worker) takeClaimTurn(ctx context.Context) bool {
	return w.acquire(ctx, w.claiming, w.passClaimTurn)
}

// takeSlot takes a slot for an attempt, unless the worker stops first
// (see acquire). One it gives back at once counts as freed (freeSlot): a
// Run may have counted it as taken.
func (w *Worker) takeSlot(ctx context.Context) bool { return w.acquire(ctx, w.slots, w.freeSlot) }

// passClaimTurn ends the turn takeClaimTurn took.
func (w *Worker) passClaimTurn() { <-w.claiming }

// await waits until ready reports the room it waits for (a nil ready
// waits for none), or a wake-up, the next poll or retry (the time to make
// a failed claim again) comes, or the worker stops; it reports whether to
// claim again. While the wake-ups are lost (the listener failed) it
// listens again on a timer of its own, and claims once it listens again:
// what was enqueued while it did not listen woke nobody.
func (w *Worker) await(ctx context.Context, ready func() bool, poll <-chan time.Time, wake *wakeups, retry <-chan time.Time) bool {
	if w.awaiting != nil {
		w.awaiting()
	}
	for {
		var changed <-chan struct{}
		if ready != nil {
			changed = w.changed.wait() // before ready looks: a change after it is heard
			if ready() {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-w.stopping:
			return false
		case <-changed:
		case <-poll:
			return true
		case <-retry:
			return true
		case <-w.life.Done(): // the claim fails at once: Run returns its error
			return true
		case <-wake.retryC():
			if wake.listen() {
				return true
			}
		case _, ok := <-wake.ch:
			if !ok {
				if w.isStopping(ctx) { // the listener ended with Run
					return false
				}
				wake.lost()
			}
			return true
		}
	}
}

// claimParams is a claim of up to limit deliveries, made with ctx. As
// each of its transactions begins, it appends a reading of the worker's
// clock to began (see claim).
func (w *Worker) claimParams(ctx context.Context, limit int, began *[]time.Time) protocol.ClaimParams {
	return protocol.ClaimParams{Owner: w.cfg.Owner, Limit: limit, Lease: w.cfg.Lease, EndpointCap: w.cfg.EndpointConcurrency,
		Ended: func(e protocol.Ended) { w.withheld(ctx, e) },
		Reclaimed: func(n int) {
			w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "worker: expired leases taken back",
				slog.Int(logkey.Deliveries, n), slog.String(logkey.Code, string(courier.CodeLeaseExpired)))
		},
		Began: func() {
			w.claimSaw = w.given.Load()
			if w.claimBegan != nil {
				w.claimBegan()
			}
			t, _ := w.now(ctx)
			*began = append(*began, t)
		}}
}

// withheld logs a delivery a claim ended rather than lease, made with
// ctx: at Error one quarantined (its stored bytes were altered, or do not
// open under the Store's keys: an operator's to look into, then redrive
// or cancel), at Info one suppressed (its subscription changed, as its
// owner asked). Nothing was sent; the Store's Hook and Health count it
// too.
func (w *Worker) withheld(ctx context.Context, e protocol.Ended) {
	level, msg := slog.LevelInfo, "worker: delivery suppressed at claim, not sent"
	if e.Status == courier.StatusQuarantined {
		level, msg = slog.LevelError, "worker: delivery quarantined at claim, not sent"
	}
	w.cfg.Logger.LogAttrs(ctx, level, msg,
		slog.Int64(logkey.Delivery, e.DeliveryID), slog.String(logkey.Endpoint, endpoint.Redact(e.Endpoint)),
		slog.String(logkey.EndpointRef, endpoint.Ref(e.Endpoint)), slog.String(logkey.Code, string(e.Code)))
}

// Listening again after the wake-ups are lost, and claiming again after a
// claim failed: first after minRelisten, the wait doubling up to
// maxRelisten (or PollInterval, if less).
const (
	minRelisten = 100 * time.Millisecond
	maxRelisten = 5 * time.Second
)

// doublingTimer is a timer whose waits double: a Run's for claiming again
// after a claim failed, its wake-ups' for listening again.
type doublingTimer struct {
	timer *time.Timer
	delay time.Duration // the last wait; 0 after a claim that did not fail
}

// next sets the timer, each wait twice the last, and returns its channel.
func (b *doublingTimer) next(pollInterval time.Duration) <-chan time.Time {
	b.delay = min(max(minRelisten, 2*b.delay), min(maxRelisten, pollInterval))
	if b.timer == nil {
		b.timer = time.NewTimer(b.delay)
	} else {
		b.timer.Reset(b.delay)
	}
	return b.timer.C
}

// stop stops the timer.
func (b *doublingTimer) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}

// wakeups are a Run's wake-ups from the store (see store.Open): ch while
// it listens; after its listener failed, or could not start, retry fires
// when to listen again, and the Run polls until then. They listen in a
// context that Stop ends too, so neither listening nor waiting for a
// listener delays Stop.
type wakeups struct {
	w      *Worker
	ctx    context.Context
	cancel context.CancelFunc
	ch     <-chan struct{} // nil while not listening
	stop   func()          // ends the listener of ch
	retry  doublingTimer   // while not listening: when to listen again
	down   bool            // not listening, and that was logged
	failed bool            // a failure to listen was logged since they were last lost or came back
}

// listen starts a Run's wake-ups; without them the Run polls, and
// listens again on a timer.
func (w *Worker) listen(ctx context.Context) *wakeups {
	lctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(w.stopCtx, cancel) //nolint:contextcheck // Stop's context cancels lctx; lctx stays the Run's
	l := &wakeups{w: w, ctx: lctx, cancel: func() { stop(); cancel() }}
	l.listen()
	return l
}

// listen listens for wake-ups, and reports whether it does; if it cannot,
// it logs it (once until it listens again) and sets the timer to try
// again.
func (l *wakeups) listen() bool {
	ch, stop, err := l.w.outbox.Listen(l.ctx)
	if err == nil {
		if l.down {
			l.w.cfg.Logger.InfoContext(l.ctx, "worker: wake-ups back")
		}
		l.ch, l.stop, l.retry.delay, l.down, l.failed = ch, stop, 0, false, false
		return true
	}
	if l.ctx.Err() != nil || errors.Is(err, protocol.ErrClosed) { // Run ends, or its next claim fails on the closed Store: no warning, no retry
		return false
	}
	if !l.failed {
		l.w.cfg.Logger.WarnContext(l.ctx, "worker: wake-ups unavailable, polling", slog.Any(logkey.Error, err))
		l.down, l.failed = true, true
	}
	l.retry.next(l.w.cfg.PollInterval)
	return false
}

// lost ends the listener whose wake-ups ended (the connection it held
// failed), logs it, and sets the timer to listen again.
func (l *wakeups) lost() {
	l.stop()
	l.ch, l.stop = nil, nil
	l.w.cfg.Logger.WarnContext(l.ctx, "worker: wake-ups lost, listening again")
	l.down, l.failed = true, false // the first failure to listen again is logged too
	l.retry.next(l.w.cfg.PollInterval)
}

// retryC is when to listen again: never while listening.
func (l *wakeups) retryC() <-chan time.Time {
	if l.ch != nil || l.retry.timer == nil {
		return nil
	}
	return l.retry.timer.C
}

// close ends the wake-ups.
func (l *wakeups) close() {
	if l.stop != nil {
		l.stop()
	}
	l.retry.stop()
	l.cancel()
}

// Work claims one batch of due deliveries, delivers them and returns when
// every attempt is settled, with how many it claimed. Run is Work in a
// loop with wake-ups; Work suits tests and schedulers of one's own. It
// stops as Run does (see Worker): when ctx is done or Stop is called, the
// deliveries of the batch not yet started are given back, and when ctx is
// done the attempts in flight are cut short. After Stop it returns
// courier.CodeWorkerStopped. On a closed Store (store.Store.Close) its
// claim fails at once, and Work returns the Store's error, code
// database_unavailable; a Store closed once the batch was claimed sends
// no more of it than Run would (see Run), and Work returns how many it
// claimed, and nil.
func (w *Worker) Work(ctx context.Context) (int, error) {
	if !w.enter() {
		return 0, courier.CodeWorkerStopped
	}
	defer w.leave()
	w.warnIgnoredProxy(ctx)
	defer w.reportLeftToLeases(ctx) // once every attempt of the Work has ended
	if !w.takeClaimTurn(ctx) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, courier.CodeWorkerStopped // Stop came while another claim was in progress
	}
	// On a closed Store the claim is made even without a reading of the
	// clock: it fails at once, leasing nothing, and its error is what Work
	// returns.
	claimedAt, told := w.now(ctx)
	if !told && !w.storeClosed() {
		w.passClaimTurn()
		return 0, errClock
	}
	batch, began, err := w.claim(ctx, w.cfg.BatchSize)
	before := claimedAt
	claimedAt = leasedFrom(before, began, 0) // the earliest: what gives leases back measures from it
	w.passClaimTurn()
	if err != nil {
		if ctx.Err() == nil && w.isStopping(ctx) {
			return 0, courier.CodeWorkerStopped // Stop cut the claim short
		}
		return 0, err
	}
	actx, cancel := w.attemptContext(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range batch {
		if !w.takeSlot(actx) {
			w.release(actx, claimedAt, leasesOf(batch[i:])...)
			break
		}
		n := w.begin()
		wg.Go(func() {
			defer w.end(n)
			w.deliver(actx, n, c, leasedFrom(before, began, c.Pass))
		})
	}
	wg.Wait()
	return len(batch), nil
}

// acquire takes a token of sem (an attempt's slot, or the claim turn),
// unless the worker stops first; one it took as the worker stopped it
// gives back with put.
func (w *Worker) acquire(ctx context.Context, sem chan struct{}, put func()) bool {
	select {
	case sem <- struct{}{}:
		if w.isStopping(ctx) {
			put()
			return false
		}
		return true
	case <-w.stopping:
		return false
	case <-ctx.Done():
		return false
	}
}

func leasesOf(batch []protocol.Claimed) []protocol.Lease {
	out := make([]protocol.Lease, len(batch))
	for i, c := range batch {
		out[i] = c.Lease
	}
	return out
}

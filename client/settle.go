package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/protocol"
)

// settler group-commits outcomes: attempts that finish while a settle
// transaction is running are settled together in the next one, so under
// load a transaction serves many deliveries, and when idle each outcome
// is settled at once, with no linger. The goroutine whose outcome starts a
// transaction runs it; when it is done it hands the next batch to one of
// the goroutines waiting in it, so no attempt's goroutine settles others'
// outcomes for long.
type settler struct {
	apply func(context.Context, ...protocol.Outcome) ([]protocol.Settled, error) // protocol.Outbox.Settle

	mu      sync.Mutex
	queue   []*settleReq // waiting for the next transaction
	running bool         // a transaction is running or about to
}

type settleReq struct {
	ctx      context.Context // the caller's: its deadline bounds the batch it is in
	oc       protocol.Outcome
	recorded func()            // nil, or called once a batch gave up oc's lease (see leaseGone)
	done     chan settleResult // buffered: one result, or lead
}

type settleResult struct {
	settled protocol.Settled
	err     error
	lead    bool // run the next transaction instead
}

// settle records oc, in a transaction shared with the outcomes that
// arrive meanwhile. The transaction runs with the values of the ctx of
// the call that runs it, bounded by the latest deadline among the ctxs of
// the batch's calls (none if one has none) and by no one's cancellation:
// a call whose ctx ended while it waited to run the batch does not fail
// the outcomes of the others, and its own is recorded if the store still
// takes it (the lease fences it). An outcome of the batch the store could
// not write alone (notWritten) fails its own call, not the others'.
//
// recorded, if not nil, is called once the transaction recorded oc, or
// found its lease lost (see leaseGone), as soon as it committed: by the
// call that ran it, for every outcome of the batch before their calls
// hear of it, so that what waits on the leases they gave up hears of them
// all at once.
func (s *settler) settle(ctx context.Context, oc protocol.Outcome, recorded func()) (protocol.Settled, error) {
	r := &settleReq{ctx: ctx, oc: oc, recorded: recorded, done: make(chan settleResult, 1)}
	s.mu.Lock()
	s.queue = append(s.queue, r)
	lead := !s.running
	s.running = true
	s.mu.Unlock()
	if !lead {
		res := <-r.done
		if !res.lead {
			return res.settled, res.err
		}
	}

	s.mu.Lock()
	batch := s.queue
	s.queue = nil
	s.mu.Unlock()
	answered := false
	defer func() {
		if !answered { // the goroutine ends inside apply: a callback's runtime.Goexit, a panic
			for _, q := range batch {
				if q != r {
					q.done <- settleResult{err: errSettleAbandoned}
				}
			}
		}
		s.handOff()
	}()

	outcomes := make([]protocol.Outcome, len(batch))
	for i, q := range batch {
		outcomes[i] = q.oc
	}
	bctx, cancel := batchContext(ctx, batch)
	settled, err := s.apply(bctx, outcomes...)
	cancel()
	for i, q := range batch {
		if err == nil && q.recorded != nil && leaseGone(settled[i].Err) {
			q.recorded()
		}
	}
	var mine settleResult
	for i, q := range batch {
		res := settleResult{err: err}
		if err == nil {
			res.settled = settled[i]
			if notWritten(settled[i].Err) {
				res = settleResult{err: settled[i].Err}
			}
		}
		if q == r {
			mine = res
		} else {
			q.done <- res
		}
	}
	answered = true
	return mine.settled, mine.err
}

// handOff hands the next transaction to the first call waiting for one,
// or marks none running. It runs however the transaction's call ended:
// one that ended its goroutine inside apply (a store callback's
// runtime.Goexit) would otherwise leave every later settle waiting.
func (s *settler) handOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) > 0 {
		s.queue[0].done <- settleResult{lead: true}
	} else {
		s.running = false
	}
}

// errSettleAbandoned is the error of the outcomes of a batch whose
// transaction's call ended without an answer (see handOff): whether it
// wrote them is unknown, so each call writes its own again. One the
// abandoned transaction had written is then found with its lease gone,
// and reported as a lease lost (a store callback that ends its goroutine
// after the commit, as a test's t.FailNow in a Hook does).
var errSettleAbandoned = &coded.Error{Code: courier.CodeInternal, Msg: "client: the settle of this outcome ended without an answer"}

// notWritten reports whether an outcome's Settled.Err says the store
// could not write it, rather than a verdict on it (its lease was lost, it
// is invalid). The store settles a batch's outcomes one per transaction
// when a row of one of them is held by another transaction (see
// store.Outbox's settle): the others are settled, and the held one's
// failure is returned as its own call's error, so that the worker's retry
// loop (persist) tries that outcome again, and no other.
func notWritten(err error) bool {
	return err != nil && !errors.Is(err, courier.CodeLeaseLost) && !errors.Is(err, courier.CodeInvalidArgument)
}

// leaseGone reports whether an outcome's Settled.Err says its lease is
// the worker's no more: the outcome was recorded (nil), or the lease was
// lost. An outcome refused as invalid is not applied, and one not written
// (notWritten) not yet: their leases are held still.
func leaseGone(err error) bool { return err == nil || errors.Is(err, courier.CodeLeaseLost) }

// batchContext is the context a batch is settled in: ctx's values, no
// cancellation, and the latest deadline of the batch's callers (none if
// one of them has none).
func batchContext(ctx context.Context, batch []*settleReq) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, q := range batch {
		d, ok := q.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(ctx), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), latest)
}

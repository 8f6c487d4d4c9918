package client

import (
	"context"
	"sync"

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
	oc   protocol.Outcome
	done chan settleResult // buffered: one result, or lead
}

type settleResult struct {
	settled protocol.Settled
	err     error
	lead    bool // run the next transaction instead
}

// settle records oc, in a transaction shared with the outcomes that
// arrive meanwhile. ctx bounds the transaction if this call runs it.
func (s *settler) settle(ctx context.Context, oc protocol.Outcome) (protocol.Settled, error) {
	r := &settleReq{oc: oc, done: make(chan settleResult, 1)}
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

	outcomes := make([]protocol.Outcome, len(batch))
	for i, q := range batch {
		outcomes[i] = q.oc
	}
	settled, err := s.apply(ctx, outcomes...)
	var mine settleResult
	for i, q := range batch {
		res := settleResult{err: err}
		if err == nil {
			res.settled = settled[i]
		}
		if q == r {
			mine = res
		} else {
			q.done <- res
		}
	}

	s.mu.Lock()
	if len(s.queue) > 0 {
		s.queue[0].done <- settleResult{lead: true}
	} else {
		s.running = false
	}
	s.mu.Unlock()
	return mine.settled, mine.err
}

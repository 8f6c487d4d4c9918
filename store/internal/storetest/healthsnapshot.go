package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// testHealthIsOneSnapshot: Health's figures come from several reads, and
// they agree with each other while an application enqueues and a worker
// claims and settles: each Health reads one state of the outbox. The
// clock stands still and nothing waits for room, a key or a later time,
// so in any one state every pending delivery is due (Due equals the
// pending count, none has waited), and none is overdue or past its lease.
// Read one after another, outside one snapshot, the pending count and the
// due rows came from different states: an enqueue or a claim committing
// between them made Due more or fewer than the deliveries pending.
func testHealthIsOneSnapshot(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{Durability: store.DurabilityRelaxed}) // many commits, quickly
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	var (
		wg                sync.WaitGroup
		enqueued, settled atomic.Int64
		errMu             sync.Mutex
		firstErr          error
	)
	failed := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil && ctx.Err() == nil {
			firstErr = err
		}
		stop()
	}
	wg.Go(func() { // the application
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := b.store.Outbox.Enqueue(ctx, b.db, delivery(fmt.Sprintf("snap-%d", i))); err != nil {
				failed(fmt.Errorf("enqueue: %w", err))
				return
			}
			enqueued.Add(1)
		}
	})
	wg.Go(func() { // a worker: every fifth fails for good, the others succeed
		for ctx.Err() == nil {
			got, err := b.proto().Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 8, Lease: time.Minute})
			if err != nil {
				failed(fmt.Errorf("claim: %w", err))
				return
			}
			ocs := make([]protocol.Outcome, 0, len(got))
			for _, c := range got {
				oc := protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded}
				if c.DeliveryID%5 == 0 {
					oc = protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 400}
				}
				ocs = append(ocs, oc)
			}
			if len(ocs) == 0 {
				continue
			}
			done, err := b.proto().Settle(ctx, ocs...)
			if err != nil {
				failed(fmt.Errorf("settle: %w", err))
				return
			}
			for _, d := range done {
				if d.Err != nil {
					failed(fmt.Errorf("settle: %w", d.Err))
					return
				}
			}
			settled.Add(int64(len(ocs)))
		}
	})
	// Health is read until it has been read many times while both moved
	// deliveries a good many times.
	var bad []string
	calls := 0
	for ; ctx.Err() == nil && (calls < 300 || enqueued.Load() < 300 || settled.Load() < 300); calls++ {
		h, err := b.store.Outbox.Health(ctx)
		if err != nil {
			failed(fmt.Errorf("health: %w", err))
			break
		}
		waiting := h.Counts[courier.StatusPending] + h.Counts[courier.StatusRetryWait]
		switch {
		case h.Due != waiting:
			bad = append(bad, fmt.Sprintf("due %d, pending or retrying %d", h.Due, waiting))
		case h.OldestDueAge != 0 || h.Overdue != 0 || h.ExpiredLeases != 0:
			bad = append(bad, fmt.Sprintf("oldest due %v, overdue %d, expired leases %d, want none", h.OldestDueAge, h.Overdue, h.ExpiredLeases))
		case h.Failed != h.Counts[courier.StatusFailed]:
			bad = append(bad, fmt.Sprintf("failed %d, counted failed %d", h.Failed, h.Counts[courier.StatusFailed]))
		}
	}
	stop()
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d Health reads contradicted themselves (%d enqueued, %d settled meanwhile), the first: %s",
			len(bad), calls, enqueued.Load(), settled.Load(), bad[0])
	}
}

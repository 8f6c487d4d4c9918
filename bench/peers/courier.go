package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// side is one system under measurement, on a fresh database of its own.
type side interface {
	// enqueue writes the notifications, each in a transaction of its
	// own, for the receiver, and returns how long that took.
	enqueue(ctx context.Context, ns []benchkit.Request) (time.Duration, error)
	// deliver works the backlog of n due notifications, one POST each,
	// and returns the time from its start to the last completion.
	deliver(ctx context.Context, n int) (time.Duration, error)
	// verify checks that the database holds exactly n notifications, each
	// completed after exactly one attempt.
	verify(ctx context.Context, n int) error
	close() error
}

// courierConfig is what courier's side needs besides its Store.
type courierConfig struct {
	target      string // the receiver's URL
	guard       client.Guard
	signer      signature.Signer
	concurrency int
	// endpointConcurrency is the Worker's EndpointConcurrency; 0 keeps
	// its default.
	endpointConcurrency int
}

// courierSide is courier on one database: Outbox.Enqueue in the
// application's transaction, and client.Worker on its real path (signing,
// the SSRF guard opened for the loopback receiver, Ack verification).
type courierSide struct {
	s       *store.Store
	cfg     courierConfig
	analyze bool         // refresh the planner's statistics before delivery (PostgreSQL)
	release func() error // closes the Store and drops its database
}

var _ side = (*courierSide)(nil)

func (c *courierSide) close() error { return c.release() }

// enqueue runs one transaction per notification, begun with Store.Begin as
// an application does: BEGIN, Outbox.Enqueue, COMMIT.
func (c *courierSide) enqueue(ctx context.Context, ns []benchkit.Request) (time.Duration, error) {
	return timedEach(ctx, "courier enqueue", ns, func(ctx context.Context, n benchkit.Request) error {
		tx, err := c.s.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := c.s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: n.ID, Endpoint: c.cfg.target, Payload: n.Body}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// deliver runs a Worker with cfg's concurrency (BatchSize at its default,
// the concurrency) until n attempts have settled. The first attempt that
// does not succeed ends the run with its outcome and code.
func (c *courierSide) deliver(ctx context.Context, n int) (time.Duration, error) {
	if c.analyze {
		if _, err := c.s.DB().ExecContext(ctx, "ANALYZE courier_outbox"); err != nil {
			return 0, fmt.Errorf("courier: analyze: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	var settled atomic.Int64
	var failure error
	var once sync.Once
	done := make(chan struct{})
	finish := func(err error) {
		once.Do(func() {
			failure = err
			close(done)
		})
	}
	w, err := client.NewWorker(client.Config{
		Store:               c.s,
		Owner:               "peers",
		Concurrency:         c.cfg.concurrency,
		EndpointConcurrency: c.cfg.endpointConcurrency,
		Signer:              c.cfg.signer,
		Transport:           c.cfg.guard.Transport(),
		Hook: func(ev client.Event) {
			if ev.Outcome != store.AttemptSucceeded || ev.LeaseLost || ev.Unrecorded {
				finish(fmt.Errorf("courier: delivery %s: attempt %d came to %s (%s, HTTP %d, lease lost %t, unrecorded %t)",
					ev.NotificationID, ev.Attempt, ev.Outcome, string(ev.Code), ev.HTTPStatus, ev.LeaseLost, ev.Unrecorded))
				return
			}
			if settled.Add(1) == int64(n) {
				finish(nil)
			}
		},
	})
	if err != nil {
		return 0, err
	}
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- w.Run(runCtx) }()
	var elapsed time.Duration
	var runErr error
	running := true
	select {
	case <-done:
		elapsed = time.Since(start)
	case <-ctx.Done():
		finish(fmt.Errorf("courier: %d of %d deliveries settled in %s: %w", settled.Load(), n, runLimit, errIncomplete))
	case runErr = <-ran:
		running = false
		finish(fmt.Errorf("courier: the worker stopped after %d of %d deliveries: %w", settled.Load(), n, errIncomplete))
	}
	stop()
	if running {
		runErr = <-ran
	}
	if err := errors.Join(failure, runErr); err != nil {
		return 0, err
	}
	return elapsed, nil
}

// verify reads the outbox: n deliveries, every one succeeded, after one
// attempt each.
func (c *courierSide) verify(ctx context.Context, n int) error {
	h, err := c.s.Outbox.Health(ctx)
	if err != nil {
		return fmt.Errorf("courier: health: %w", err)
	}
	total := 0
	for _, k := range h.Counts {
		total += k
	}
	if total != n || h.Counts[courier.StatusSucceeded] != n {
		return fmt.Errorf("courier: outbox holds %d deliveries, %d succeeded, want %d and %d (counts %v)",
			total, h.Counts[courier.StatusSucceeded], n, n, h.Counts)
	}
	seen := 0
	p := store.ListParams{Status: courier.StatusSucceeded, Limit: 1000}
	for {
		page, err := c.s.Outbox.List(ctx, p)
		if err != nil {
			return fmt.Errorf("courier: list: %w", err)
		}
		for _, d := range page.Deliveries {
			if d.Attempts != 1 {
				return fmt.Errorf("courier: delivery %s took %d attempts, want 1", d.NotificationID, d.Attempts)
			}
			seen++
		}
		if page.NextBefore == 0 {
			break
		}
		p.Before = page.NextBefore
	}
	if seen != n {
		return fmt.Errorf("courier: listed %d succeeded deliveries, want %d", seen, n)
	}
	return nil
}

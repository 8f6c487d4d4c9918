package client_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestRunsAtOnceAndAgainAfterTheyReturned: a Worker's Runs may run at
// once, and a Run may be called again once one returned (its context
// ended; Stop was not called): each delivers. Stop called twice at once
// returns nil to both once the Run has returned, and from then on Run
// returns nil and Work worker_stopped at once, leasing nothing.
func TestRunsAtOnceAndAgainAfterTheyReturned(t *testing.T) {
	t.Parallel()
	var b *workerBundle
	b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) { c.Concurrency = 2 })
	delivered := func(id int64) {
		t.Helper()
		if e := <-b.events; e.DeliveryID != id || e.Status != courier.StatusSucceeded {
			t.Fatalf("event %+v, want delivery %d succeeded", e, id)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- b.worker.Run(ctx) }()
	}
	delivered(b.enqueue(t, "n-1", `{}`))
	delivered(b.enqueue(t, "n-2", `{}`))
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	}

	go func() { done <- b.worker.Run(t.Context()) }()
	delivered(b.enqueue(t, "n-3", `{}`))
	stopped := make(chan error, 2)
	for range 2 {
		go func() { stopped <- b.worker.Stop(context.Background()) }()
	}
	for range 2 {
		if err := <-stopped; err != nil {
			t.Fatalf("Stop = %v", err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	checkStopped(t, b, b.enqueue(t, "n-4", `{}`))
}

// checkStopped fails t unless b's stopped worker claims nothing: Run
// returns nil, Work worker_stopped, and delivery id stays pending.
func checkStopped(t *testing.T, b *workerBundle, id int64) {
	t.Helper()
	if err := b.worker.Run(t.Context()); err != nil {
		t.Fatalf("Run after Stop = %v", err)
	}
	if n, err := b.worker.Work(t.Context()); n != 0 || !errors.Is(err, courier.CodeWorkerStopped) {
		t.Fatalf("Work after Stop = %d, %v; want worker_stopped", n, err)
	}
	if d := b.get(t, id); d.Status != courier.StatusPending || d.Attempts != 0 {
		t.Fatalf("after Stop: %s after %d attempts, want pending after none", d.Status, d.Attempts)
	}
}

// TestStopBeforeRun: a Worker stopped before it ever ran never claims:
// Run returns nil and Work worker_stopped at once, and a due delivery
// stays pending.
func TestStopBeforeRun(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, statusHandler(200, ""), nil)
	id := b.enqueue(t, "n-1", `{}`)
	for range 2 {
		if err := b.worker.Stop(context.Background()); err != nil {
			t.Fatalf("Stop = %v", err)
		}
	}
	checkStopped(t, b, id)
}

// TestCancellingRunEndsAWaitingClaim: the hard stop ends a claim in
// progress as Stop does (TestStopCutsAWaitingClaimShort): a Run whose
// claim waits for SQLite's write lock, held by the application's
// transaction, returns nil once its context is cancelled, with the
// application's transaction still open, its claim cut short
// (worker_stopped), not failed database_unavailable after waiting out
// the busy timeout (10 s).
func TestCancellingRunEndsAWaitingClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range writerHolders {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := claimTracer{claims: make(chan struct{}, 1), failed: make(chan courier.Code, 1)}
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "o.db"), store.Config{Tracer: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			w, err := client.NewWorker(client.Config{Store: s, Signer: newSigner(t), Owner: "w", Lease: 2 * time.Second, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			app, err := tc.begin(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			defer app.Rollback()
			ctx, cancel := context.WithCancel(t.Context())
			runDone := make(chan error, 1)
			go func() { runDone <- w.Run(ctx) }()
			<-tr.claims // Run's claim has started and waits for the lock
			cancel()
			select {
			case err := <-runDone:
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
			case <-time.After(guardTimeout): // a bound on failure
				t.Fatal("Run has not returned after its context was cancelled during its claim")
			}
			tr.checkCutShort(t, "Run's context was cancelled")
		})
	}
}

// TestCancellingRunEndsItsWaitAfterAFailedClaim: a Run whose claim
// failed waits on a timer of its own before it claims again; cancelling
// its context ends the wait, and Run returns nil.
func TestCancellingRunEndsItsWaitAfterAFailedClaim(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	b := setupWorker(t, statusHandler(200, ""), func(c *client.Config) {
		c.Logger, c.PollInterval = slog.New(logs), time.Hour
	})
	// An altered schema: every claim fails, until an operator acts.
	if _, err := b.store.DB().ExecContext(t.Context(), "ALTER TABLE courier_outbox ADD COLUMN extra INTEGER"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- b.worker.Run(ctx) }()
	<-logs.logged("worker: claim failed")
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(guardTimeout):
		t.Fatal("Run has not returned after its context was cancelled while it waited to claim again")
	}
}

// TestRunsOnPostgresAtOnceAndAgainListen: on PostgreSQL each Run holds a
// connection in LISTEN while it runs and gives it back as it returns: two
// Runs at once, then a Run called again after both returned, each on a
// pool with room for their wake-ups and a claim, are woken by an enqueue
// (PollInterval 1h), and none says its wake-ups were unavailable.
func TestRunsOnPostgresAtOnceAndAgainListen(t *testing.T) {
	t.Parallel()
	b := setupPGWorker(t, func(db *sqlx.DB, c *client.Config) {
		db.SetMaxOpenConns(4) // two listeners, a claim, and a settle
		c.Concurrency = 1
	})
	waiting := make(chan struct{}, 100)
	client.SetAwaiting(b.worker, func() { waiting <- struct{}{} })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- b.worker.Run(ctx) }()
	}
	<-waiting // each Run listens, then claims, before it waits
	<-waiting
	b.enqueue(t, "at-once")
	b.awaitDelivered(t, "at-once", "a delivery enqueued while two Runs listen")
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	}
	b.run(t)
	b.enqueue(t, "again")
	b.awaitDelivered(t, "again", "a delivery enqueued while a Run called again listens")
	if got := b.logs.lines("worker: wake-ups unavailable, polling"); len(got) != 0 {
		t.Errorf("a Run could not listen: %+v", got)
	}
}

// TestCancellingRunWithTheWriterHeldReturnsWithinTheLease: a Run is
// cancelled while its receiver hangs, and the application's transaction
// holds SQLite's one writer, so the attempt cut short cannot be settled.
// Run returns within what was left of the lease, not when the
// application's transaction ends, and says so: its Hook hears the attempt
// unrecorded (the delivery stays leased, to be claimed again once the
// lease expires).
func TestCancellingRunWithTheWriterHeldReturnsWithinTheLease(t *testing.T) {
	t.Parallel()
	h := setupHold(t, func(c *client.Config) { c.Timeout, c.Lease = time.Second, 3*time.Second })
	id := h.enqueue(t, "n-1", `{}`)
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- h.worker.Run(ctx) }()
	<-h.arrived
	app, err := h.store.Begin(t.Context()) // the application's long transaction
	if err != nil {
		t.Fatal(err)
	}
	defer app.Rollback()
	cancel()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(guardTimeout):
		t.Fatal("Run has not returned with the writer held, long after the lease ran out")
	}
	if e := <-h.events; e.DeliveryID != id || !e.Unrecorded || e.Code != courier.CodeWorkerStopped {
		t.Fatalf("event %+v, want the attempt cut short, worker_stopped, unrecorded", e)
	}
	if err := app.Rollback(); err != nil {
		t.Fatal(err)
	}
	if d := h.get(t, id); d.Status != courier.StatusLeased || d.Attempts != 1 {
		t.Fatalf("%s after %d attempts, want leased after 1", d.Status, d.Attempts)
	}
}

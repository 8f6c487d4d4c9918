package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestEndToEnd is the HTTP issue's proof: 1,000 notifications enqueued in
// business transactions, a fifth rolled back, delivered through a receiver
// that answers every first attempt 503, rate-limits a tenth of the others
// (429 with Retry-After), drops a tenth of the connections after it
// committed, and answers some after the sender's timeout.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	s, err := run(t.Context(), options{n: 1000, faults: true, seed: 7, limit: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ok() {
		t.Fatalf("verdict failed: %+v", s)
	}
	if s.rolledBack < 150 || s.committed+s.rolledBack != 1000 {
		t.Fatalf("%d committed, %d rolled back", s.committed, s.rolledBack)
	}
	// The faults happened, and the redeliveries they caused were answered
	// from the Inbox with the stored Ack (which the sender verified exactly,
	// or the delivery would have failed with ack_invalid).
	if s.faults < s.committed || s.retries < s.committed || s.duplicates == 0 {
		t.Fatalf("too few faults exercised: %+v", s)
	}
}

// TestResume stops a run midway and starts it again on the same folder:
// the second run finishes the same notifications with the same verdict.
func TestResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The first run is cut off by its time limit, normally midway through
	// the deliveries (the faults make them take several seconds); whatever
	// it got done, the second run must finish the rest.
	_, err := run(t.Context(), options{n: 200, faults: true, seed: 3, dir: dir, limit: time.Second})
	t.Logf("first run ended with: %v", err)
	s, err := run(t.Context(), options{n: 200, faults: true, seed: 3, dir: dir, limit: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !s.ok() || s.committed+s.rolledBack != 200 {
		t.Fatalf("resumed run: %+v", s)
	}
}

// TestInterruptLetsAttemptsFinish: a run ended by a signal or its time
// limit cancelled its worker's context, cutting the attempts in flight
// short: each was settled as a retry with code worker_stopped and counted
// against its delivery's budget, the receiver's work rolled back. The
// worker is stopped softly now (client.Worker.Stop), as the README shows:
// the attempts in flight finish.
func TestInterruptLetsAttemptsFinish(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, interrupt := context.WithCancel(t.Context())
	defer interrupt()
	stopping := make(chan struct{})
	var once sync.Once
	var held atomic.Bool
	_, err := run(ctx, options{n: 20, seed: 1, dir: dir, limit: time.Minute,
		// The worker logs "worker: stopping" once Stop is called.
		logger: slog.New(logtest.OnMessage{Msg: "worker: stopping", Do: func() { once.Do(func() { close(stopping) }) }}),
		process: func(rctx context.Context, _ *sqlx.Tx, _ ack.Terminal) error {
			if !held.CompareAndSwap(false, true) {
				return nil
			}
			interrupt() // Ctrl-C, with this attempt in flight
			select {
			case <-stopping: // stopped softly: the attempt goes on
				return nil
			case <-rctx.Done(): // cut short
				return context.Cause(rctx)
			}
		},
	})
	t.Logf("the interrupted run returned %v", err)
	s, err := sqlite.Open(t.Context(), filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var stopped int
	if err := s.DB().GetContext(t.Context(), &stopped, "SELECT COUNT(*) FROM courier_attempts WHERE error_code = ?", string(courier.CodeWorkerStopped)); err != nil {
		t.Fatal(err)
	}
	h, err := s.Outbox.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if leased := h.Counts[courier.StatusLeased]; stopped != 0 || leased != 0 {
		t.Fatalf("the interrupted run cut %d attempts short (worker_stopped) and left %d deliveries leased, want none", stopped, leased)
	}
}

// TestRefusesAnEmptyRun: -n 0 (or less) ran nothing, printed "verdict: OK"
// and exited 0, a pass with nothing processed; -timeout 0 gave up at once.
// Both are refused now, as the error that exits 2.
func TestRefusesAnEmptyRun(t *testing.T) {
	t.Parallel()
	for _, o := range []options{
		{n: 0, limit: time.Minute},
		{n: -5, limit: time.Minute},
		{n: 10, limit: 0},
	} {
		o.dir = t.TempDir()
		if s, err := run(t.Context(), o); err == nil {
			t.Errorf("-n %d -timeout %s: ran, verdict ok=%v; want it refused", o.n, o.limit, s.ok())
		}
	}
}

package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// holdBundle is a worker whose receiver holds every request until release
// is closed (then answers a valid Ack) or the request is cancelled, and
// reports each arrival.
type holdBundle struct {
	*workerBundle
	logs    *capture
	arrived chan string
	release chan struct{}
}

func setupHold(t *testing.T, edit func(*client.Config)) *holdBundle {
	t.Helper()
	h := &holdBundle{logs: newCapture(t), arrived: make(chan string, 100), release: make(chan struct{})}
	h.workerBundle = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.arrived <- r.Header.Get("webhook-id")
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		a := ack.New(r.Header.Get("webhook-id"), body)
		w.Write(a.Marshal())
	}, func(c *client.Config) {
		c.Timeout = 30 * time.Second
		c.Logger = slog.New(h.logs)
		if edit != nil {
			edit(c)
		}
	})
	return h
}

// enqueueN enqueues n deliveries and returns their ids by notification id.
func (h *holdBundle) enqueueN(t *testing.T, n int) map[string]int64 {
	t.Helper()
	ids := make(map[string]int64, n)
	for i := range n {
		id := string(rune('a' + i))
		ids[id] = h.enqueue(t, id, `{}`)
	}
	return ids
}

// leased counts the outbox rows still leased.
func (h *holdBundle) leased(t *testing.T) int {
	t.Helper()
	var n int
	if err := h.store.DB().Get(&n, "SELECT COUNT(*) FROM courier_outbox WHERE status = 'leased'"); err != nil {
		t.Fatal(err)
	}
	return n
}

// check asserts what became of each delivery: the ones in started made one
// attempt that ended as want says; every other one is pending with no
// attempt spent and none logged; no row is leased.
func (h *holdBundle) check(t *testing.T, ids map[string]int64, started map[string]bool, want courier.Status, code courier.Code) {
	t.Helper()
	if n := h.leased(t); n != 0 {
		t.Errorf("%d deliveries still leased after the shutdown", n)
	}
	for nid, id := range ids {
		d := h.get(t, id)
		attempts, err := h.store.Outbox.Attempts(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if started[nid] {
			if d.Status != want || d.LastErrorCode != code || d.Attempts != 1 || len(attempts) != 1 {
				t.Errorf("started %s: %s/%q after %d attempts (%d logged), want %s/%q after 1", nid, d.Status, d.LastErrorCode, d.Attempts, len(attempts), want, code)
			}
			continue
		}
		if d.Status != courier.StatusPending || d.Attempts != 0 || len(attempts) != 0 || d.LeaseOwner != "" {
			t.Errorf("unstarted %s: %s after %d attempts (%d logged), leased by %q; want pending, none spent", nid, d.Status, d.Attempts, len(attempts), d.LeaseOwner)
		}
	}
}

// TestStopFinishesAttemptsInFlightAndGivesBackTheRest: Stop during Run
// stops claiming, lets the attempts in flight finish and settle, and
// leaves nothing leased; what was never started spends no attempt. Run
// then returns nil, and the stopped worker neither runs nor works again.
func TestStopFinishesAttemptsInFlightAndGivesBackTheRest(t *testing.T) {
	t.Parallel()
	h := setupHold(t, func(c *client.Config) { c.Concurrency, c.EndpointConcurrency = 2, 2 })
	ids := h.enqueueN(t, 5)
	runErr := make(chan error, 1)
	go func() { runErr <- h.worker.Run(t.Context()) }()
	started := map[string]bool{<-h.arrived: true, <-h.arrived: true}

	stopErr := make(chan error, 1)
	go func() { stopErr <- h.worker.Stop(context.Background()) }()
	<-h.logs.logged("worker: stopping")
	close(h.release)
	if err := <-stopErr; err != nil {
		t.Fatalf("Stop = %v, want nil: every attempt finished", err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	h.check(t, ids, started, courier.StatusSucceeded, "")

	if err := h.worker.Run(t.Context()); err != nil {
		t.Fatalf("Run after Stop = %v", err)
	}
	if n, err := h.worker.Work(t.Context()); n != 0 || !errors.Is(err, courier.CodeWorkerStopped) {
		t.Fatalf("Work after Stop = %d, %v; want worker_stopped", n, err)
	}
	if err := h.worker.Stop(context.Background()); err != nil {
		t.Fatalf("Stop again = %v", err)
	}
	if n := h.leased(t); n != 0 {
		t.Fatalf("%d leased after the stopped worker was called again", n)
	}
}

// TestStopCutsAttemptsShortWhenItsContextEnds: attempts that outlast
// Stop's context are cut short and settled as retries with code
// worker_stopped, due again at once; nothing stays leased.
func TestStopCutsAttemptsShortWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	h := setupHold(t, func(c *client.Config) { c.Concurrency, c.EndpointConcurrency = 2, 2 })
	ids := h.enqueueN(t, 5)
	runErr := make(chan error, 1)
	go func() { runErr <- h.worker.Run(t.Context()) }()
	started := map[string]bool{<-h.arrived: true, <-h.arrived: true}

	ctx, cancel := context.WithCancel(context.Background())
	stopErr := make(chan error, 1)
	go func() { stopErr <- h.worker.Stop(ctx) }()
	<-h.logs.logged("worker: stopping")
	cancel() // the attempts are still held by the receiver
	if err := <-stopErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want context.Canceled", err)
	}
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	h.check(t, ids, started, courier.StatusRetryWait, courier.CodeWorkerStopped)
	for nid := range started {
		if d := h.get(t, ids[nid]); d.NextAttemptAt.After(h.clock.Now()) {
			t.Errorf("%s is due at %v, want at once", nid, d.NextAttemptAt)
		}
	}
	if len(h.logs.lines("worker: stop deadline passed, cutting attempts short")) != 1 {
		t.Error("the cut was not logged")
	}
}

// TestStopDuringWorkGivesBackTheUnstarted: Work with a batch larger than
// its concurrency, stopped while its first attempt is in flight, finishes
// that attempt and gives back the four it had not started, uncounted.
func TestStopDuringWorkGivesBackTheUnstarted(t *testing.T) {
	t.Parallel()
	h := setupHold(t, func(c *client.Config) { c.Concurrency, c.BatchSize, c.EndpointConcurrency = 1, 5, 5 })
	ids := h.enqueueN(t, 5)
	type result struct {
		n   int
		err error
	}
	workDone := make(chan result, 1)
	go func() {
		n, err := h.worker.Work(t.Context())
		workDone <- result{n, err}
	}()
	started := map[string]bool{<-h.arrived: true}
	stopErr := make(chan error, 1)
	go func() { stopErr <- h.worker.Stop(context.Background()) }()
	<-h.logs.logged("worker: stopping")
	close(h.release)
	if r := <-workDone; r.n != 5 || r.err != nil {
		t.Fatalf("Work = %d, %v; want the batch of 5", r.n, r.err)
	}
	if err := <-stopErr; err != nil {
		t.Fatalf("Stop = %v", err)
	}
	h.check(t, ids, started, courier.StatusSucceeded, "")
}

// TestCancellingWorkCutsShortAndGivesBack: cancelling Work's context is
// the hard stop: the attempt in flight is cut short and settled as a
// worker_stopped retry, the rest of the batch is given back uncounted.
func TestCancellingWorkCutsShortAndGivesBack(t *testing.T) {
	t.Parallel()
	h := setupHold(t, func(c *client.Config) { c.Concurrency, c.BatchSize, c.EndpointConcurrency = 1, 5, 5 })
	ids := h.enqueueN(t, 5)
	ctx, cancel := context.WithCancel(t.Context())
	workDone := make(chan int, 1)
	go func() {
		n, err := h.worker.Work(ctx)
		if err != nil {
			t.Errorf("Work = %v", err)
		}
		workDone <- n
	}()
	started := map[string]bool{<-h.arrived: true}
	cancel()
	if n := <-workDone; n != 5 {
		t.Fatalf("Work claimed %d, want 5", n)
	}
	h.check(t, ids, started, courier.StatusRetryWait, courier.CodeWorkerStopped)
}

// TestStopDuringAClaimGivesTheBatchBack: Stop called while Run's claim is
// in progress: the batch that claim leased starts no attempt and is given
// back whole, uncounted; nothing is sent and nothing stays leased.
func TestStopDuringAClaimGivesTheBatchBack(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	logs := newCapture(t)
	var w *client.Worker
	stopErr := make(chan error, 1)
	var once sync.Once
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{Hook: func(e store.Event) {
		if e.Kind != store.EventClaimed {
			return
		}
		once.Do(func() { // the claim has leased its batch and not returned yet
			go func() { stopErr <- w.Stop(context.Background()) }()
			<-logs.logged("worker: stopping")
		})
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w, err = client.NewWorker(client.Config{Store: s, Signer: newSigner(t), Concurrency: 3, Transport: loopbackGuard(t, srv.URL).Transport(), Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i := range 3 {
		e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	if err := w.Run(t.Context()); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := <-stopErr; err != nil {
		t.Fatalf("Stop = %v", err)
	}
	for _, id := range ids {
		d, err := s.Outbox.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		attempts, _ := s.Outbox.Attempts(t.Context(), id)
		if d.Status != courier.StatusPending || d.Attempts != 0 || len(attempts) != 0 {
			t.Errorf("%s: %s after %d attempts (%d logged), want pending and none spent", d.NotificationID, d.Status, d.Attempts, len(attempts))
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent after Stop", hits.Load())
	}
}

// TestStopFromTheHookReturnsWhenItsContextEnds: Stop called from the Hook,
// on the attempt's goroutine that Stop waits for, cannot see the worker
// stop; it returns its ctx's error once ctx ends instead of hanging, and
// the worker finishes stopping once the Hook has returned.
func TestStopFromTheHookReturnsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	stopErr := make(chan error, 1)
	var b *workerBundle
	answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
	b = setupWorker(t, answer, func(c *client.Config) {
		c.Hook = func(client.Event) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			stopErr <- b.worker.Stop(ctx)
		}
	})
	id := b.enqueue(t, "n-1", `{}`)
	runErr := make(chan error, 1)
	go func() { runErr <- b.worker.Run(t.Context()) }()

	select {
	case err := <-stopErr:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Stop from the Hook = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Stop called from the Hook has not returned 10s after its 50ms context ended")
	}
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10s after the Hook that stopped it returned")
	}
	if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.LeaseOwner != "" {
		t.Fatalf("delivery is %s leased by %q, want succeeded and no lease", d.Status, d.LeaseOwner)
	}
	if err := b.worker.Stop(context.Background()); err != nil {
		t.Fatalf("Stop after the worker stopped = %v, want nil", err)
	}
}

// TestStopWithNothingRunningReturnsNil: with no Run or Work in progress
// there is nothing to cut short, so Stop returns nil, and logs no cut,
// even when its context is already done; every time, not by the luck of
// a race.
func TestStopWithNothingRunningReturnsNil(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, statusHandler(200, ""), nil)
	logs := newCapture(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 300 {
		w, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // one that has worked and returned
			if _, err := w.Work(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop #%d with its context done and nothing running = %v, want nil", i, err)
		}
	}
	if n := len(logs.lines("worker: stop deadline passed, cutting attempts short")); n != 0 {
		t.Fatalf("%d cuts logged with nothing running", n)
	}
}

// TestAnAttemptCutShortAsTheWorkerStopsSparesItsBudget: a delivery's last
// attempt (MaxAttempts 1), cut short as the worker stops, by Stop's
// context ending or by Run's, is counted and logged like any attempt, but
// spends none of the budget: the delivery is due again at once with one
// more attempt to make, which the next worker makes. A deploy during a
// delivery's last attempt does not fail it.
func TestAnAttemptCutShortAsTheWorkerStopsSparesItsBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(t *testing.T, h *holdBundle, cancelRun context.CancelFunc)
	}{
		{"Stop's context ends", func(t *testing.T, h *holdBundle, _ context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			stopErr := make(chan error, 1)
			go func() { stopErr <- h.worker.Stop(ctx) }()
			<-h.logs.logged("worker: stopping")
			cancel() // the attempt is still held by the receiver
			if err := <-stopErr; !errors.Is(err, context.Canceled) {
				t.Fatalf("Stop = %v, want context.Canceled", err)
			}
		}},
		{"Run's context ends", func(t *testing.T, h *holdBundle, cancelRun context.CancelFunc) { cancelRun() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setupHold(t, nil)
			e, err := h.store.Outbox.Enqueue(t.Context(), h.store.DB(), store.EnqueueParams{
				NotificationID: "last", Endpoint: h.server.URL + "/hooks", Payload: []byte(`{}`), MaxAttempts: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			runErr := make(chan error, 1)
			go func() { runErr <- h.worker.Run(ctx) }()
			<-h.arrived
			tc.cut(t, h, cancel)
			if err := <-runErr; err != nil {
				t.Fatalf("Run = %v", err)
			}

			d := h.get(t, e.ID)
			attempts, err := h.store.Outbox.Attempts(t.Context(), e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeWorkerStopped || d.NextAttemptAt.After(h.clock.Now()) ||
				d.Attempts != 1 || d.MaxAttempts != 2 {
				t.Fatalf("its last attempt cut short left the delivery %s/%s after %d of %d attempts, due in %v; want retry_wait/worker_stopped after 1 of 2, due at once",
					d.Status, d.LastErrorCode, d.Attempts, d.MaxAttempts, d.NextAttemptAt.Sub(h.clock.Now()))
			}
			if len(attempts) != 1 || attempts[0].Outcome != store.AttemptRetry || attempts[0].ErrorCode != courier.CodeWorkerStopped {
				t.Fatalf("attempts logged: %+v; want the one cut short, a worker_stopped retry", attempts)
			}
			if ep, err := h.store.Endpoints.Get(t.Context(), d.Endpoint); err != nil || ep.ConsecutiveFailures != 0 || ep.State != store.EndpointClosed {
				t.Fatalf("the endpoint is %s with %d failures (%v); want closed with none: a stop is no failure of the endpoint's", ep.State, ep.ConsecutiveFailures, err)
			}

			close(h.release) // the next worker's attempt is answered
			next, err := client.NewWorker(client.Config{Store: h.store, Signer: signerFor(t, h.workerBundle), Transport: loopbackGuard(t, h.server.URL).Transport(), Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := next.Work(t.Context()); n != 1 || err != nil {
				t.Fatalf("the next worker's Work = %d, %v; want the delivery", n, err)
			}
			if d := h.get(t, e.ID); d.Status != courier.StatusSucceeded || d.Attempts != 2 || d.MaxAttempts != 2 {
				t.Fatalf("after the next worker's attempt the delivery is %s after %d of %d attempts, want succeeded after 2 of 2", d.Status, d.Attempts, d.MaxAttempts)
			}
		})
	}
}

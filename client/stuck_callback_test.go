package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// stuckSignerFor is a SignerFor whose key store ignores every context:
// it answers only once the test lets it, however long that takes.
type stuckSignerFor struct {
	signer   signature.Signer
	asked    chan struct{} // receives when it is asked
	answer   chan struct{} // closed to let it answer
	answered sync.Once
}

func newStuckSignerFor(signer signature.Signer) *stuckSignerFor {
	return &stuckSignerFor{signer: signer, asked: make(chan struct{}, 1), answer: make(chan struct{})}
}

func (s *stuckSignerFor) SignerFor(context.Context, string) (signature.Signer, error) {
	s.asked <- struct{}{}
	<-s.answer
	return s.signer, nil
}

func (s *stuckSignerFor) let() { s.answered.Do(func() { close(s.answer) }) }

// TestAStuckSignerNeverSendsOnALeaseAnotherWorkerTook: a SignerFor that
// ignores every context holds its attempt past its lease, which Go cannot
// end. Meanwhile the lease expires and another worker claims the
// delivery and sends it. When the stuck one returns, its worker sends
// nothing (the signing spent the lease: signing_failed), and its outcome
// is fenced off by the other worker's lease: the two never overlap.
func TestAStuckSignerNeverSendsOnALeaseAnotherWorkerTook(t *testing.T) {
	t.Parallel()
	clock := newWorkerClock() // the stuck worker's
	var mu sync.Mutex
	var sentBy []string // the attempt number of each request that arrived
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sentBy = append(sentBy, r.Header.Get(ack.AttemptHeader))
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}, nil)
	stuck := newStuckSignerFor(newSigner(t))
	t.Cleanup(stuck.let)
	events := make(chan client.Event, 1)
	a, err := client.NewWorker(client.Config{Store: b.store, Owner: "stuck", SignerFor: stuck.SignerFor,
		Transport: loopbackGuard(t, b.server.URL).Transport(), Timeout: 2 * time.Second, Lease: time.Minute, Now: clock.Now,
		Hook: func(e client.Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	other, err := client.NewWorker(client.Config{Store: b.store, Owner: "other", Signer: newSigner(t),
		Transport: loopbackGuard(t, b.server.URL).Transport(), Timeout: 2 * time.Second, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	id := b.enqueue(t, "n-1", `{}`)

	done := make(chan error, 1)
	go func() { _, err := a.Work(t.Context()); done <- err }()
	<-stuck.asked
	b.clock.Advance(2 * time.Minute) // the store's clock: the stuck worker's lease expired
	if n, err := other.Work(t.Context()); err != nil || n != 1 {
		t.Fatalf("the other worker's Work = %d, %v; want the expired lease's delivery claimed", n, err)
	}
	clock.Advance(2 * time.Minute) // the stuck worker's clock: the key store took two minutes
	stuck.let()
	if err := <-done; err != nil {
		t.Fatalf("the stuck worker's Work = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sentBy) != 1 || sentBy[0] != "2" {
		t.Fatalf("requests sent, by attempt: %v; want the other worker's (attempt 2) alone", sentBy)
	}
	e := <-events
	if e.DeliveryID != id || !e.LeaseLost || e.HTTPStatus != 0 {
		t.Fatalf("the stuck worker's attempt: %+v; want its outcome fenced off (lease lost), nothing sent", e)
	}
}

// TestStopReturnsPastAStuckSigner: Stop returns ctx's error when its ctx
// ends, though an attempt's SignerFor ignores every context and holds its
// slot: Go cannot end it. Work returns once it does, and the attempt,
// cut short by the shutdown, sends nothing.
func TestStopReturnsPastAStuckSigner(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	stuck := newStuckSignerFor(nil)
	t.Cleanup(stuck.let)
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) }, func(c *client.Config) {
		stuck.signer, c.Signer, c.SignerFor = c.Signer, nil, stuck.SignerFor
	})
	b.enqueue(t, "n-1", `{}`)
	done := make(chan error, 1)
	go func() { _, err := b.worker.Work(t.Context()); done <- err }()
	<-stuck.asked
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- b.worker.Stop(ctx) }()
	cancel()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop = %v, want its ctx's error", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Work returned (%v) while its attempt's SignerFor is still stuck", err)
	default:
	}
	stuck.let()
	if err := <-done; err != nil {
		t.Fatalf("Work = %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests sent by an attempt a shutdown cut short", n)
	}
}

// TestAnAttemptThatOutlivesItsLeaseIsLogged: a SignerFor that ignores
// every context holds its attempt past its lease, and its slot with it.
// That is logged once, at Warn, naming the attempt, as soon as the lease
// runs out while it is still running: the slot was held with no sign of
// it. An attempt that ended in time logs nothing of the kind, even once
// its lease would have run out. The lease is real time, the worker's
// clock: it must outlast the attempt that ends in time, its claim, request
// and settle, on a loaded machine, which half a second did not.
func TestAnAttemptThatOutlivesItsLeaseIsLogged(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	signer := newSigner(t)
	stuck := newStuckSignerFor(signer)
	t.Cleanup(stuck.let)
	const lease = 3 * time.Second
	b := setupWorker(t, statusHandler(http.StatusNoContent, ""), func(c *client.Config) {
		c.Signer, c.SignerFor = nil, func(ctx context.Context, keyID string) (signature.Signer, error) {
			if keyID == "stuck" {
				return stuck.SignerFor(ctx, keyID)
			}
			return signer, nil
		}
		c.Logger = slog.New(logs)
		c.Timeout, c.Lease = time.Second, lease // the worker's own clock: real time
	})
	const msg = "worker: attempt outlived its lease"
	b.enqueueWith(t, "n-in-time", nil)
	if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the delivery that ends in time", n, err)
	}
	id := b.enqueueWith(t, "n-stuck", func(p *store.EnqueueParams) { p.KeyID = "stuck" })
	done := make(chan error, 1)
	go func() { _, err := b.worker.Work(t.Context()); done <- err }()
	<-stuck.asked
	select {
	case <-logs.logged(msg):
	case <-time.After(10 * time.Second): // a bound on the failure, not a wait for success
		t.Fatalf("no %q 10s into an attempt held past its %v lease", msg, lease)
	}
	stuck.let()
	if err := <-done; err != nil {
		t.Fatalf("Work = %v", err)
	}
	// The first delivery's lease, claimed before, ran out before the
	// stuck one's: had its attempt been taken as outliving it, it would
	// be logged by now.
	lines := logs.lines(msg)
	if len(lines) != 1 {
		t.Fatalf("%d lines %q, want one, for the stuck attempt", len(lines), msg)
	}
	l := lines[0]
	if l.Level != slog.LevelWarn || l.Attrs["delivery"] != strconv.FormatInt(id, 10) || l.Attrs["attempt"] != "1" ||
		l.Attrs["endpoint"] == "" || l.Attrs["endpoint_ref"] == "" {
		t.Errorf("logged %v %v, want WARN naming delivery %d, attempt 1, its endpoint and ref", l.Level, l.Attrs, id)
	}
}

package client_test

import (
	"context"
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
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// workerClock is a worker's clock that stands at the real time it was
// made (so receivers' signature checks accept what it signs) and moves
// only when a test moves it.
type workerClock struct {
	start  time.Time
	offset atomic.Int64
}

func newWorkerClock() *workerClock { return &workerClock{start: time.Now()} }

// Now returns the clock's time.
func (c *workerClock) Now() time.Time { return c.start.Add(time.Duration(c.offset.Load())) }

// Since returns how far the clock moved since it was made.
func (c *workerClock) Since() time.Duration { return time.Duration(c.offset.Load()) }

// Advance moves the clock forward.
func (c *workerClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// enqueueWith enqueues a delivery to the bundle's server, edited by edit.
func (b *workerBundle) enqueueWith(t *testing.T, id string, edit func(*store.EnqueueParams)) int64 {
	t.Helper()
	p := store.EnqueueParams{NotificationID: id, Endpoint: b.server.URL + "/hooks", Payload: []byte(`{"id":"` + id + `"}`)}
	if edit != nil {
		edit(&p)
	}
	e, err := b.store.Outbox.Enqueue(t.Context(), b.store.DB(), p)
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// TestWorkNeverSendsPastTheLease is the finding "Work with BatchSize 3
// and Concurrency 1 sent a request 1.01 s into a 700 ms lease": each
// attempt takes 350 ms of the worker's clock, so the third of the batch
// would start with no lease left to cover its timeout. It is given back
// instead: not sent, its attempt not counted, no lease left behind, and
// due again at once. The times are ten times the finding's: only the
// worker's clock, moved by the receiver, spends the lease, but the
// Timeout also bounds each request in real time, and 300 ms could run out
// on a loaded machine before the receiver's answer came.
func TestWorkNeverSendsPastTheLease(t *testing.T) {
	t.Parallel()
	const lease, timeout, each = 7 * time.Second, 3 * time.Second, 3500 * time.Millisecond
	clock := newWorkerClock()
	var mu sync.Mutex
	var sentAt []time.Duration // the worker clock's time since the claim at each request
	var b *workerBundle
	answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sentAt = append(sentAt, clock.Since())
		mu.Unlock()
		clock.Advance(each)
		answer(w, r)
	}, func(c *client.Config) {
		c.Lease, c.Timeout, c.BatchSize, c.Concurrency, c.EndpointConcurrency, c.Now = lease, timeout, 3, 1, 3, clock.Now
	})
	ids := []int64{b.enqueue(t, "n-1", `{}`), b.enqueue(t, "n-2", `{}`), b.enqueue(t, "n-3", `{}`)}

	if n, err := b.worker.Work(t.Context()); n != 3 || err != nil {
		t.Fatalf("Work = %d, %v; want a batch of 3", n, err)
	}
	if len(sentAt) != 2 {
		t.Fatalf("%d requests sent, want 2 (the third has no lease left for its timeout)", len(sentAt))
	}
	for i, at := range sentAt {
		if at+timeout > lease {
			t.Errorf("request %d sent %v into a %v lease, with a %v timeout", i+1, at, lease, timeout)
		}
	}
	for i, id := range ids[:2] {
		if d := b.get(t, id); d.Status != courier.StatusSucceeded {
			t.Errorf("delivery %d is %s, want succeeded", i+1, d.Status)
		}
	}
	d := b.get(t, ids[2])
	if d.Status != courier.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" || !d.NextAttemptAt.Equal(b.clock.Now()) {
		t.Fatalf("the third delivery is %s after %d attempts, leased by %q, due %v: want pending, 0, none, now",
			d.Status, d.Attempts, d.LeaseOwner, d.NextAttemptAt)
	}
	if attempts, err := b.store.Outbox.Attempts(t.Context(), ids[2]); err != nil || len(attempts) != 0 {
		t.Fatalf("attempts log of the released delivery: %+v, %v", attempts, err)
	}
	for range 2 { // the events of the two sent
		if e := <-b.events; e.DeliveryID == ids[2] {
			t.Fatalf("an event for the released delivery: %+v", e)
		}
	}
	// Given back, it is delivered by the next claim, as attempt 1.
	if e := b.work(t); e.DeliveryID != ids[2] || e.Attempt != 1 || e.Status != courier.StatusSucceeded {
		t.Fatalf("next round: %+v", e)
	}
}

// TestWorkerNeverStartsAnAttemptAtOrAfterTheDeadline: a delivery whose
// deadline comes while it waits in its batch is ended failed with code
// expired, without a request; one whose deadline is a millisecond later
// is still sent.
func TestWorkerNeverStartsAnAttemptAtOrAfterTheDeadline(t *testing.T) {
	t.Parallel()
	clock := newWorkerClock()
	var got []string
	var mu sync.Mutex
	var b *workerBundle
	answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("webhook-id"))
		mu.Unlock()
		if r.Header.Get("webhook-id") == "first" {
			clock.Advance(500 * time.Millisecond)
		}
		answer(w, r)
	}, func(c *client.Config) { c.BatchSize, c.Concurrency, c.EndpointConcurrency, c.Now = 3, 1, 3, clock.Now })
	first := b.enqueueWith(t, "first", nil)
	at := b.enqueueWith(t, "at-deadline", func(p *store.EnqueueParams) { p.Deadline = b.clock.Now().Add(500 * time.Millisecond) })
	before := b.enqueueWith(t, "before-deadline", func(p *store.EnqueueParams) { p.Deadline = b.clock.Now().Add(501 * time.Millisecond) })

	if n, err := b.worker.Work(t.Context()); n != 3 || err != nil {
		t.Fatalf("Work = %d, %v", n, err)
	}
	if len(got) != 2 || got[0] != "first" || got[1] != "before-deadline" {
		t.Fatalf("requests for %q, want first and before-deadline", got)
	}
	for id, want := range map[int64]courier.Status{first: courier.StatusSucceeded, before: courier.StatusSucceeded, at: courier.StatusFailed} {
		if d := b.get(t, id); d.Status != want {
			t.Errorf("%s is %s, want %s", d.NotificationID, d.Status, want)
		}
	}
	d := b.get(t, at)
	if d.LastErrorCode != courier.CodeExpired || d.LastHTTPStatus != 0 || d.LeaseOwner != "" {
		t.Fatalf("at-deadline: code %q, HTTP %d, lease %q; want expired, none, none", d.LastErrorCode, d.LastHTTPStatus, d.LeaseOwner)
	}
	attempts, err := b.store.Outbox.Attempts(t.Context(), at)
	if err != nil || len(attempts) != 1 || attempts[0].Outcome != store.AttemptFailed || attempts[0].ErrorCode != courier.CodeExpired || attempts[0].HTTPStatus != 0 {
		t.Fatalf("at-deadline attempts log %+v, %v; want one failed/expired without HTTP", attempts, err)
	}
	for range 3 {
		if e := <-b.events; e.DeliveryID == at && (e.Code != courier.CodeExpired || e.Status != courier.StatusFailed) {
			t.Fatalf("event %+v", e)
		}
	}
}

// TestSlowSignerForNeverSendsPastTheLease: resolving the signer
// (Config.SignerFor asking a key store) takes time out of the lease after
// the check that starts an attempt. A key store that answers with less
// than a Timeout of the lease left gets no request sent. The signing
// alone took more of the lease than a Timeout leaves, so a delivery given
// back would be claimed and signed again at once, as slowly: it was, its
// attempt never counted, each round logged, until its deadline (or for
// ever, without one). It counts as a signing that failed for a passing
// reason: retried with code signing_failed after Backoff, counted, with
// its log line, and failed for good once its attempts run out.
func TestSlowSignerForNeverSendsPastTheLease(t *testing.T) {
	t.Parallel()
	const lease, timeout = time.Minute, 2 * time.Second
	clock := newWorkerClock()
	logs := newCapture(t)
	b, sent := setupCountedWorker(t, func(c *client.Config) {
		signer := c.Signer
		c.Signer, c.Lease, c.Timeout, c.Now, c.Logger = nil, lease, timeout, clock.Now, slog.New(logs)
		c.SignerFor = func(context.Context, string) (signature.Signer, error) {
			clock.Advance(lease - timeout + time.Millisecond) // the key store answers with a Timeout less a millisecond left
			return signer, nil
		}
	})
	id := b.enqueueWith(t, "n-1", func(p *store.EnqueueParams) { p.MaxAttempts = 2 })

	if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the one delivery claimed", n, err)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests sent with less than a Timeout of the lease left", n)
	}
	d := b.get(t, id)
	if d.Status != courier.StatusRetryWait || d.Attempts != 1 || d.LastErrorCode != courier.CodeSigningFailed || d.LeaseOwner != "" ||
		!d.NextAttemptAt.Equal(b.clock.Now().Add(time.Second)) {
		t.Fatalf("delivery is %s/%s after %d attempts, leased by %q, due %v from now; want retry_wait/signing_failed after 1, none, in 1s (Backoff)",
			d.Status, d.LastErrorCode, d.Attempts, d.LeaseOwner, d.NextAttemptAt.Sub(b.clock.Now()))
	}
	select { // Work has returned: its Event was sent
	case e := <-b.events:
		if e.DeliveryID != id || e.Code != courier.CodeSigningFailed || e.Outcome != store.AttemptRetry || e.HTTPStatus != 0 {
			t.Fatalf("event %+v; want a retry with code signing_failed, no HTTP status", e)
		}
	default:
		t.Fatal("no event for the attempt")
	}
	attempts, err := b.store.Outbox.Attempts(t.Context(), id)
	if err != nil || len(attempts) != 1 || attempts[0].ErrorCode != courier.CodeSigningFailed || attempts[0].HTTPStatus != 0 {
		t.Fatalf("attempts log %+v, %v; want one signing_failed attempt without HTTP", attempts, err)
	}
	if n := len(logs.lines("worker: signing took more of the lease than a Timeout leaves, retried later")); n != 1 {
		t.Fatalf("%d too-slow-signing lines, want 1", n)
	}

	b.clock.Advance(time.Second) // due again: the last attempt of its budget
	if e := b.work(t); e.Attempt != 2 || e.Status != courier.StatusFailed || e.Code != courier.CodeSigningFailed {
		t.Fatalf("second round: %+v; want attempt 2 failed with code signing_failed", e)
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

// TestLeaseSpentBeforeSigningIsGivenBack: a delivery whose lease a wait
// in its batch left barely a Timeout, and a quick signing less than one,
// is given back unsent, its attempt not counted, with the lease-too-short
// log line and no Event: the signer is not at fault, and the next claim
// delivers it as attempt 1.
func TestLeaseSpentBeforeSigningIsGivenBack(t *testing.T) {
	t.Parallel()
	const lease, timeout = time.Minute, 2 * time.Second
	clock := newWorkerClock()
	logs := newCapture(t)
	var sent atomic.Int32
	var b *workerBundle
	answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		if sent.Add(1) == 1 { // the first of the batch leaves the second a Timeout and a millisecond
			clock.Advance(lease - timeout - time.Millisecond - clock.Since())
		}
		answer(w, r)
	}, func(c *client.Config) {
		signer := c.Signer
		c.Signer, c.Lease, c.Timeout, c.Now, c.Logger = nil, lease, timeout, clock.Now, slog.New(logs)
		c.BatchSize, c.Concurrency, c.EndpointConcurrency = 2, 1, 2
		c.SignerFor = func(context.Context, string) (signature.Signer, error) {
			clock.Advance(2 * time.Millisecond)
			return signer, nil
		}
	})
	first := b.enqueue(t, "n-1", `{}`)
	second := b.enqueue(t, "n-2", `{}`)

	if n, err := b.worker.Work(t.Context()); n != 2 || err != nil {
		t.Fatalf("Work = %d, %v; want a batch of 2", n, err)
	}
	if n := sent.Load(); n != 1 {
		t.Fatalf("%d requests sent, want 1 (the second has less than a Timeout of its lease left once signed)", n)
	}
	if d := b.get(t, first); d.Status != courier.StatusSucceeded {
		t.Fatalf("first delivery is %s, want succeeded", d.Status)
	}
	d := b.get(t, second)
	if d.Status != courier.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" {
		t.Fatalf("second delivery is %s after %d attempts, leased by %q; want pending, 0, none", d.Status, d.Attempts, d.LeaseOwner)
	}
	if attempts, err := b.store.Outbox.Attempts(t.Context(), second); err != nil || len(attempts) != 0 {
		t.Fatalf("attempts log of the released delivery: %+v, %v", attempts, err)
	}
	if n := len(logs.lines("worker: lease too short to start an attempt, released")); n != 1 {
		t.Fatalf("%d lease-too-short lines, want 1", n)
	}
	if e := <-b.events; e.DeliveryID != first {
		t.Fatalf("an event for the released delivery: %+v", e)
	}
	select { // Work has returned: an Event would have been sent by now
	case e := <-b.events:
		t.Fatalf("an event for the released delivery: %+v", e)
	default:
	}

	if e := b.work(t); e.DeliveryID != second || e.Attempt != 1 || e.Status != courier.StatusSucceeded || sent.Load() != 2 {
		t.Fatalf("next round: %+v with %d requests sent; want attempt 1 succeeded, two requests", e, sent.Load())
	}
}

// TestRunWaitsAfterAClaimItGaveBackWhole: a claim that takes so long that
// no delivery it leased has a Timeout of lease left gives them all back;
// Run then waits for the next poll (or wake-up) before claiming again,
// rather than claiming at once, again and again, sending nothing. Each
// claim here takes 59 s of the worker's clock out of a one-minute lease,
// so three claims take at least two poll intervals.
func TestRunWaitsAfterAClaimItGaveBackWhole(t *testing.T) {
	t.Parallel()
	const poll = 100 * time.Millisecond
	clock := fakeclock.New() // the worker's
	claims := make(chan struct{}, 100)
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{Hook: func(e store.Event) {
		if e.Kind == store.EventClaimed {
			clock.Advance(59 * time.Second)
			claims <- struct{}{}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	logs := newCapture(t)
	w, err := client.NewWorker(client.Config{Store: s, Signer: newSigner(t), Transport: loopbackGuard(t, srv.URL).Transport(),
		Timeout: 2 * time.Second, Lease: time.Minute, PollInterval: poll, Now: clock.Now, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.Outbox.Enqueue(t.Context(), s.DB(), store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx) }()
	for i := range 3 {
		select {
		case <-claims:
		case <-time.After(10 * time.Second):
			t.Fatalf("claim %d not made within 10s", i+1)
		}
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if elapsed < 2*poll {
		t.Fatalf("three claims in %v, less than two poll intervals (%v): a claim that gave everything back was made again at once", elapsed, 2*poll)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests sent on leases too short for them", n)
	}
	if n := len(logs.lines("worker: lease too short to start an attempt, released")); n < 2 {
		t.Fatalf("%d lease-too-short lines, want one for each claim before the last at least", n)
	}
	d, err := s.Outbox.Get(t.Context(), e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != courier.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" {
		t.Fatalf("delivery is %s after %d attempts, leased by %q; want pending, 0, none", d.Status, d.Attempts, d.LeaseOwner)
	}
}

// TestAClaimThatWaitedForItsConnectionSendsOnItsWholeLease: a claim waits
// for its transaction's connection (here SQLite's writer, held by an
// application's transaction; on PostgreSQL a pool the application's
// transactions fill) before the store stamps its leases. The worker
// measured the leases from before that wait, so a wait longer than the
// lease less a Timeout read as a lease spent: it gave back unsent what
// it held a whole lease on, claim after claim for as long as the waits
// lasted. It measures them from when the claim's transaction began.
func TestAClaimThatWaitedForItsConnectionSendsOnItsWholeLease(t *testing.T) {
	t.Parallel()
	const lease, timeout = time.Minute, 2 * time.Second
	clock := newWorkerClock()
	read := make(chan struct{}, 1)
	logs := newCapture(t)
	var b *workerBundle
	b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) {
		c.Lease, c.Timeout, c.Logger = lease, timeout, slog.New(logs)
		c.Now = func() time.Time {
			select {
			case read <- struct{}{}:
			default:
			}
			return clock.Now()
		}
	})
	id := b.enqueue(t, "n-1", `{}`)
	tx, err := b.store.Begin(t.Context()) // the application's, holding the writer
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := b.worker.Work(t.Context())
		done <- result{n, err}
	}()
	<-read                                       // the worker read its clock before its claim, which waits for the writer
	clock.Advance(lease - timeout + time.Second) // the wait: longer than the lease less a Timeout
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.n != 1 || r.err != nil {
		t.Fatalf("Work = %d, %v; want a batch of 1", r.n, r.err)
	}
	if n := len(logs.lines("worker: lease too short to start an attempt, released")); n != 0 {
		t.Errorf("%d lease-too-short lines: the wait for the writer was taken out of a lease stamped after it", n)
	}
	if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 1 {
		t.Fatalf("delivery is %s after %d attempts; want succeeded at the first", d.Status, d.Attempts)
	}
}

// TestAWorkerThatTakesBackExpiredLeasesSaysSo: a worker that died holding
// leases leaves them to expire; the next claim of another worker takes
// them back, each counted as an attempt (lease_expired), and said nothing
// of it: an operator heard of the dead worker only from Health. It logs
// how many it took back, at Warn.
func TestAWorkerThatTakesBackExpiredLeasesSaysSo(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	var b *workerBundle
	b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) {
		c.Logger = slog.New(logs)
	})
	id := b.enqueue(t, "n-1", `{}`)
	// A worker that claims and dies.
	if got, err := protocol.For(b.store).Claim(t.Context(), protocol.ClaimParams{Owner: "dead", Limit: 1, Lease: time.Minute}); err != nil || len(got) != 1 {
		t.Fatalf("claimed %d, %v", len(got), err)
	}
	b.clock.Advance(2 * time.Minute)
	if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the delivery taken back and sent again", n, err)
	}
	lines := logs.lines("worker: expired leases taken back")
	if len(lines) != 1 || lines[0].Level != slog.LevelWarn || lines[0].Attrs[logkey.Deliveries] != "1" || lines[0].Attrs[logkey.Code] != string(courier.CodeLeaseExpired) {
		t.Fatalf("logged %+v; want one Warn line, 1 delivery, code lease_expired", lines)
	}
	if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 2 {
		t.Fatalf("delivery %s after %d attempts; want succeeded at the second, the expired lease's counted", d.Status, d.Attempts)
	}
}

// TestEachTransactionOfAClaimMeasuresItsOwnLeases: a claim that ends rows
// instead of leasing them (here one quarantined as it is admitted, its
// stored bytes altered) claims again in a transaction of its own, which
// waits for its connection too and stamps its leases as it begins. The
// worker measured every lease from its first transaction's start, so a
// wait before the second was taken out of leases stamped after it, and
// their deliveries were given back unsent.
func TestEachTransactionOfAClaimMeasuresItsOwnLeases(t *testing.T) {
	t.Parallel()
	const lease, timeout = time.Minute, 2 * time.Second
	clock := newWorkerClock()
	logs := newCapture(t)
	var b *workerBundle
	b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) {
		c.Lease, c.Timeout, c.Now, c.Logger = lease, timeout, clock.Now, slog.New(logs)
		c.BatchSize, c.Concurrency, c.EndpointConcurrency = 1, 1, 1
	})
	altered := b.enqueue(t, "n-altered", `{"n":1}`)
	due := b.enqueue(t, "n-due", `{"n":2}`)
	if _, err := b.store.DB().ExecContext(t.Context(), "UPDATE courier_outbox_payload SET payload = ? WHERE id = ?", []byte(`{"n":9}`), altered); err != nil {
		t.Fatal(err)
	}
	passes := 0
	w := b.worker
	client.SetClaimBegan(w, func() {
		// The second transaction waits for its connection: the worker's
		// clock moves by more than the lease less a Timeout meanwhile.
		if passes++; passes == 2 {
			clock.Advance(lease - timeout + time.Second)
		}
	})
	if n, err := w.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want the due delivery, leased in the claim's second transaction", n, err)
	}
	if passes != 2 {
		t.Fatalf("the claim ran %d transactions, want 2", passes)
	}
	if n := len(logs.lines("worker: lease too short to start an attempt, released")); n != 0 {
		t.Errorf("%d lease-too-short lines: the wait before the second transaction was taken out of its leases", n)
	}
	if d := b.get(t, due); d.Status != courier.StatusSucceeded {
		t.Fatalf("the due delivery is %s after %d attempts; want succeeded", d.Status, d.Attempts)
	}
}

package client_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// Delivery control through real workers over real HTTP: fair share,
// endpoint limits across worker processes, ordering keys under faults.

// guardTimeout bounds a wait that should end long before it: a test that
// reaches it has failed (a starved endpoint never completes), rather than
// hanging until go test's own timeout.
const guardTimeout = 2 * time.Minute

// gauge tracks how many requests are in flight and the most there were.
type gauge struct{ now, peak atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// enqueueAll enqueues deliveries (profile none: any 2xx succeeds) in one
// transaction.
func enqueueAll(t *testing.T, s *store.Store, ps ...store.EnqueueParams) {
	t.Helper()
	tx, err := s.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, p := range ps {
		if _, err := s.Outbox.Enqueue(t.Context(), tx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func plain(endpoint, id string) store.EnqueueParams {
	return store.EnqueueParams{NotificationID: id, Endpoint: endpoint, Payload: []byte(`{}`), Profile: ack.ProfileNone}
}

// runWorker runs w until the test ends or stop is called, which waits for
// Run to return.
func runWorker(t *testing.T, w *client.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// openOutbox opens a Store on a SQLite file of the test's own, closed as
// the test ends.
func openOutbox(t *testing.T) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// waitFor waits until ch is closed, failing the test after guardTimeout.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guardTimeout):
		t.Fatalf("gave up waiting for %s", what)
	}
}

// countdown closes done once n calls to hit were made.
type countdown struct {
	left atomic.Int64
	done chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{done: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) hit() {
	if c.left.Add(-1) == 0 {
		close(c.done)
	}
}

// TestSlowEndpointCannotTakeEverySlot: an endpoint that does not answer,
// with its backlog first in claim order, holds no more than the worker's
// EndpointConcurrency, and another endpoint's deliveries go through the
// slots left, all of them, while the slow one still holds its share. The
// time the fast endpoint's deliveries take is compared with their time
// alone, measured first in the same test, and logged (a timed assert would
// not hold on a loaded machine; the structural property is what fails
// without the cap: the fast deliveries never complete).
func TestSlowEndpointCannotTakeEverySlot(t *testing.T) {
	t.Parallel()
	const concurrency, slowN, fastN = 8, 60, 200
	share := (concurrency + 1) / 2 // EndpointConcurrency's default
	release := make(chan struct{})
	var slow gauge
	var slowSeen atomic.Int64
	var fast *countdown
	var fastMu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/slow" {
			slow.enter()
			defer slow.leave()
			slowSeen.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		fastMu.Lock()
		c := fast
		fastMu.Unlock()
		c.hit()
	}))
	t.Cleanup(srv.Close)
	s := openOutbox(t)
	keys := couriertest.StandardWebhooksKeys("sender")
	w, err := client.NewWorker(client.Config{
		Store: s, Signer: keys.Signer, Transport: couriertest.Guard(srv.URL).Transport(),
		Concurrency: concurrency, PollInterval: 10 * time.Millisecond, Timeout: time.Minute, Lease: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)

	fastBatch := func(round string) time.Duration {
		fastMu.Lock()
		fast = newCountdown(fastN)
		c := fast
		fastMu.Unlock()
		var ps []store.EnqueueParams
		for i := range fastN {
			ps = append(ps, plain(srv.URL+"/fast", fmt.Sprintf("%s-f%03d", round, i)))
		}
		start := time.Now()
		enqueueAll(t, s, ps...)
		waitFor(t, c.done, round+" fast deliveries")
		return time.Since(start)
	}
	fastBatch("warm-up")
	alone := fastBatch("alone")

	var ps []store.EnqueueParams
	for i := range slowN {
		ps = append(ps, plain(srv.URL+"/slow", fmt.Sprintf("s%03d", i)))
	}
	enqueueAll(t, s, ps...)
	withSlow := fastBatch("with-slow")
	if peak, cap := slow.peak.Load(), int64(share); peak > cap {
		t.Fatalf("the slow endpoint held %d slots at once, over its share of %d", peak, cap)
	}
	if held := slow.now.Load(); held == 0 {
		t.Fatal("the slow endpoint held no slot while the fast deliveries went: the test shows nothing")
	}
	t.Logf("fast endpoint: %d deliveries alone %s, beside a slow endpoint holding %d slots %s (%.2fx)",
		fastN, alone.Round(time.Millisecond), slow.now.Load(), withSlow.Round(time.Millisecond), float64(withSlow)/float64(alone))
	close(release)
	stop()
}

// TestEndpointsThatStallLeaveTheSlotsLeftToTheRest: three endpoints that
// do not answer, their backlogs first in claim order, hold what each may
// (its share, or its limits) and no more, and a fourth endpoint's
// deliveries all go through the slots left while they stall. The Run
// claims for those two slots because the attempts holding the others have
// run for a PollInterval, rather than wait for half a batch (four) to
// come back, which would be at the stalled attempts' Timeout. The worker
// knows nothing of why they stall:
//   - a quarter share: the share is each endpoint's, not one for the slow
//     ones together, so a sender to many receivers sets it below the
//     default half, and three stalled endpoints hold three quarters;
//   - limits: a sender that gives each customer's endpoint a MaxInFlight
//     of two, at the default share: three stalled hold six of eight.
func TestEndpointsThatStallLeaveTheSlotsLeftToTheRest(t *testing.T) {
	t.Parallel()
	const concurrency, each, stalled, slowN, fastN = 8, 2, 3, 20, 50
	for _, limits := range []bool{false, true} {
		t.Run(map[bool]string{false: "a quarter share", true: "limits"}[limits], func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			var slow gauge
			fast := newCountdown(fastN)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if r.URL.Path == "/fast" {
					fast.hit()
					return
				}
				slow.enter()
				defer slow.leave()
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}))
			t.Cleanup(srv.Close)
			s := openOutbox(t)
			var ps []store.EnqueueParams
			for e := range stalled {
				endpoint := fmt.Sprintf("%s/slow%d", srv.URL, e)
				if limits {
					if err := s.Endpoints.SetLimits(t.Context(), endpoint, store.Limits{MaxInFlight: each}); err != nil {
						t.Fatal(err)
					}
				}
				for i := range slowN {
					ps = append(ps, plain(endpoint, fmt.Sprintf("s%d-%03d", e, i)))
				}
			}
			for i := range fastN {
				ps = append(ps, plain(srv.URL+"/fast", fmt.Sprintf("f%03d", i)))
			}
			enqueueAll(t, s, ps...)
			cfg := client.Config{
				Store: s, Signer: couriertest.StandardWebhooksKeys("sender").Signer, Transport: couriertest.Guard(srv.URL).Transport(),
				Concurrency: concurrency, PollInterval: 10 * time.Millisecond, Timeout: time.Minute, Lease: 2 * time.Minute,
			}
			if !limits {
				cfg.EndpointConcurrency = each
			}
			w, err := client.NewWorker(cfg)
			if err != nil {
				t.Fatal(err)
			}
			stop := runWorker(t, w)
			waitFor(t, fast.done, "the fast endpoint's deliveries")
			if peak, most := slow.peak.Load(), int64(stalled*each); peak > most {
				t.Fatalf("%d stalled endpoints held %d slots at once, over the %d they may hold together", stalled, peak, most)
			}
			if slow.now.Load() == 0 {
				t.Fatal("the stalled endpoints held no slot while the fast deliveries went: the test shows nothing")
			}
			close(release)
			stop()
		})
	}
}

// TestMaxInFlightHoldsAcrossThreeWorkerProcesses: three workers, each on a
// Store with its own pool (three processes, for the database), each
// allowed 8 requests to the endpoint, never have more than the endpoint's
// MaxInFlight of 5 at the receiver at once.
func TestMaxInFlightHoldsAcrossThreeWorkerProcesses(t *testing.T) {
	t.Parallel()
	const n, limit = 150, 5
	var g gauge
	done := newCountdown(n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.enter()
		defer g.leave()
		io.Copy(io.Discard, r.Body)
		time.Sleep(5 * time.Millisecond) // the receiver's work, so requests overlap
	}))
	t.Cleanup(srv.Close)
	stores := couriertest.PostgresStores(t, 3, store.Config{})
	if err := stores[0].Endpoints.SetLimits(t.Context(), srv.URL, store.Limits{MaxInFlight: limit}); err != nil {
		t.Fatal(err)
	}
	var ps []store.EnqueueParams
	for i := range n {
		ps = append(ps, plain(srv.URL, fmt.Sprintf("n%03d", i)))
	}
	enqueueAll(t, stores[0], ps...)
	keys := couriertest.StandardWebhooksKeys("sender")
	for i, s := range stores {
		w, err := client.NewWorker(client.Config{
			Store: s, Owner: fmt.Sprintf("worker-%d", i), Signer: keys.Signer, Transport: couriertest.Guard(srv.URL).Transport(),
			Concurrency: 8, EndpointConcurrency: 8, PollInterval: 10 * time.Millisecond,
			Hook: func(e client.Event) {
				if e.Status == courier.StatusSucceeded {
					done.hit()
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		runWorker(t, w)
	}
	waitFor(t, done.done, "every delivery")
	if peak := g.peak.Load(); peak > limit {
		t.Fatalf("the receiver saw %d requests at once, over MaxInFlight %d", peak, limit)
	}
	t.Logf("peak concurrency at the receiver: %d (limit %d, workers allowed %d)", g.peak.Load(), limit, 3*8)
}

// ordered is the notification of TestOrderedDeliveryPerKeyUnderFaults.
type ordered struct {
	ID  string `json:"id" validate:"required,courier_token"`
	Key string `json:"key" validate:"required"`
	Seq int    `json:"seq"`
}

func (o ordered) DedupeKey() string { return o.ID }

// noBreaker keeps the breaker from pausing the endpoint for its cool-down
// over the faults, which would only slow the test.
var noBreaker = store.Config{Breaker: store.BreakerConfig{Threshold: 1 << 20}}

// TestOrderedDeliveryPerKeyUnderFaults: 1,000 deliveries over 50 ordering
// keys, to a courier receiver behind faults (503s and connections dropped
// after the receiver committed), by three workers on one PostgreSQL (and
// one on SQLite), are each applied exactly once, and within each key
// first applied in enqueue order.
func TestOrderedDeliveryPerKeyUnderFaults(t *testing.T) {
	t.Parallel()
	const keysN, perKey = 50, 20
	for _, tc := range []struct {
		name    string
		workers int
		open    func(t *testing.T) []*store.Store
	}{
		{"postgres", 3, func(t *testing.T) []*store.Store { return couriertest.PostgresStores(t, 3, noBreaker) }},
		{"sqlite", 1, func(t *testing.T) []*store.Store {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), noBreaker)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return []*store.Store{s}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inbox.Close() })
			effects, err := couriertest.NewEffects(t.Context(), inbox)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			applied := make(map[string][]int) // key -> seqs, in the order they were applied
			keys := couriertest.StandardWebhooksKeys("orders")
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
				func(ctx context.Context, tx *sqlx.Tx, o ordered) error {
					mu.Lock()
					applied[o.Key] = append(applied[o.Key], o.Seq)
					mu.Unlock()
					return effects.Record(ctx, tx, o.ID)
				})
			if err != nil {
				t.Fatal(err)
			}
			// A fifth of first attempts answer 503, a tenth are dropped
			// after the receiver committed, and a few second attempts too.
			script := func(id string, attempt int) couriertest.Fault {
				h := fnv.New32a()
				h.Write([]byte(id))
				switch r := h.Sum32() % 100; {
				case attempt == 1 && r < 20, attempt == 2 && r < 5:
					return couriertest.Fault{Status: http.StatusServiceUnavailable}
				case attempt == 1 && r < 30:
					return couriertest.Fault{DropAfterCommit: true}
				}
				return couriertest.Fault{}
			}
			srv := couriertest.NewServer(rcv, script)
			t.Cleanup(srv.Close)

			stores := tc.open(t)
			var ps []store.EnqueueParams
			for seq := range perKey {
				for k := range keysN {
					key := fmt.Sprintf("k%02d", k)
					id := fmt.Sprintf("%s-%02d", key, seq)
					ps = append(ps, store.EnqueueParams{
						NotificationID: id, Endpoint: srv.URL + "/orders", OrderingKey: key, MaxAttempts: 20,
						Payload: fmt.Appendf(nil, `{"id":%q,"key":%q,"seq":%d}`, id, key, seq),
					})
				}
			}
			enqueueAll(t, stores[0], ps...)
			done := newCountdown(len(ps))
			for i := range tc.workers {
				w, err := client.NewWorker(client.Config{
					Store: stores[i], Owner: fmt.Sprintf("worker-%d", i), Signer: keys.Signer, Transport: srv.Guard().Transport(),
					PollInterval: 10 * time.Millisecond, Backoff: func(int, time.Duration) time.Duration { return time.Millisecond },
					Hook: func(e client.Event) {
						switch e.Status {
						case courier.StatusSucceeded:
							done.hit()
						case courier.StatusFailed:
							t.Errorf("delivery %s failed: %s", e.NotificationID, e.Code)
						}
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				runWorker(t, w)
			}
			waitFor(t, done.done, "every delivery")

			counts, err := effects.Counts(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(counts) != len(ps) {
				t.Fatalf("%d notifications applied, want %d", len(counts), len(ps))
			}
			for id, n := range counts {
				if n != 1 {
					t.Errorf("%s applied %d times", id, n)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for key, seqs := range applied {
				for i, seq := range seqs {
					if seq != i {
						t.Fatalf("key %s applied in the order %v, want 0..%d", key, seqs, perKey-1)
					}
				}
			}
			st := srv.Stats()
			t.Logf("%d requests: %d answered 503, %d dropped after commit", st.Requests, st.ByStatus[503], st.Dropped)
			if st.ByStatus[503] == 0 || st.Dropped == 0 {
				t.Fatal("the faults did not happen: the test shows nothing")
			}
		})
	}
}

// TestAWorkerAtItsShareClaimsAgainAsAttemptsEnd: a worker that found an
// endpoint without room claims again as soon as one of its attempts ends,
// not at its next poll: with one endpoint, a share of 2 and a poll an
// hour away, a backlog of 40 is still delivered.
func TestAWorkerAtItsShareClaimsAgainAsAttemptsEnd(t *testing.T) {
	t.Parallel()
	const n = 40
	done := newCountdown(n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		done.hit()
	}))
	t.Cleanup(srv.Close)
	s := openOutbox(t)
	var ps []store.EnqueueParams
	for i := range n {
		ps = append(ps, plain(srv.URL+"/hooks", fmt.Sprintf("n%02d", i)))
	}
	enqueueAll(t, s, ps...) // before the worker starts: no wake-up
	w, err := client.NewWorker(client.Config{
		Store: s, Signer: couriertest.StandardWebhooksKeys("sender").Signer, Transport: couriertest.Guard(srv.URL).Transport(),
		Concurrency: 4, EndpointConcurrency: 2, PollInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	defer stop()
	waitFor(t, done.done, "the backlog, with no poll to wake the worker")
}

package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
	"go.uber.org/goleak"
)

// TestASettleOnAClosedStoreIsNotTriedAgain: the Store is closed while an
// attempt is in flight. The settle can never land, so the worker does not
// try it again for the rest of the lease (which held Run and Stop up to a
// minute): Work returns at once.
func TestASettleOnAClosedStoreIsNotTriedAgain(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	b.enqueue(t, "n-1", `{}`)

	done := make(chan error, 1)
	go func() {
		_, err := b.worker.Work(t.Context())
		done <- err
	}()
	<-arrived
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Work = %v", err)
	}
	if n := len(logs.lines("worker: store write failed, trying again")); n != 0 {
		t.Errorf("the settle was tried again %d times on a closed Store", n)
	}
}

// TestRunEndsOnAClosedStore: no claim on a closed Store can succeed, so a
// Run over one returns the Store's error (database_unavailable) at its
// next claim, whether the Store was closed before the Run began or while
// it waited. It logged a failed claim on its timer, forever.
func TestRunEndsOnAClosedStore(t *testing.T) {
	t.Parallel()
	for _, while := range []bool{false, true} {
		t.Run("while="+strconv.FormatBool(while), func(t *testing.T) {
			t.Parallel()
			logs := newCapture(t)
			b := setupWorker(t, statusHandler(200, ""), func(c *client.Config) {
				c.Logger, c.PollInterval = slog.New(logs), 10*time.Millisecond
			})
			waiting := make(chan struct{}, 1)
			client.SetAwaiting(b.worker, func() {
				select {
				case waiting <- struct{}{}:
				default:
				}
			})
			if !while {
				if err := b.store.Close(); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- b.worker.Run(ctx) }()
			if while {
				<-waiting // the Run claimed, found nothing, and waits
				if err := b.store.Close(); err != nil {
					t.Fatal(err)
				}
			}
			err := <-done
			if !errors.Is(err, courier.CodeDatabaseUnavailable) {
				t.Errorf("Run = %v, want the closed Store's database_unavailable", err)
			}
			if n := len(logs.lines("worker: claim failed")); n > 1 {
				t.Errorf("the claim on the closed Store failed %d times", n)
			}
			if n := len(logs.lines("worker: wake-ups unavailable, polling")); n != 0 {
				t.Errorf("a Run on the closed Store warned %d times that its wake-ups were unavailable", n)
			}
		})
	}
}

// TestRunEndsOnAClosedPostgresStore: as TestRunEndsOnAClosedStore, on
// PostgreSQL, whose Run holds a connection of the pool (passed to Open,
// so it stays open) for its wake-ups.
func TestRunEndsOnAClosedPostgresStore(t *testing.T) {
	t.Parallel()
	s := couriertest.PostgresStore(t, store.Config{})
	keys := couriertest.StandardWebhooksKeys("sender")
	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	client.SetAwaiting(w, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-waiting
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, courier.CodeDatabaseUnavailable) {
		t.Errorf("Run = %v, want the closed Store's database_unavailable", err)
	}
}

// TestAClaimCutShortByCloseSendsNothing: a claim that ends rows (here one
// past its deadline) claims again for the room left, in a transaction of
// its own; the Store closed in between, the second fails. What the first
// leased was handed to the worker as a claim that succeeded: its attempt
// was sent, its outcome could never be recorded, and once its lease
// expired it was sent again. A claim cut short by Close returns the
// closed Store's error instead, and nothing of it is sent.
func TestAClaimCutShortByCloseSendsNothing(t *testing.T) {
	t.Parallel()
	for _, run := range []bool{false, true} {
		t.Run("run="+strconv.FormatBool(run), func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New() // the store's
			var s *store.Store
			var closeOnce sync.Once
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{Now: clock.Now, Hook: func(e store.Event) {
				if e.Kind == store.EventClaimed { // the first claim transaction committed
					closeOnce.Do(func() { _ = s.Close() })
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
			t.Cleanup(srv.Close)
			w, err := client.NewWorker(client.Config{Store: s, Signer: newSigner(t), Transport: loopbackGuard(t, srv.URL).Transport(),
				Concurrency: 2, BatchSize: 2, EndpointConcurrency: 2, Timeout: 2 * time.Second, Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []store.EnqueueParams{
				{NotificationID: "n-expiring", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`), Deadline: clock.Now().Add(time.Second)},
				{NotificationID: "n-due", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`)},
			} {
				if _, err := s.Outbox.Enqueue(t.Context(), s.DB(), p); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(2 * time.Second) // the first is past its deadline: the claim ends it, leases the second, and claims again
			if run {
				ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
				defer cancel()
				err = w.Run(ctx)
			} else {
				_, err = w.Work(t.Context())
			}
			if !errors.Is(err, courier.CodeDatabaseUnavailable) {
				t.Errorf("err = %v, want the closed Store's database_unavailable", err)
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("%d requests sent from a claim the closed Store cut short: their outcome can never be recorded", n)
			}
		})
	}
}

// TestAnIdleRunEndsWhenItsStoreCloses: a Run waiting for a wake-up or
// its next poll learns of the Store's Close at once, and returns the
// closed Store's error leaving no goroutine of its own (its wake-ups'
// listener included). It slept on until its next poll, up to
// PollInterval (an hour here), its listener held all that time: on
// SQLite no wake-up ever comes from a closed Store, and on PostgreSQL a
// database passed to Open stays open, its LISTEN connection with it.
func TestAnIdleRunEndsWhenItsStoreCloses(t *testing.T) {
	for _, tc := range engines {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.open(t)
			ignore := goleak.IgnoreCurrent()
			w, err := client.NewWorker(client.Config{Store: s, Signer: newSigner(t), PollInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			waiting := make(chan struct{}, 1)
			client.SetAwaiting(w, func() {
				select {
				case waiting <- struct{}{}:
				default:
				}
			})
			done := make(chan error, 1)
			go func() { done <- w.Run(t.Context()) }()
			<-waiting // it claimed, found nothing, and waits for a wake-up or its poll
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if !errors.Is(err, courier.CodeDatabaseUnavailable) {
					t.Errorf("Run = %v, want the closed Store's database_unavailable", err)
				}
			case <-time.After(10 * time.Second): // a bound on the failure, not a wait for success
				t.Fatal("Run still waits 10s after its Store closed: it sleeps until its next poll (an hour)")
			}
			if err := goleak.Find(ignore); err != nil {
				t.Errorf("goroutines left once Run returned on a closed Store: %v", err)
			}
		})
	}
}

// closingSigner closes its Store as it signs: the Store closed while an
// attempt is made ready.
type closingSigner struct {
	signature.Signer
	store *store.Store
}

func (s closingSigner) Sign(r *http.Request, m signature.Message) error {
	_ = s.store.Close()
	return s.Signer.Sign(r, m)
}

// TestAStoreClosedBeforeTheSendSendsNothing: a Store closed after the
// claim, before the request goes out (while it is signed, here): the
// request is not sent, for its outcome could never be recorded and,
// once its lease expired, it would be sent again. It was sent.
func TestAStoreClosedBeforeTheSendSendsNothing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) }, func(c *client.Config) {
		c.Signer = closingSigner{Signer: c.Signer, store: c.Store}
	})
	b.enqueue(t, "n-1", `{}`)
	if _, err := b.worker.Work(t.Context()); err != nil {
		t.Fatalf("Work = %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests sent after the Store closed: their outcome can never be recorded", n)
	}
}

// countingHandler counts the lines with message msg and calls at once
// they come to n.
type countingHandler struct {
	slog.Handler
	msg string
	n   int64
	at  func()
	got atomic.Int64
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg && h.got.Add(1) == h.n {
		h.at()
	}
	return h.Handler.Handle(ctx, r)
}

// TestRunEndsOnAClosedStoreWhateverItsClock: a Run whose Config.Now
// panics learns of its Store's Close as one whose clock tells time does,
// and returns the closed Store's error. Its claim was not made for want
// of a reading, and a Run hears of the Close at once, not at its next
// poll: it went round again at once, logging the clock's panic at Error
// each time, for as long as its context lasted.
func TestRunEndsOnAClosedStoreWhateverItsClock(t *testing.T) {
	t.Parallel()
	clock := &brokenClock{}
	ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
	defer cancel()
	// A hundred panics in a row are a Run going round without waiting:
	// it is ended there, and returns nil.
	logs := &countingHandler{Handler: newCapture(t), msg: "worker: Now panicked", n: 100, at: cancel}
	b := setupWorker(t, statusHandler(200, ""), func(c *client.Config) {
		c.Now, c.Logger, c.PollInterval = clock.Now, slog.New(logs), time.Hour
	})
	clock.broken.Store(true)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.worker.Run(ctx); !errors.Is(err, courier.CodeDatabaseUnavailable) {
		t.Errorf("Run = %v after %d panics of its clock, want the closed Store's database_unavailable", err, logs.got.Load())
	}
}

// TestWorkEndsOnAClosedStoreWhateverItsClock: as
// TestRunEndsOnAClosedStoreWhateverItsClock, for Work: on a closed Store
// it returns the Store's error (database_unavailable), as it does with a
// clock that tells time, and as Run does with one that panics. It
// returned internal_error for the clock, and a caller of Work that stops
// on its Store's Close went round for as long as it was called.
func TestWorkEndsOnAClosedStoreWhateverItsClock(t *testing.T) {
	t.Parallel()
	clock := &brokenClock{}
	b := setupWorker(t, statusHandler(200, ""), func(c *client.Config) {
		c.Now, c.Logger = clock.Now, slog.New(newCapture(t))
	})
	clock.broken.Store(true)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.worker.Work(t.Context()); n != 0 || !errors.Is(err, courier.CodeDatabaseUnavailable) {
		t.Errorf("Work = %d, %v; want 0 and the closed Store's database_unavailable", n, err)
	}
}

// TestClaimsLeftOnAClosedStoreAreLoggedOnce: a Store closed while a
// batch is made ready takes none of it back (its leases expire). That is
// said once, at Warn, with how many deliveries were left, when the Run or
// Work ends: each delivery logged "release failed" at Error, as if the
// database had failed, burying a release that really did.
func TestClaimsLeftOnAClosedStoreAreLoggedOnce(t *testing.T) {
	t.Parallel()
	const left = 3
	for _, run := range []bool{false, true} {
		t.Run("run="+strconv.FormatBool(run), func(t *testing.T) {
			t.Parallel()
			logs := newCapture(t)
			var hits atomic.Int32
			b := setupWorker(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) }, func(c *client.Config) {
				c.Signer = closingSigner{Signer: c.Signer, store: c.Store}
				c.Logger = slog.New(logs)
				c.Concurrency, c.BatchSize, c.EndpointConcurrency = left, left, left
			})
			for i := range left {
				b.enqueue(t, "n-"+strconv.Itoa(i), `{}`)
			}
			if run {
				ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
				defer cancel()
				if err := b.worker.Run(ctx); !errors.Is(err, courier.CodeDatabaseUnavailable) {
					t.Fatalf("Run = %v, want the closed Store's database_unavailable", err)
				}
			} else if n, err := b.worker.Work(t.Context()); n != left || err != nil {
				t.Fatalf("Work = %d, %v; want %d", n, err, left)
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("%d requests sent after the Store closed", n)
			}
			if n := len(logs.lines("worker: release failed")); n != 0 {
				t.Errorf("%d releases logged as failed on a closed Store, which takes none back", n)
			}
			lines := logs.lines("worker: Store closed; claimed deliveries left to their leases")
			if len(lines) != 1 {
				t.Fatalf("%d lines say the closed Store left the claimed deliveries to their leases, want 1", len(lines))
			}
			if l := lines[0]; l.Level != slog.LevelWarn || l.Attrs["deliveries"] != strconv.Itoa(left) {
				t.Errorf("logged at %v with deliveries=%s, want WARN with %d", l.Level, l.Attrs["deliveries"], left)
			}
		})
	}
}

// closingTransport closes its Store as the request reaches it: the Store
// closed after the worker's last look at it before the send, as another
// goroutine's Close may land there.
type closingTransport struct {
	next  http.RoundTripper
	store *store.Store
}

func (c closingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_ = c.store.Close()
	return c.next.RoundTrip(r)
}

// TestAStoreClosedAsTheRequestGoesOutSendsNothing: a Store closed after
// the worker's check that it is open, as the transport comes to write the
// request: the request is not written (over HTTP/2, whose headers go out
// first, no body reaches the receiver whole), for its outcome could never
// be recorded and, once its lease expired, it would be sent again. The
// delivery is left to its lease, as one claimed and not sent is. The
// request went out: the check was made only before the request was handed
// to the transport.
func TestAStoreClosedAsTheRequestGoesOutSendsNothing(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run("http2="+strconv.FormatBool(h2), func(t *testing.T) {
			t.Parallel()
			var arrived, whole atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				arrived.Add(1)
				body, err := io.ReadAll(r.Body)
				if err != nil || int64(len(body)) != r.ContentLength {
					http.Error(w, "cut short", http.StatusBadRequest)
					return
				}
				whole.Add(1)
			}))
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			logs := newCapture(t)
			b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, func(c *client.Config) {
				next := loopbackGuard(t, srv.URL).Transport()
				if h2 {
					next = srv.Client().Transport
				}
				c.Transport = closingTransport{next: next, store: c.Store}
				c.Logger = slog.New(logs)
			})
			b.server.URL = srv.URL
			b.enqueue(t, "n-1", `{"n":1}`)
			if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
				t.Fatalf("Work = %d, %v; want one delivery", n, err)
			}
			if n := whole.Load(); n != 0 {
				t.Fatalf("%d requests reached the receiver whole after the Store closed: their outcome can never be recorded", n)
			}
			if !h2 {
				if n := arrived.Load(); n != 0 {
					t.Fatalf("%d requests reached the receiver after the Store closed", n)
				}
			}
			if n := len(logs.lines("worker: request not written within its Timeout, released")); n != 0 {
				t.Errorf("%d lines say the request was late: it was held back for the Store's Close", n)
			}
			if n := len(logs.lines("worker: Store closed; claimed deliveries left to their leases")); n != 1 {
				t.Errorf("%d lines say the closed Store left the delivery to its lease, want 1", n)
			}
			select {
			case e := <-b.events:
				t.Errorf("an event for a delivery never sent: %+v", e)
			default:
			}
		})
	}
}

// TestARunInItsClaimEndsWhenItsStoreCloses: a Run whose claim waits in
// the database (here at a lock another transaction holds on the outbox,
// as a busy database, or a pool at its limit, keeps it) as its Store
// closes hears of the Close at once: the claim is cut short, leasing
// nothing, and Run returns the closed Store's error without logging it as
// a claim that failed. It waited in its claim for as long as the lock was
// held, the Close unheard of.
func TestARunInItsClaimEndsWhenItsStoreCloses(t *testing.T) {
	t.Parallel()
	b := setupClaims(t)
	logs := newCapture(t)
	enqueueAll(t, b.store, plain(b.srv.URL+"/hooks", "n-1"))
	w, err := client.NewWorker(client.Config{
		Store: b.store, Signer: couriertest.StandardWebhooksKeys("sender").Signer,
		Transport: couriertest.Guard(b.srv.URL).Transport(), PollInterval: time.Hour, Logger: slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	letGo := b.holdClaims(t)
	done := make(chan error, 1)
	go func() { done <- w.Run(t.Context()) }()
	b.awaitClaimHeld(t)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, courier.CodeDatabaseUnavailable) {
			t.Errorf("Run = %v, want the closed Store's database_unavailable", err)
		}
	case <-time.After(10 * time.Second): // a bound on the failure, not a wait for success
		letGo()
		<-done
		t.Fatal("Run still in its claim 10s after its Store closed: it waits for the lock")
	}
	if n := len(logs.lines("worker: claim failed")); n != 0 {
		t.Errorf("%d claims logged as failed: the closed Store's error is Run's to return", n)
	}
	letGo()
	var leased int
	if err := b.db.GetContext(t.Context(), &leased, `SELECT count(*) FROM courier_outbox WHERE status = 'leased'`); err != nil {
		t.Fatal(err)
	}
	if leased != 0 {
		t.Errorf("%d deliveries leased by a claim the Store's Close cut short", leased)
	}
}

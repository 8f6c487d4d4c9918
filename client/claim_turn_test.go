package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// TestAWorkerClaimingTwiceAtOnceKeepsToItsEndpointShare: one Worker that
// claims from two Runs, or a Run and a Work, or two Works, at the same
// moment on PostgreSQL holds no more of a slow endpoint's deliveries than
// its EndpointConcurrency. The store reckons the share from the leases the
// worker's Owner has committed, so two claims at once would each lease the
// whole share; the worker's claims take turns, and the second counts the
// leases of the first. Whether two claims at once overlap in the database
// is a matter of timing, so each case gives them many rounds to.
func TestAWorkerClaimingTwiceAtOnceKeepsToItsEndpointShare(t *testing.T) {
	t.Parallel()
	const rounds, share = 20, 2
	run := func(ctx context.Context, w *client.Worker) error { return w.Run(ctx) }
	work := func(ctx context.Context, w *client.Worker) error { _, err := w.Work(ctx); return err }
	for _, tc := range []struct {
		name          string
		first, second claimer
	}{
		{"two Runs", run, run},
		{"a Run and a Work", run, work},
		{"two Works", work, work},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupClaims(t)
			for round := range rounds {
				if held := b.claimTwiceAtOnce(t, round, share, tc.first, tc.second); held != share {
					t.Fatalf("round %d: the worker holds %d of the endpoint's deliveries at once, want its EndpointConcurrency of %d", round, held, share)
				}
			}
		})
	}
}

// claimer is Worker.Run, or Worker.Work, of w.
type claimer func(ctx context.Context, w *client.Worker) error

// claimBundle is what the tests of a worker's claims at once need: an
// outbox on PostgreSQL whose claims they watch and can hold up, and an
// endpoint that answers no attempt, so that every delivery claimed stays
// leased.
type claimBundle struct {
	db         *sqlx.DB
	store      *store.Store
	claimEnded chan struct{} // a claim's span ended
	srv        *httptest.Server
}

func setupClaims(t *testing.T) *claimBundle {
	t.Helper()
	db, err := sqlx.Open(postgres.DriverName, couriertest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxIdleConns(8)
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	claimEnded := make(chan struct{}, 16)
	s, err := store.Open(t.Context(), db, store.Config{Tracer: &tracingtest.Recorder{OnEnd: func(s *tracingtest.Span) {
		if s.Name == tracing.SpanClaim {
			claimEnded <- struct{}{}
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices the worker hang up only once the body is read
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return &claimBundle{db: db, store: s, claimEnded: claimEnded, srv: srv}
}

// claimTwiceAtOnce enqueues a backlog of 12 for an endpoint of its own,
// has a new worker claim it with first and second at once, and returns
// how many of the endpoint's deliveries the worker holds once both claims
// have ended. The claims are held at a lock on the outbox (holdClaims)
// until one of them waits there. The round ends with the
// worker stopped and the backlog cancelled.
func (b *claimBundle) claimTwiceAtOnce(t *testing.T, round, share int, first, second claimer) int {
	t.Helper()
	ctx := t.Context()
	endpoint := fmt.Sprintf("%s/slow/%d", b.srv.URL, round)
	var ps []store.EnqueueParams
	for i := range 12 {
		ps = append(ps, plain(endpoint, fmt.Sprintf("n%02d", i)))
	}
	enqueueAll(t, b.store, ps...)
	owner := fmt.Sprintf("worker-%d", round)
	w, err := client.NewWorker(client.Config{
		Store: b.store, Owner: owner, Signer: couriertest.StandardWebhooksKeys("sender").Signer,
		Transport:   couriertest.Guard(b.srv.URL).Transport(),
		Concurrency: 8, EndpointConcurrency: share, PollInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}

	letGo := b.holdClaims(t)
	claimCtx, stop := context.WithCancel(context.Background())
	var claimers sync.WaitGroup
	for _, claim := range []claimer{first, second} {
		claimers.Go(func() {
			if err := claim(claimCtx, w); err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		})
	}
	defer b.endRound(t, stop, &claimers)

	b.awaitClaimHeld(t)
	letGo()
	for range 2 {
		b.awaitClaimEnded(t)
	}
	var held int
	if err := b.db.GetContext(ctx, &held, `SELECT count(*) FROM courier_outbox WHERE status = 'leased' AND lease_owner = $1`, owner); err != nil {
		t.Fatal(err)
	}
	return held
}

// holdClaims takes a lock on the outbox that every claim's first write
// waits for, until letGo is called or the test ends.
func (b *claimBundle) holdClaims(t *testing.T) (letGo func()) {
	t.Helper()
	lock, err := b.db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback() })
	if _, err := lock.ExecContext(t.Context(), `LOCK TABLE courier_outbox IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := lock.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitClaimHeld waits until a claim waits at holdClaims' lock.
func (b *claimBundle) awaitClaimHeld(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
	defer cancel()
	for waiting := 0; waiting == 0; {
		err := b.db.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_locks WHERE relation = 'courier_outbox'::regclass AND NOT granted`)
		if err != nil {
			t.Fatalf("waiting for a claim at the lock: %v", err)
		}
	}
}

// awaitClaimEnded waits until a claim has ended.
func (b *claimBundle) awaitClaimEnded(t *testing.T) {
	t.Helper()
	select {
	case <-b.claimEnded:
	case <-time.After(guardTimeout):
		t.Fatal("gave up waiting for a claim to end")
	}
}

// endRound stops the round's worker, its attempts cut short and given
// back, and cancels every delivery left, so that the next round's claims
// find only its own.
func (b *claimBundle) endRound(t *testing.T, stop context.CancelFunc, claimers *sync.WaitGroup) {
	t.Helper()
	stop()
	claimers.Wait()
	for range len(b.claimEnded) {
		<-b.claimEnded
	}
	var left []int64
	if err := b.db.SelectContext(t.Context(), &left, `SELECT id FROM courier_outbox WHERE status IN ('pending', 'retry_wait')`); err != nil {
		t.Fatal(err)
	}
	for _, id := range left {
		if err := b.store.Outbox.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAClaimCutShortPassesTheWorkersClaimTurnOn: a claim that holds the
// worker's claim turn, held up in the database, is cut short when its
// context ends or Stop is called, and the turn passes on: a claim waiting
// for it goes ahead, or after Stop gives up, and Stop returns. A claim
// waiting for the turn gives up when its own context ends.
func TestAClaimCutShortPassesTheWorkersClaimTurnOn(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (*claimBundle, *client.Worker) {
		b := setupClaims(t)
		enqueueAll(t, b.store, plain(b.srv.URL+"/slow", "n-1"))
		w, err := client.NewWorker(client.Config{
			Store: b.store, Signer: couriertest.StandardWebhooksKeys("sender").Signer,
			Transport: couriertest.Guard(b.srv.URL).Transport(), PollInterval: time.Hour,
		})
		if err != nil {
			t.Fatal(err)
		}
		return b, w
	}
	// runHeld starts a Run whose first claim takes the turn and waits at
	// the lock, and returns its result.
	runHeld := func(t *testing.T, b *claimBundle, ctx context.Context, w *client.Worker) <-chan error {
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		b.awaitClaimHeld(t) //nolint:contextcheck // the test's wait, under t's context, not the Run's
		return done
	}
	work := func(ctx context.Context, w *client.Worker) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := w.Work(ctx)
			done <- err
		}()
		return done
	}
	await := func(t *testing.T, done <-chan error, what string) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(guardTimeout):
			t.Fatalf("gave up waiting for %s", what)
			return nil
		}
	}

	t.Run("its context ends", func(t *testing.T) {
		t.Parallel()
		b, w := setup(t)
		letGo := b.holdClaims(t)
		runCtx, cancelRun := context.WithCancel(t.Context())
		ran := runHeld(t, b, runCtx, w)
		workCtx, cancelWork := context.WithCancel(context.Background())
		worked := work(workCtx, w)
		t.Cleanup(func() {
			cancelWork()
			await(t, worked, "Work")
		})
		cancelRun()
		if err := await(t, ran, "Run"); err != nil {
			t.Fatalf("Run = %v", err)
		}
		for range len(b.claimEnded) {
			<-b.claimEnded
		}
		letGo()
		b.awaitClaimEnded(t) // Work's, with the turn Run's claim gave up
		var held int
		if err := b.db.GetContext(t.Context(), &held, `SELECT count(*) FROM courier_outbox WHERE status = 'leased'`); err != nil {
			t.Fatal(err)
		}
		if held != 1 {
			t.Fatalf("%d deliveries leased after the claim of Work, want 1", held)
		}
	})

	t.Run("the context of the claim waiting for its turn ends", func(t *testing.T) {
		t.Parallel()
		b, w := setup(t)
		b.holdClaims(t)
		runCtx, cancelRun := context.WithCancel(t.Context())
		ran := runHeld(t, b, runCtx, w)
		t.Cleanup(func() {
			cancelRun()
			await(t, ran, "Run")
		})
		workCtx, cancelWork := context.WithCancel(context.Background())
		worked := work(workCtx, w)
		cancelWork()
		if err := await(t, worked, "Work"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Work = %v, want %v", err, context.Canceled)
		}
	})

	t.Run("Stop is called", func(t *testing.T) {
		t.Parallel()
		b, w := setup(t)
		b.holdClaims(t)
		ran := runHeld(t, b, context.Background(), w)
		worked := work(context.Background(), w)
		ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
		defer cancel()
		if err := w.Stop(ctx); err != nil {
			t.Fatalf("Stop = %v", err)
		}
		if err := await(t, ran, "Run"); err != nil {
			t.Fatalf("Run = %v", err)
		}
		if err := await(t, worked, "Work"); !errors.Is(err, courier.CodeWorkerStopped) {
			t.Fatalf("Work = %v, want %s", err, courier.CodeWorkerStopped)
		}
	})
}

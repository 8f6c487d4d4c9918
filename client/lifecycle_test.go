package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store/sqlite"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
)

// TestRunsShareConcurrency: Config.Concurrency is how many deliveries are
// in flight at once across every Run and Work of a Worker: two Runs of one
// Worker with Concurrency 2 hold at most 2 attempts in flight (each had
// its own 2 before).
func TestRunsShareConcurrency(t *testing.T) {
	h := setupHold(t, func(c *client.Config) {
		c.Concurrency, c.EndpointConcurrency, c.PollInterval = 2, 1, 20*time.Millisecond
	})
	// Six deliveries to six endpoints, so no endpoint share limits them.
	for i := range 6 {
		tx, err := h.store.DB().BeginTxx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{
			NotificationID: fmt.Sprintf("n%d", i), Endpoint: fmt.Sprintf("%s/hooks/%d", h.server.URL, i), Payload: []byte(`{}`),
		}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{}, 2)
	for range 2 {
		go func() { h.worker.Run(ctx); done <- struct{}{} }()
	}
	defer func() {
		close(h.release)
		h.worker.Stop(context.Background())
		cancel()
		<-done
		<-done
	}()
	<-h.arrived
	<-h.arrived
	select {
	case id := <-h.arrived:
		t.Fatalf("a third attempt (%s) is in flight with Concurrency 2 and the first two still held", id)
	case <-time.After(500 * time.Millisecond): // 25 poll intervals: asserting that none comes
	}
}

// claimTracer signals each courier.claim span's start and, when failed
// is set, the code each such span fails with.
type claimTracer struct {
	claims chan struct{}
	failed chan courier.Code
}

type nopSpan struct{}

func (nopSpan) SetAttributes(...slog.Attr) {}
func (nopSpan) Fail(courier.Code)          {}
func (nopSpan) End()                       {}

func (c claimTracer) Start(ctx context.Context, name string, _ courier.SpanKind, _ ...slog.Attr) (context.Context, courier.Span) {
	if name == "courier.claim" {
		select {
		case c.claims <- struct{}{}:
		default:
		}
		if c.failed != nil {
			return ctx, claimSpan{failed: c.failed}
		}
	}
	return ctx, nopSpan{}
}

// claimSpan is a courier.claim span that tells what it fails with, if
// failed has room.
type claimSpan struct {
	nopSpan
	failed chan<- courier.Code
}

func (s claimSpan) Fail(code courier.Code) {
	select {
	case s.failed <- code:
	default:
	}
}
func (claimTracer) Inject(context.Context) courier.TraceContext { return courier.TraceContext{} }
func (claimTracer) Extract(ctx context.Context, _ courier.TraceContext) context.Context {
	return ctx
}

// checkCutShort fails t unless the claim that waited for the write lock
// as when happened failed worker_stopped (cut short), not
// database_unavailable (the busy timeout, 10 s, waited out); called once
// the Run that claimed returned, after the claim's span ended.
func (c claimTracer) checkCutShort(t *testing.T, when string) {
	t.Helper()
	select {
	case code := <-c.failed:
		if code != courier.CodeWorkerStopped {
			t.Fatalf("the claim waiting as %s failed %s, want %s (cut short)", when, code, courier.CodeWorkerStopped)
		}
	default:
		t.Fatalf("the claim waiting as %s did not fail, want it cut short (%s)", when, courier.CodeWorkerStopped)
	}
}

// writerHolders are the two ways an application holds SQLite's write
// lock in a transaction: one begun on the Store (its one writer
// connection), and one of the pool Store.DB() returns, after a write.
var writerHolders = []struct {
	name  string
	begin func(ctx context.Context, s *store.Store) (*sqlx.Tx, error)
}{
	{"Store.Begin", func(ctx context.Context, s *store.Store) (*sqlx.Tx, error) { return s.Begin(ctx) }},
	{"Store.DB", func(ctx context.Context, s *store.Store) (*sqlx.Tx, error) {
		tx, err := s.DB().BeginTxx(ctx, nil)
		if err == nil { // an enqueue: the write lock is held from here
			_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/h", Payload: []byte(`{}`)})
		}
		return tx, err
	}},
}

// TestStopCutsAWaitingClaimShort: Stop stops claiming, a claim in
// progress too. A Run whose claim waits for SQLite's write lock, held by
// the application's transaction, returns once Stop is called, not when
// the application's transaction ends: one from Store.Begin holds the
// Store's one writer connection (Run ignored Stop before); one of the
// pool Store.DB() returns holds the lock on a connection of its own, for
// which the claim waited inside SQLite, where no context reaches, until
// the busy timeout (10 s). The claim is cut short (worker_stopped), not
// failed database_unavailable after waiting out the busy timeout.
func TestStopCutsAWaitingClaimShort(t *testing.T) {
	for _, tc := range writerHolders {
		t.Run(tc.name, func(t *testing.T) {
			tr := claimTracer{claims: make(chan struct{}, 1), failed: make(chan courier.Code, 1)}
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "o.db"), store.Config{Tracer: tr})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			key, _ := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
			signer, _ := signature.NewStandardWebhooksSigner(key)
			w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Owner: "w", Lease: 2 * time.Second, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			app, err := tc.begin(t.Context(), s) // the application's long business transaction
			if err != nil {
				t.Fatal(err)
			}
			defer app.Rollback()
			runDone := make(chan error, 1)
			go func() { runDone <- w.Run(context.Background()) }()
			<-tr.claims                                                            // Run's claim has started and waits for the lock
			ctx, cancel := context.WithTimeout(context.Background(), guardTimeout) // a bound on failure
			defer cancel()
			if err := w.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v; want nil, Run returning once its claim is cut short, with the application's transaction still open", err)
			}
			if err := <-runDone; err != nil {
				t.Fatalf("Run: %v", err)
			}
			tr.checkCutShort(t, "Stop was called")
		})
	}
}

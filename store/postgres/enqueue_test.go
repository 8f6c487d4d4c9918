package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// gate is a courier.Tracer that holds an enqueue's insert, as its span
// starts, until another transaction has reached an insert of its own:
// waitFor maps "writer:notification id" to the one it waits for. The
// writer is its context's writerKey.
type gate struct {
	mu      sync.Mutex
	reached map[string]chan struct{}
	waitFor map[string]string
}

type writerKey struct{}

func (g *gate) point(k string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.reached[k]
	if !ok {
		c = make(chan struct{})
		g.reached[k] = c
	}
	return c
}

func (g *gate) Start(ctx context.Context, name string, _ courier.SpanKind, attrs ...slog.Attr) (context.Context, courier.Span) {
	if name == tracing.SpanEnqueue {
		for _, a := range attrs {
			if a.Key != tracing.AttrNotificationID {
				continue
			}
			w, _ := ctx.Value(writerKey{}).(string)
			k := w + ":" + a.Value.String()
			close(g.point(k))
			if other, ok := g.waitFor[k]; ok {
				<-g.point(other)
			}
		}
	}
	return ctx, noSpan{}
}

func (g *gate) Inject(context.Context) courier.TraceContext { return courier.TraceContext{} }

func (g *gate) Extract(ctx context.Context, _ courier.TraceContext) context.Context { return ctx }

type noSpan struct{}

func (noSpan) SetAttributes(...slog.Attr) {}
func (noSpan) Fail(courier.Code)          {}
func (noSpan) End()                       {}

// TestEnqueueManyOfTheSameDeliveriesInEitherOrderDoesNotDeadlock: two
// transactions enqueue the same two deliveries with EnqueueMany, listed
// in opposite orders, and neither inserts the second of its list before
// the other has reached its own insert of that delivery. Inserted as
// listed, each would wait for the other's uncommitted row, and
// PostgreSQL would abort one (a deadlock, database_unavailable); written
// in one order, the second waits for the first and finds them Existed.
func TestEnqueueManyOfTheSameDeliveriesInEitherOrderDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	g := &gate{reached: map[string]chan struct{}{}, waitFor: map[string]string{
		"T1:b": "T2:a",
		"T2:a": "T1:b",
	}}
	db := openPostgres(t)
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), db, store.Config{Tracer: g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const endpoint = "https://receiver.example/hooks"
	a := store.EnqueueParams{NotificationID: "a", Endpoint: endpoint, Payload: []byte(`{"id":"a"}`)}
	b := store.EnqueueParams{NotificationID: "b", Endpoint: endpoint, Payload: []byte(`{"id":"b"}`)}
	run := func(writer string, ps []store.EnqueueParams) ([]store.Enqueued, error) {
		ctx := context.WithValue(t.Context(), writerKey{}, writer)
		tx, err := s.Begin(ctx)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback()
		got, err := s.Outbox.EnqueueMany(ctx, tx, ps)
		if err != nil {
			return nil, err
		}
		return got, tx.Commit()
	}
	var wg sync.WaitGroup
	var got [2][]store.Enqueued
	var errs [2]error
	wg.Go(func() { got[0], errs[0] = run("T1", []store.EnqueueParams{a, b}) })
	wg.Go(func() { got[1], errs[1] = run("T2", []store.EnqueueParams{b, a}) })
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("T1: %v; T2: %v; want both to succeed", errs[0], errs[1])
	}
	// The results are in each list's order; one transaction wrote both.
	if got[0][0].ID != got[1][1].ID || got[0][1].ID != got[1][0].ID ||
		got[0][0].Existed != got[0][1].Existed || got[1][0].Existed != got[1][1].Existed || got[0][0].Existed == got[1][0].Existed {
		t.Fatalf("T1 (a, b) = %+v, T2 (b, a) = %+v; want the same two deliveries, written by one and Existed to the other", got[0], got[1])
	}
}

// TestPgxEnqueueRetriedInItsTransactionJoinsItsOrderingKey: as through
// database/sql (storetest's EnqueueRetriedInItsTransactionJoinsItsOrderingKey),
// a pgx transaction whose Enqueue of a delivery with an ordering key
// failed between its insert and its join (the context ended before the
// join's statement was sent, which leaves the transaction usable), and
// which retries the Enqueue and commits, leaves the delivery its key's
// head, claimed.
func TestPgxEnqueueRetriedInItsTransactionJoinsItsOrderingKey(t *testing.T) {
	t.Parallel()
	var cancel context.CancelFunc
	app := setupPgx(t, store.Config{Tracer: &tracingtest.Recorder{OnEnd: func(s *tracingtest.Span) {
		if s.Name == tracing.SpanEnqueue && cancel != nil {
			cancel()
			cancel = nil
		}
	}}})
	p := store.EnqueueParams{NotificationID: "o-1", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{"id":"o-1"}`), OrderingKey: "customer-7"}
	err := app.inTx(t, "o-1", true, func(tx pgx.Tx) error {
		var ctx context.Context
		ctx, cancel = context.WithCancel(t.Context())
		if _, err := postgres.Enqueue(ctx, app.s, tx, p); err == nil {
			t.Fatal("the interrupted Enqueue succeeded")
		}
		e, err := postgres.Enqueue(t.Context(), app.s, tx, p)
		if err == nil && !e.Existed {
			t.Errorf("Enqueue retried in its transaction = %+v, want Existed", e)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := protocol.For(app.s).Claim(t.Context(), protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 1 || c[0].NotificationID != "o-1" {
		t.Fatalf("claimed %d deliveries; want o-1, its key's head", len(c))
	}
}

// TestPgxEnqueueInAnEndedTransactionIsRefused: an Enqueue in the
// application's pgx transaction after its Commit is the application's
// mistake, invalid_argument, as in a database/sql one (see the
// conformance test ACallInAnEndedTransactionIsRefused), not a database
// that is down.
func TestPgxEnqueueInAnEndedTransactionIsRefused(t *testing.T) {
	t.Parallel()
	app := setupPgx(t, store.Config{})
	tx, err := app.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Enqueue(t.Context(), app.s, tx, store.EnqueueParams{NotificationID: "late", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`)})
	if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "transaction has ended") {
		t.Errorf("Enqueue in a committed pgx transaction = %v; want invalid_argument saying the transaction has ended", err)
	}
}

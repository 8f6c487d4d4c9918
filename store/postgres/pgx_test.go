package postgres_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tracing/tracingtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// pgxApp is an application on pgxpool: its pool, its own table, and the
// Store over the same database.
type pgxApp struct {
	pool *pgxpool.Pool
	s    *store.Store
	db   *sqlx.DB
}

func setupPgx(t *testing.T, cfg store.Config) pgxApp {
	t.Helper()
	ctx := t.Context()
	url := pgtest.URL(t)
	db, err := sqlx.Open(postgres.DriverName, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return pgxApp{pool: pool, s: s, db: db}
}

// inTx runs fn in a pgx transaction that writes a business row, committed
// when commit is true and rolled back otherwise.
func (a pgxApp) inTx(t *testing.T, order string, commit bool, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := t.Context()
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", order); err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		return err
	}
	if commit {
		return tx.Commit(ctx)
	}
	return tx.Rollback(ctx)
}

func (a pgxApp) outboxRows(t *testing.T) int {
	t.Helper()
	var n int
	if err := a.db.GetContext(t.Context(), &n, "SELECT count(*) FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPgxEnqueueCommitsWithTheTransactionAndIsDelivered: a delivery
// enqueued in a pgx.Tx is invisible until the transaction commits, wakes
// a listening worker when it does, and a worker delivers it, with the
// trace context of the enqueue.
func TestPgxEnqueueCommitsWithTheTransactionAndIsDelivered(t *testing.T) {
	t.Parallel()
	rec := &tracingtest.Recorder{}
	ctx, span := rec.Start(t.Context(), "request", courier.SpanServer)
	defer span.End()
	app := setupPgx(t, store.Config{Tracer: rec})
	keys := couriertest.StandardWebhooksKeys("orders")
	traceparent := make(chan string, 1)
	srv := couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traceparent <- r.Header.Get("traceparent")
		w.WriteHeader(http.StatusNoContent)
	}), nil)
	defer srv.Close()

	wake, stop, err := protocol.For(app.s).Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var e store.Enqueued
	err = app.inTx(t, "o-1", true, func(tx pgx.Tx) error {
		var err error
		e, err = postgres.Enqueue(ctx, app.s, tx, store.EnqueueParams{
			NotificationID: "o-1", Endpoint: srv.URL + "/hook", Payload: []byte(`{"id":"o-1"}`), Profile: "none",
		})
		if err != nil {
			return err
		}
		// Not committed: another connection sees nothing yet.
		if _, err := app.s.Outbox.Lookup(ctx, "o-1", srv.URL+"/hook"); !errors.Is(err, courier.CodeNotFound) {
			t.Errorf("before commit: Lookup = %v, want CodeNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == 0 || e.Existed {
		t.Fatalf("Enqueue = %+v, want a new delivery", e)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("no wake-up after the pgx transaction committed")
	}

	w, err := client.NewWorker(client.Config{Store: app.s, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := couriertest.Drain(ctx, w); err != nil || n != 1 {
		t.Fatalf("Drain = %d, %v; want 1 delivery", n, err)
	}
	d, err := app.s.Outbox.Lookup(ctx, "o-1", srv.URL+"/hook")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != e.ID || d.Status != courier.StatusSucceeded {
		t.Fatalf("delivery = id %d %s, want id %d succeeded", d.ID, d.Status, e.ID)
	}
	if got := srv.Stats().ByID["o-1"]; got != 1 {
		t.Fatalf("receiver got o-1 %d times, want 1", got)
	}
	// The Store traces its worker too: the attempt's span is a child of
	// the enqueue span, itself a child of the request, and its context is
	// what the attempt sent.
	enq, post := rec.Named("courier.enqueue"), rec.Named("POST")
	if got := <-traceparent; len(enq) != 1 || len(post) != 1 || enq[0].Parent != rec.Inject(ctx) ||
		post[0].Parent != enq[0].Context || got != post[0].Context.Parent {
		t.Fatalf("the attempt sent traceparent %q; want its span's, a child of the enqueue span, a child of the request", got)
	}
}

// TestPgxRollbackLeavesNothing: Enqueue, EnqueueMany and Publish in a pgx
// transaction that rolls back leave no delivery, as the business row.
func TestPgxRollbackLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	app := setupPgx(t, store.Config{})
	if _, err := app.s.Subscriptions.Create(ctx, app.db, store.SubscriptionParams{
		Tenant: "acme", Endpoint: "https://hooks.example/a", EventTypes: []string{"order.paid"}, KeyID: "k1", Profile: "none",
	}); err != nil {
		t.Fatal(err)
	}
	p := func(id string) store.EnqueueParams {
		return store.EnqueueParams{NotificationID: id, Endpoint: "https://hooks.example/b", Payload: []byte(`{}`)}
	}
	err := app.inTx(t, "o-1", false, func(tx pgx.Tx) error {
		if _, err := postgres.Enqueue(ctx, app.s, tx, p("n-1")); err != nil {
			return err
		}
		if _, err := postgres.EnqueueMany(ctx, app.s, tx, []store.EnqueueParams{p("n-2"), p("n-3")}); err != nil {
			return err
		}
		pub, err := postgres.Publish(ctx, app.s, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-1", Payload: []byte(`{}`)})
		if err == nil && len(pub) != 1 {
			t.Errorf("Publish made %d deliveries, want 1", len(pub))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var orders int
	if err := app.db.GetContext(ctx, &orders, "SELECT count(*) FROM orders"); err != nil {
		t.Fatal(err)
	}
	if n := app.outboxRows(t); n != 0 || orders != 0 {
		t.Fatalf("after rollback: %d deliveries, %d orders; want none", n, orders)
	}

	// The same, committed, makes all four.
	err = app.inTx(t, "o-2", true, func(tx pgx.Tx) error {
		if _, err := postgres.EnqueueMany(ctx, app.s, tx, []store.EnqueueParams{p("n-1"), p("n-2"), p("n-3")}); err != nil {
			return err
		}
		_, err := postgres.Publish(ctx, app.s, tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "e-1", Payload: []byte(`{}`)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := app.outboxRows(t); n != 4 {
		t.Fatalf("after commit: %d deliveries, want 4", n)
	}
}

// TestPgxIdempotencyIsDatabaseSQLs: the same delivery enqueued through
// database/sql and then through pgx is one row, Existed; another payload
// under its identity is CodeIdempotencyCollision either way, the row
// unchanged; and pgx's validation is Enqueue's.
func TestPgxIdempotencyIsDatabaseSQLs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	app := setupPgx(t, store.Config{})
	p := store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://hooks.example/a", Payload: []byte(`{"v":1}`)}
	tx, err := app.s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := app.s.Outbox.Enqueue(ctx, tx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	var again store.Enqueued
	if err := app.inTx(t, "o-1", true, func(tx pgx.Tx) error {
		again, err = postgres.Enqueue(ctx, app.s, tx, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || !again.Existed {
		t.Fatalf("pgx re-enqueue = %+v, want id %d existed", again, first.ID)
	}

	other := p
	other.Payload = []byte(`{"v":2}`)
	for _, via := range []string{"database/sql", "pgx"} {
		var err error
		if via == "pgx" {
			err = app.inTx(t, "o-"+via, false, func(tx pgx.Tx) error {
				_, err := postgres.Enqueue(ctx, app.s, tx, other)
				return err
			})
		} else {
			tx, berr := app.s.Begin(ctx)
			if berr != nil {
				t.Fatal(berr)
			}
			_, err = app.s.Outbox.Enqueue(ctx, tx, other)
			_ = tx.Rollback()
		}
		if !errors.Is(err, courier.CodeIdempotencyCollision) {
			t.Errorf("%s: another payload = %v, want CodeIdempotencyCollision", via, err)
		}
	}
	d, err := app.s.Outbox.Lookup(ctx, "n-1", "https://hooks.example/a")
	if err != nil || string(d.Payload) != `{"v":1}` {
		t.Fatalf("stored row = %q, %v; want the first payload", d.Payload, err)
	}
	if n := app.outboxRows(t); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}

	bad := p
	bad.NotificationID = "has space"
	err = app.inTx(t, "o-bad", false, func(tx pgx.Tx) error {
		_, err := postgres.Enqueue(ctx, app.s, tx, bad)
		return err
	})
	if courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("invalid notification id through pgx = %v, want invalid_argument", err)
	}
}

// TestPgxNeedsAStoreAndATx: a nil Store or tx is refused with
// invalid_argument, not a panic.
func TestPgxNeedsAStoreAndATx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://hooks.example/a", Payload: []byte(`{}`)}
	if _, err := postgres.Enqueue(ctx, nil, nil, p); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("nil Store: %v, want invalid_argument", err)
	}
	app := setupPgx(t, store.Config{})
	if _, err := postgres.Publish(ctx, app.s, nil, store.PublishParams{}); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Fatalf("nil tx: %v, want invalid_argument", err)
	}
}

// TestPgxOrderingKeyJoinsItsKey: deliveries enqueued with an ordering key
// in pgx transactions take their turns as through database/sql: the first
// heads its key, the second waits behind it.
func TestPgxOrderingKeyJoinsItsKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	app := setupPgx(t, store.Config{})
	const endpoint = "https://receiver.example/hooks"
	for _, id := range []string{"o-1", "o-2"} {
		err := app.inTx(t, id, true, func(tx pgx.Tx) error {
			_, err := postgres.Enqueue(ctx, app.s, tx, store.EnqueueParams{
				NotificationID: id, Endpoint: endpoint, Payload: []byte(`{"id":"` + id + `"}`), OrderingKey: "customer-7",
			})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]store.Hold{"o-1": "", "o-2": store.HeldByKey}
	for id, held := range want {
		d, err := app.s.Outbox.Lookup(ctx, id, endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if d.OrderingKey != "customer-7" || d.Held != held {
			t.Errorf("%s: key %q held %q; want customer-7 held %q", id, d.OrderingKey, d.Held, held)
		}
	}
}

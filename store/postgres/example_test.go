package postgres_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// On PostgreSQL the application opens its database as it always does,
// migrates courier's tables (here with Migrate; a team with its own
// migration tool runs the engine's SQL instead) and opens the Store over
// it. Size the pool for the worker's concurrency.
func Example() {
	ctx := context.Background()
	db, err := sqlx.Open(postgres.DriverName, "postgres://app@db.internal/app")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(18)
	db.SetMaxIdleConns(18)
	if err := store.Migrate(ctx, db); err != nil {
		panic(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		panic(err)
	}
	_ = s
}

// An application on pgxpool enqueues in its own pgx transaction: the
// delivery commits, or rolls back, with the order. The Store is opened
// over database/sql on the same database (pgx's stdlib driver), for the
// worker and for courier's own writes.
func ExampleEnqueue() {
	ctx := context.Background()
	const url = "postgres://app@db.internal/app"
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	db, err := sqlx.Open(postgres.DriverName, url)
	if err != nil {
		panic(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	if _, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = $1", "o-1"); err != nil {
		panic(err)
	}
	if _, err := postgres.Enqueue(ctx, s, tx, store.EnqueueParams{
		NotificationID: "order-o-1-paid",
		Endpoint:       "https://partner.example/hooks/orders",
		Payload:        []byte(`{"id":"o-1","status":"paid"}`),
	}); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil { // workers are woken now
		panic(err)
	}
}

// An application on pgxpool fans an event out in its own pgx transaction:
// one delivery per subscription of the tenant that wants the event's type
// and is not paused, committed, or rolled back, with the order. The
// subscriptions are read in that transaction, one snapshot of the
// registry. In a database/sql transaction the same is s.Outbox.Publish.
func ExamplePublish() {
	ctx := context.Background()
	const url = "postgres://app@db.internal/app"
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	db, err := sqlx.Open(postgres.DriverName, url)
	if err != nil {
		panic(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	if _, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = $1", "o-1"); err != nil {
		panic(err)
	}
	published, err := postgres.Publish(ctx, s, tx, store.PublishParams{
		Tenant:    "acme",
		EventType: "order.paid",
		EventID:   "order-o-1-paid",
		Payload:   []byte(`{"id":"o-1","status":"paid"}`),
	})
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil { // workers are woken now
		panic(err)
	}
	for _, p := range published {
		fmt.Println(p.NotificationID) // order-o-1-paid:<subscription id>
	}
}

package postgres_test

import (
	"context"

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

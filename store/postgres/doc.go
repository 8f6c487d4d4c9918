// Package postgres is courier's PostgreSQL engine, for many application
// instances sharing one database, through pgx's database/sql driver. It
// needs no cgo.
//
// Importing the package registers the engine for the driver names "pgx",
// "pgx/v5" and "postgres"; the application opens its database as it
// always does and hands it to package store:
//
//	import _ "github.com/courier-go/courier/store/postgres"
//
//	db, err := sqlx.Open("pgx", "postgres://app@db.internal/app")
//	err = store.Migrate(ctx, db) // or run the SQL of Migrations with your own tool
//	s, err := store.Open(ctx, db, store.Config{})
//
// Workers are woken by pg_notify, sent by the enqueue statement and
// delivered when the enqueuing transaction commits; they poll as a
// fallback. Claims take FOR UPDATE SKIP LOCKED, so any number of worker
// processes share one outbox.
package postgres

package postgres

import (
	"context"
	"database/sql"
	"io/fs"

	"github.com/courier-go/courier/store/internal/engine"
)

// Migrations returns courier's PostgreSQL migrations as files for a team's
// own migration tool: 001_init.sql, 002_payload_encryption.sql, …, one per
// migration, each to be applied once, in order, in a transaction of its
// own, in the schema courier's tables belong to (the first of the
// search_path; see the package documentation). Each file is complete: the
// first begins by creating courier's version table,
//
//	CREATE TABLE IF NOT EXISTS courier_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL);
//
// and each ends by recording its number there, which is what store.Open
// checks before it serves:
//
//	INSERT INTO courier_schema (version, applied_at) VALUES (3, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
//
// Applied so, they leave the tables exactly as store.Migrate does, and
// store.Migrate finds nothing left to do. store.Migrate also runs
// ANALYZE courier_endpoints, courier_contracts after it applies any:
// those tables are small and rarely written, so autovacuum may never
// analyze them, and without statistics the planner may pass over the
// claim's index; run it after your tool applies new files. A file's text never changes once
// released, so tools that checksum applied migrations accept it from
// every later courier; a new courier adds files.
func Migrations() fs.FS { return pgEngine.MustMigrationFiles() }

// MigrateTx applies courier's pending migrations inside tx, the
// caller's transaction, so an application migrates courier's tables with
// its own: they commit or roll back together. A goose Go migration
// can be
//
//	func(ctx context.Context, tx *sql.Tx) error { return postgres.MigrateTx(ctx, tx) }
//
// and a *sqlx.Tx passes its *sql.Tx: postgres.MigrateTx(ctx, tx.Tx). Running it
// again is a no-op. tx must be READ COMMITTED (PostgreSQL's default): a
// second process migrating at once waits for the first, then must see
// what it committed. Unlike store.Migrate, it neither bounds its waits for
// locks nor tries again: while it queues for courier_outbox, every
// process's enqueues and claims queue behind it, so give tx a lock_timeout
// (SET LOCAL lock_timeout = '1s') and run it again when it fails.
func MigrateTx(ctx context.Context, tx *sql.Tx) error {
	return engine.MigrateTx(ctx, tx, DriverName)
}

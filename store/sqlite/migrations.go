package sqlite

import (
	"context"
	"database/sql"
	"io/fs"

	"github.com/courier-go/courier/store/internal/engine"
)

// Migrations returns courier's SQLite migrations as files for a team's
// own migration tool: 001_init.sql, 002_payload_encryption.sql, …, one per
// migration, each to be applied once, in order, in a transaction of its
// own. Each file is complete: the first begins by creating courier's
// version table,
//
//	CREATE TABLE IF NOT EXISTS courier_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL);
//
// and each ends by recording its number there, which is what store.Open
// checks before it serves:
//
//	INSERT INTO courier_schema (version, applied_at) VALUES (3, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
//
// A migration earlier couriers must not run on records, before that, its
// number negated (13, which moves the payloads out of courier_outbox; see
// Upgrades in package store). Applied so, they leave the database exactly
// as store.Migrate does, and store.Migrate finds nothing left to do. A file's text never changes
// once released, so tools that checksum applied migrations accept it
// from every later courier; a new courier adds files.
func Migrations() fs.FS { return sqliteEngine.MustMigrationFiles() }

// MigrateTx applies courier's pending migrations inside tx, the
// caller's transaction, so an application migrates courier's tables with
// its own: they commit or roll back together. A goose Go migration of a SQLite database
// can be
//
//	func(ctx context.Context, tx *sql.Tx) error { return sqlite.MigrateTx(ctx, tx) }
//
// and a *sqlx.Tx passes its *sql.Tx: sqlite.MigrateTx(ctx, tx.Tx). Running it
// again is a no-op.
func MigrateTx(ctx context.Context, tx *sql.Tx) error {
	return engine.MigrateTx(ctx, tx, DriverName)
}

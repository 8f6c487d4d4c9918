package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
)

// Migrate brings db's courier tables to the version this courier knows,
// applying the pending numbered migrations in one transaction. Running it
// again is a no-op; running it against a newer schema is ErrSchemaTooNew.
func Migrate(ctx context.Context, db *sqlx.DB) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return wrapf(err, "migrate")
	}
	if err := MigrateTx(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return wrapf(tx.Commit(), "migrate")
}

// MigrateTx applies the pending migrations inside the caller's transaction,
// so an application can migrate courier's tables with its own.
func MigrateTx(ctx context.Context, tx *sqlx.Tx) (err error) {
	d, err := dialectOf(tx.DriverName())
	if err != nil {
		return err
	}
	if d.name == "postgres" {
		// Two processes migrating at once: the second waits for the first.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(7212345001)"); err != nil {
			return wrapf(err, "migrate")
		}
	}
	if _, err := tx.ExecContext(ctx, d.query("schema_create").text); err != nil {
		return wrapf(err, "migrate")
	}
	var have int
	if err := tx.QueryRowxContext(ctx, d.query("schema_version").text).Scan(&have); err != nil {
		return wrapf(err, "migrate")
	}
	if have > len(d.migrations) {
		return courier.ErrSchemaTooNew
	}
	defer func() {
		if d.name == "postgres" && err == nil {
			// Tables the claim filters by are small and rarely written, so
			// autovacuum may never analyze them; without statistics the
			// planner guesses them large and abandons the due index.
			_, err = tx.ExecContext(ctx, "ANALYZE courier_endpoints, courier_contracts")
			err = wrapf(err, "migrate")
		}
	}()
	for _, m := range d.migrations[have:] {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return wrapf(err, "migration %d (%s)", m.version, m.name)
		}
		rec := d.query("schema_record")
		args := rec.args(map[string]any{"version": m.version, "now": time.Now().UnixMicro()})
		if _, err := tx.ExecContext(ctx, rec.text, args...); err != nil {
			return wrapf(err, "migration %d", m.version)
		}
	}
	return nil
}

// checkSchema is the guard Open applies: the version must be this
// courier's, and the tables must have exactly the columns its migrations
// create.
func checkSchema(ctx context.Context, db *sqlx.DB, d *dialect) error {
	var have int
	if err := db.QueryRowxContext(ctx, d.query("schema_version").text).Scan(&have); err != nil {
		if isMissingTable(err) {
			return courier.ErrSchemaOutdated
		}
		return wrapf(err, "schema version")
	}
	switch {
	case have < len(d.migrations):
		return courier.ErrSchemaOutdated
	case have > len(d.migrations):
		return courier.ErrSchemaTooNew
	}
	rows, err := db.QueryxContext(ctx, d.query("schema_columns").text)
	if err != nil {
		return wrapf(err, "schema columns")
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var table, column string
		if err := rows.Scan(&table, &column); err != nil {
			return wrapf(err, "schema columns")
		}
		got = append(got, table+"."+column)
	}
	if err := rows.Err(); err != nil {
		return wrapf(err, "schema columns")
	}
	if !slices.Equal(got, expectedColumns) {
		return fmt.Errorf("store: %w", courier.ErrSchemaAltered)
	}
	return nil
}

// expectedColumns is every courier table's columns, in table and column
// order, after the latest migration. Both engines must agree.
var expectedColumns = func() []string {
	tables := []struct {
		name    string
		columns string
	}{
		{"courier_attempts", "id delivery_id attempt owner leased_at lease_expires_at finished_at duration_us outcome http_status error_code"},
		{"courier_contracts", "endpoint capabilities_sha256 pinned_at"},
		{"courier_endpoints", "endpoint state consecutive_failures failing_since open_until reason updated_at"},
		{"courier_inbox", "sender dedupe_key payload_sha256 status ack created_at updated_at"},
		{"courier_outbox", "id notification_id endpoint payload payload_sha256 profile key_id status priority attempts max_attempts next_attempt_at deadline lease_owner lease_token leased_at lease_expires_at last_error_code last_status ack_sha256 created_at updated_at payload_key_id subscription_id subscription_fingerprint contract_sha256"},
		{"courier_replay", "key_id nonce expires_at"},
		{"courier_schema", "version applied_at"},
		{"courier_subscriptions", "id tenant endpoint event_types auth_mode key_id profile fingerprint active created_at updated_at"},
	}
	var out []string
	for _, t := range tables {
		for _, c := range strings.Fields(t.columns) {
			out = append(out, t.name+"."+c)
		}
	}
	return out
}()

// isMissingTable reports whether err says the schema table does not exist.
func isMissingTable(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "no such table") || strings.Contains(msg, "does not exist")
}

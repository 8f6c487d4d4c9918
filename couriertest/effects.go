package couriertest

import (
	"context"
	"fmt"
	"time"

	"github.com/courier-go/courier/store"
)

// Effects counts, in the receiver's own database, what its application
// function did: call Record inside the function, with the transaction
// courier hands it, and the record commits or rolls back with the
// function's other effects. Count then says from the database alone
// whether a notification was processed once, never, or twice, whatever
// faults the sender met on the way. The table is couriertest_effects.
type Effects struct {
	s      *store.Store
	insert string
}

// NewEffects creates the table couriertest_effects in s's database if it
// is not there yet. Stores sharing one database may call it at once.
func NewEffects(ctx context.Context, s *store.Store) (*Effects, error) {
	insert := "INSERT INTO couriertest_effects (effect_key, recorded_at) VALUES (?, ?)"
	if s.Engine() == "postgres" {
		insert = "INSERT INTO couriertest_effects (effect_key, recorded_at) VALUES ($1, $2)"
	}
	if err := createEffects(ctx, s); err != nil {
		return nil, fmt.Errorf("couriertest: create couriertest_effects: %w", err)
	}
	return &Effects{s: s, insert: insert}, nil
}

// createEffects creates couriertest_effects if it is missing. On
// PostgreSQL, CREATE TABLE IF NOT EXISTS racing another fails on the
// catalog's unique index, so the creations of one database take turns
// under an advisory lock; SQLite's writes take turns already.
func createEffects(ctx context.Context, s *store.Store) error {
	tx, err := s.DB().BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.Engine() == "postgres" {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(hashtext('couriertest_effects'))"); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS couriertest_effects (
		effect_key TEXT NOT NULL, recorded_at BIGINT NOT NULL)`); err != nil {
		return err
	}
	return tx.Commit()
}

// Record records one effect for key inside tx, the transaction of the
// application's function.
func (e *Effects) Record(ctx context.Context, tx store.DBTX, key string) error {
	if _, err := tx.ExecContext(ctx, e.insert, key, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("couriertest: record effect: %w", err)
	}
	return nil
}

// Count returns how many committed effects key has.
func (e *Effects) Count(ctx context.Context, key string) (int, error) {
	var n int
	err := e.s.DB().GetContext(ctx, &n, e.s.DB().Rebind("SELECT COUNT(*) FROM couriertest_effects WHERE effect_key = ?"), key)
	return n, err
}

// Counts returns every key's number of committed effects.
func (e *Effects) Counts(ctx context.Context) (map[string]int, error) {
	var rows []struct {
		Key string `db:"effect_key"`
		N   int    `db:"n"`
	}
	if err := e.s.DB().SelectContext(ctx, &rows, "SELECT effect_key, COUNT(*) AS n FROM couriertest_effects GROUP BY effect_key"); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, r := range rows {
		out[r.Key] = r.N
	}
	return out, nil
}

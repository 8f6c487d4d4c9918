package testserver

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/sqlfile"
)

//go:embed sql
var sqlFiles embed.FS

// queryNames are the statements every dialect file defines.
var queryNames = []string{"create_effects", "insert_effect", "count_effects"}

// loadQueries reads sql/<engine>.sql (see package sqlfile).
func loadQueries(engine string) (map[string]string, error) {
	b, err := sqlFiles.ReadFile("sql/" + engine + ".sql")
	if err != nil {
		return nil, fmt.Errorf("testserver: no SQL for engine %q", engine)
	}
	queries, err := sqlfile.Parse(string(b))
	if err == nil {
		err = sqlfile.Require(queries, queryNames...)
	}
	if err != nil {
		return nil, fmt.Errorf("testserver: %s.sql: %w", engine, err)
	}
	return queries, nil
}

// createEffects creates the application table if it is not there yet.
func (s *Server) createEffects(ctx context.Context) error {
	if _, err := s.cfg.Store.DB().ExecContext(ctx, s.queries["create_effects"]); err != nil {
		return fmt.Errorf("testserver: create testserver_effects: %w", err)
	}
	return nil
}

// apply is the receiver's Func: it writes one effect row in the receiver's
// transaction, runs Config.Process, and marks the request's attempt as
// processed.
func (s *Server) apply(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
	if a, ok := ctx.Value(attemptKey{}).(*attemptState); ok {
		a.ran = true // the receiver runs Func on the request's goroutine
	}
	if _, err := tx.ExecContext(ctx, s.queries["insert_effect"], n.NotificationID, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("testserver: insert effect: %w", err)
	}
	if s.cfg.Process != nil {
		return s.cfg.Process(ctx, tx, n)
	}
	return nil
}

// Effects returns, per notification id, how many effect rows are committed
// in the store: the exactly-once truth, independent of Stats. An id that
// was never processed is absent.
func (s *Server) Effects(ctx context.Context) (map[string]int, error) {
	rows, err := s.cfg.Store.DB().QueryContext(ctx, s.queries["count_effects"])
	if err != nil {
		return nil, fmt.Errorf("testserver: count effects: %w", err)
	}
	defer rows.Close()
	effects := make(map[string]int)
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("testserver: count effects: %w", err)
		}
		effects[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("testserver: count effects: %w", err)
	}
	return effects, nil
}

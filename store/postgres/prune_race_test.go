package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/courier-go/courier/store"
)

// TestPruneBesideADisableKeepsTheEndpointDisabled: Outbox.Prune picks an
// old open breaker record of an endpoint with no delivery left; a Disable
// of that endpoint commits while Prune's DELETE waits for the row. The
// DELETE tested the row as its subquery had found it, so it removed the
// record Disable had just written, and the endpoint an operator disabled
// was healthy again. It tests the row as it now is.
func TestPruneBesideADisableKeepsTheEndpointDisabled(t *testing.T) {
	ctx := context.Background()
	db := openPostgres(t)
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const ep = "https://r.example/hooks"
	old := time.Now().Add(-48 * time.Hour).UnixMicro()
	// An open breaker, two days old, of an endpoint with no delivery left:
	// what Prune is meant to take.
	if _, err := db.ExecContext(ctx, `INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at)
		VALUES ($1, 'open', 5, $2, $2, 'receiver_unavailable', $2)`, ep, old); err != nil {
		t.Fatal(err)
	}

	// Another transaction holds the record's row for a moment (an
	// operator's SELECT ... FOR UPDATE; any concurrent writer of the row
	// does the same): it only orders the two calls below deterministically.
	hold, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.ExecContext(ctx, "SELECT 1 FROM courier_endpoints WHERE endpoint = $1 FOR UPDATE", ep); err != nil {
		t.Fatal(err)
	}

	waiting := func(prefix string) {
		t.Helper()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(20 * time.Second)
		for {
			var n int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, prefix+"%").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("no statement %q waits for a lock", prefix)
			}
		}
	}

	disabled := make(chan error, 1)
	go func() { disabled <- s.Endpoints.Disable(ctx, ep) }()
	waiting("INSERT INTO courier_endpoints")

	type pruned struct {
		n   int
		err error
	}
	prunedc := make(chan pruned, 1)
	go func() {
		n, err := s.Outbox.Prune(ctx, store.PruneParams{OlderThan: time.Hour})
		prunedc <- pruned{n, err}
	}()
	waiting("DELETE FROM courier_endpoints")

	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-disabled; err != nil {
		t.Fatalf("Disable: %v", err)
	}
	p := <-prunedc
	if p.err != nil {
		t.Fatalf("Prune: %v", p.err)
	}
	h, err := s.Endpoints.Get(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	if h.State != store.EndpointDisabled {
		t.Fatalf("after Disable returned nil and Prune (deleted %d) ran alongside, the endpoint is %q, want disabled: a disabled endpoint stays disabled until Enable", p.n, h.State)
	}
}

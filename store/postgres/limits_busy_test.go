package postgres_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// busyLimits opens a migrated Store on its own database, with a clock the
// test moves, and returns it with an enqueue for committed deliveries.
func busyLimits(t *testing.T, cfg store.Config) (*sqlx.DB, *store.Store, *atomic.Int64, func(endpoint, id string)) {
	t.Helper()
	ctx := t.Context()
	db := openPostgres(t)
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	cfg.Now = func() time.Time { return time.UnixMicro(now.Load()) }
	s, err := store.Open(ctx, db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	enqueue := func(endpoint, id string) {
		t.Helper()
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: endpoint, Payload: []byte(`{"a":1}`)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return db, s, &now, enqueue
}

// holdLimits begins another claimer's transaction holding endpoint's
// limits row, as a claim in progress does; the row is free again when
// the returned function runs (or the test ends).
func holdLimits(t *testing.T, db *sqlx.DB, endpoint string) (release func()) {
	t.Helper()
	holder, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Rollback() })
	if _, err := holder.ExecContext(t.Context(), "SELECT 1 FROM courier_endpoint_limits WHERE endpoint = $1 FOR UPDATE", endpoint); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := holder.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

func byEndpoint(c []protocol.Claimed) map[string]int {
	n := make(map[string]int)
	for _, d := range c {
		n[d.Endpoint]++
	}
	return n
}

// TestABusyLimitsRowLeavesOtherEndpointsClaimable: while another claimer
// holds a limited endpoint's limits row (its claim in progress), a claim
// whose first pick is all that endpoint's rows leaves them due and picks
// on past them: the other endpoints' due deliveries right behind are
// leased, not left for a later claim. The busy endpoint's rows are
// claimable once its row is free.
func TestABusyLimitsRowLeavesOtherEndpointsClaimable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s, _, enqueue := busyLimits(t, store.Config{})
	const limited, other = "https://limited.example/h", "https://other.example/h"
	if err := s.Endpoints.SetLimits(ctx, limited, store.Limits{MaxInFlight: 100}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		enqueue(limited, fmt.Sprintf("l%d", i))
	}
	for i := range 3 {
		enqueue(other, fmt.Sprintf("o%d", i))
	}
	free := holdLimits(t, db, limited)
	c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "b", Limit: 5, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n := byEndpoint(c); n[other] != 3 || n[limited] != 0 {
		t.Fatalf("claim of 5 with %s busy leased %v, want %s's 3 due deliveries and none of the busy endpoint's", limited, n, other)
	}
	free()
	c, err = protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "b", Limit: 5, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if n := byEndpoint(c); n[limited] != 5 {
		t.Fatalf("with its limits row free, a claim leased %v, want %s's 5, left due", n, limited)
	}
}

// TestAProbeTakesItsTokenUnderTheLimitsRow: a probe's token is taken
// under the endpoint's limits row, as every limited lease's: while
// another claimer holds it no probe is made (the endpoint stays open, for
// a later claim), and once it is free the probe takes a token from the
// bucket.
func TestAProbeTakesItsTokenUnderTheLimitsRow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, s, now, enqueue := busyLimits(t, store.Config{Breaker: store.BreakerConfig{Threshold: 1, Cooldown: time.Minute}})
	const ep = "https://limited.example/h"
	if err := s.Endpoints.SetLimits(ctx, ep, store.Limits{Rate: 1, Burst: 3}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		enqueue(ep, fmt.Sprintf("d%d", i))
	}
	p := protocol.For(s)
	c, err := p.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatalf("Claim = %d, %v", len(c), err)
	}
	if _, err := p.Settle(ctx, protocol.Outcome{Lease: c[0].Lease, Result: protocol.Retry, Code: courier.CodeReceiverUnavailable, HTTPStatus: 503, RetryDelay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	now.Add(time.Minute.Microseconds()) // the cool-down over, the bucket full (3)
	free := holdLimits(t, db, ep)
	c, err = p.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 5, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := s.Endpoints.Get(ctx, ep); len(c) != 0 || h.State != store.EndpointOpen {
		t.Fatalf("with its limits row held by another claimer: claim leased %d, endpoint %s; want no probe, open", len(c), h.State)
	}
	free()
	c, err = p.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 5, Lease: time.Minute})
	if err != nil || len(c) != 1 {
		t.Fatalf("with its limits row free: Claim = %d, %v; want the probe", len(c), err)
	}
	var tokens float64
	if err := db.GetContext(ctx, &tokens, "SELECT tokens FROM courier_endpoint_limits WHERE endpoint = $1", ep); err != nil {
		t.Fatal(err)
	}
	if tokens != 2 {
		t.Fatalf("after the probe the bucket holds %g tokens, want 2 (Burst 3, less the probe's)", tokens)
	}
}

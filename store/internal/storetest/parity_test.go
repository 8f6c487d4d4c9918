package storetest_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// Engine parity: the same calls give the same answers on SQLite and on
// PostgreSQL, where the engines' own types and collations differ.

// TestPriorityIsA32BitIntegerOnEveryEngine: PostgreSQL keeps a priority
// in 32 bits, SQLite in 64. A priority outside 32 bits is refused
// invalid_argument on both, rather than stored by one and failed by the
// other as a database failure (which callers retry for ever); the bounds
// themselves are kept, and claimed lowest first.
func TestPriorityIsA32BitIntegerOnEveryEngine(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ctx := t.Context()
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, p := range []int{math.MaxInt32 + 1, math.MinInt32 - 1} {
			_, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("p%d", p), Endpoint: "https://r.example/h", Payload: []byte(`{}`), Priority: p})
			if courier.CodeOf(err) != courier.CodeInvalidArgument {
				t.Errorf("Priority %d: %v, want invalid_argument", p, err)
			}
		}
		for _, p := range []int{math.MaxInt32, math.MinInt32} {
			if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("p%d", p), Endpoint: "https://r.example/h", Payload: []byte(`{}`), Priority: p}); err != nil {
				t.Fatalf("Priority %d: %v", p, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 1, Lease: time.Minute})
		if err != nil || len(claimed) != 1 || claimed[0].NotificationID != fmt.Sprintf("p%d", math.MinInt32) {
			t.Fatalf("first claim = %+v, %v; want the lowest priority's", claimed, err)
		}
	})
}

// TestLimitsRateHasAFloor: below a floor a rate's token arithmetic
// underflows, which PostgreSQL raises as an error and SQLite takes for
// zero: a claim failed on one engine and not the other, for every
// endpoint in it. Such a rate is refused on both; the floor itself works.
func TestLimitsRateHasAFloor(t *testing.T) {
	t.Parallel()
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ctx := t.Context()
		const ep = "https://r.example/h"
		for _, rate := range []float64{math.SmallestNonzeroFloat64, 9e-7} {
			if err := s.Endpoints.SetLimits(ctx, ep, store.Limits{Rate: rate}); courier.CodeOf(err) != courier.CodeInvalidArgument {
				t.Errorf("Rate %g: %v, want invalid_argument", rate, err)
			}
		}
		if err := s.Endpoints.SetLimits(ctx, ep, store.Limits{Rate: 1e-6}); err != nil {
			t.Fatal(err)
		}
		enqueue(t, s, store.EnqueueParams{NotificationID: "a", Endpoint: ep, Payload: []byte(`{}`)})
		enqueue(t, s, store.EnqueueParams{NotificationID: "b", Endpoint: ep, Payload: []byte(`{}`)})
		for want := range []int{1, 0} {
			claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
			if err != nil || len(claimed) != 1-want {
				t.Fatalf("claim %d under Rate 1e-6 (burst 1) = %d leased, %v; want %d", want+1, len(claimed), err, 1-want)
			}
		}
	})
}

// TestListingsAreInByteOrderOnEveryEngine: Endpoints.List and
// Contracts.List are by endpoint, BlockedKeys by endpoint and key, in
// byte order on SQLite; on PostgreSQL they were in the database's
// collation, which on most installations is a locale's ("_" < "a" < "B"),
// as in pgtest's databases.
func TestListingsAreInByteOrderOnEveryEngine(t *testing.T) {
	t.Parallel()
	// A path keeps its bytes (a host is lower-cased: https://B.example/h is
	// https://b.example/h).
	endpoints := []string{"https://e.example/a", "https://e.example/B", "https://e.example/_", "https://e.example/b"}
	keys := []string{"a", "B", "_x", "b"}
	wantEndpoints := slices.Sorted(slices.Values(endpoints))
	wantKeys := slices.Sorted(slices.Values(keys))
	onEveryEngine(t, func(t *testing.T, e testEngine, s *store.Store, db *sqlx.DB) {
		ctx := t.Context()
		for _, ep := range endpoints {
			if err := s.Endpoints.SetLimits(ctx, ep, store.Limits{MaxInFlight: 5}); err != nil {
				t.Fatal(err)
			}
			if err := s.Contracts.Pin(ctx, ep, strings.Repeat("ab", 32)); err != nil {
				t.Fatal(err)
			}
		}
		for i, k := range keys { // a head per key that fails for good, holding its key
			enqueue(t, s, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: endpoints[0], Payload: []byte(`{}`), OrderingKey: k, MaxAttempts: 1})
		}
		p := protocol.For(s)
		claimed, err := p.Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute, EndpointCap: 10})
		if err != nil {
			t.Fatal(err)
		}
		var outcomes []protocol.Outcome
		for _, c := range claimed {
			outcomes = append(outcomes, protocol.Outcome{Lease: c.Lease, Result: protocol.Failed, Code: courier.CodeReceiverRejected, HTTPStatus: 400})
		}
		if _, err := p.Settle(ctx, outcomes...); err != nil {
			t.Fatal(err)
		}

		var listed, pinned, blocked []string
		health, err := s.Endpoints.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range health {
			listed = append(listed, h.Endpoint)
		}
		contracts, err := s.Contracts.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range contracts {
			pinned = append(pinned, c.Endpoint)
		}
		held, err := s.Endpoints.BlockedKeys(ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range held {
			blocked = append(blocked, b.OrderingKey)
		}
		if !slices.Equal(listed, wantEndpoints) || !slices.Equal(pinned, wantEndpoints) || !slices.Equal(blocked, wantKeys) {
			t.Errorf("endpoints %q, contracts %q, blocked keys %q; want byte order %q and %q", listed, pinned, blocked, wantEndpoints, wantKeys)
		}
	})
}

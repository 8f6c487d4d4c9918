package opsjson

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/testmain"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// engines open the Stores CancelEndpoint's tests run on: over a SQLite
// file, and over a fresh database of a throwaway PostgreSQL server
// (skipped when none can be had, failed then if COURIER_PG_REQUIRE is
// set).
var engines = []struct {
	name string
	open func(t *testing.T, cfg store.Config) *store.Store
}{
	{"sqlite", func(t *testing.T, cfg store.Config) *store.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "courier.db"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"postgres", func(t *testing.T, cfg store.Config) *store.Store { return couriertest.PostgresStore(t, cfg) }},
}

const (
	gone  = "https://gone.example/hooks"
	other = "https://other.example/hooks"
)

// cancelling is what a test of CancelEndpoint needs: a Store on a
// migrated database, and the worker protocol to move its deliveries.
type cancelling struct {
	db    *sqlx.DB
	store *store.Store
	proto protocol.Outbox
}

func setup(t *testing.T, open func(*testing.T, store.Config) *store.Store) *cancelling {
	t.Helper()
	return setupWith(t, open, store.Config{})
}

func setupWith(t *testing.T, open func(*testing.T, store.Config) *store.Store, cfg store.Config) *cancelling {
	t.Helper()
	s := open(t, cfg)
	return &cancelling{db: s.DB(), store: s, proto: protocol.For(s)}
}

// enqueue enqueues notification id to url, with ordering key key ("" for
// none), and returns its delivery id.
func (c *cancelling) enqueue(t *testing.T, id, url, key string) int64 {
	t.Helper()
	e, err := c.store.Outbox.Enqueue(t.Context(), c.db, store.EnqueueParams{NotificationID: id, Endpoint: url, Payload: []byte(`{}`), OrderingKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// claim claims every due delivery.
func (c *cancelling) claim(t *testing.T) []protocol.Claimed {
	t.Helper()
	claimed, err := c.proto.Claim(t.Context(), protocol.ClaimParams{Owner: "test", Limit: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return claimed
}

// settle claims every due delivery and settles each as result.
func (c *cancelling) settle(t *testing.T, result protocol.Result) {
	t.Helper()
	for _, d := range c.claim(t) {
		oc := protocol.Outcome{Lease: d.Lease, Result: result, Code: courier.CodeReceiverRejected, HTTPStatus: 400, RetryDelay: time.Hour}
		if result == protocol.Succeeded {
			oc = protocol.Outcome{Lease: d.Lease, Result: result}
		}
		if _, err := c.proto.Settle(t.Context(), oc); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *cancelling) status(t *testing.T, id int64) courier.Status {
	t.Helper()
	d, err := c.store.Outbox.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d.Status
}

// TestCancelEndpointCancelsWhatCancelTakes: CancelEndpoint cancels the
// endpoint's pending, retrying, failed and quarantined deliveries, and
// counts them; it leaves its succeeded and leased ones, and every
// delivery of another endpoint, as they were. The failed head of an
// ordering key it cancels holds the key no more: the key's next delivery
// is claimed.
func TestCancelEndpointCancelsWhatCancelTakes(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, e.open)
			ctx := t.Context()
			// One delivery in each state, made one state at a time: each
			// settle claims only the one due then.
			ids := map[string]int64{}
			ids["succeeded"] = c.enqueue(t, "a-succeeded", gone, "")
			c.settle(t, protocol.Succeeded)
			ids["failed"] = c.enqueue(t, "a-failed", gone, "k") // the head of key k, which it holds failed
			c.settle(t, protocol.Failed)
			ids["retry_wait"] = c.enqueue(t, "a-retry", gone, "")
			c.settle(t, protocol.Retry)
			ids["quarantined"] = c.enqueue(t, "a-quarantined", gone, "")
			if _, err := c.db.ExecContext(ctx, c.db.Rebind("UPDATE courier_outbox SET payload_sha256 = ? WHERE id = ?"),
				"0000000000000000000000000000000000000000000000000000000000000000", ids["quarantined"]); err != nil {
				t.Fatal(err)
			}
			if got := c.claim(t); len(got) != 0 { // its payload no longer matches its digest
				t.Fatalf("claimed %d, want the altered delivery quarantined", len(got))
			}
			ids["leased"] = c.enqueue(t, "a-leased", gone, "")
			if got := c.claim(t); len(got) != 1 {
				t.Fatalf("claimed %d, want 1", len(got))
			}
			ids["pending"] = c.enqueue(t, "a-pending", gone, "")
			otherPending := c.enqueue(t, "b-pending", other, "")
			for state, id := range ids {
				if got := c.status(t, id); string(got) != state {
					t.Fatalf("delivery %s is %s before the cancel", state, got)
				}
			}

			n, err := CancelEndpoint(ctx, c.store, gone)
			if err != nil || n != 4 {
				t.Fatalf("CancelEndpoint = %d, %v; want 4 cancelled", n, err)
			}
			for state, id := range ids {
				want := courier.Status(state)
				if slices.Contains(cancellable, want) {
					want = courier.StatusSuppressed
				}
				d, err := c.store.Outbox.Get(ctx, id)
				if err != nil || d.Status != want || want == courier.StatusSuppressed && d.LastErrorCode != courier.CodeCancelled {
					t.Errorf("delivery %s after the cancel: %s %s, %v; want %s", state, d.Status, d.LastErrorCode, err, want)
				}
			}
			if got := c.status(t, otherPending); got != courier.StatusPending {
				t.Errorf("another endpoint's delivery after the cancel: %s, want pending", got)
			}
			next := c.enqueue(t, "a-next", gone, "k")
			var claimed []int64
			for _, d := range c.claim(t) {
				claimed = append(claimed, d.DeliveryID)
			}
			if !slices.Contains(claimed, next) {
				t.Errorf("claimed %v after the cancel, want key k's next delivery %d: its failed head was cancelled", claimed, next)
			}
			if n, err := CancelEndpoint(ctx, c.store, gone); err != nil || n != 0 {
				t.Errorf("CancelEndpoint again = %d, %v; want 0 (the one leased, a-next now among them, is not taken)", n, err)
			}
		})
	}
}

// TestCancelEndpointPages: an endpoint with more deliveries than a page
// of List holds has every one cancelled, and counted.
func TestCancelEndpointPages(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			c := setup(t, e.open)
			ctx := t.Context()
			const many = cancelPage + 3
			tx, err := c.store.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range many {
				p := store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: gone, Payload: []byte(`{}`)}
				if _, err := c.store.Outbox.Enqueue(ctx, tx, p); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if n, err := CancelEndpoint(ctx, c.store, gone); err != nil || n != many {
				t.Fatalf("CancelEndpoint = %d, %v; want %d", n, err, many)
			}
			page, err := c.store.Outbox.List(ctx, store.ListParams{Endpoint: gone, Status: courier.StatusPending, Limit: 1})
			if err != nil || len(page.Deliveries) != 0 {
				t.Fatalf("pending after the cancel: %d, %v; want none", len(page.Deliveries), err)
			}
		})
	}
}

// TestCancelEndpointEndedKeepsWhatItCancelled: a CancelEndpoint whose
// context ends part-way returns the error with how many it cancelled
// before, and those, no others, stay cancelled.
func TestCancelEndpointEndedKeepsWhatItCancelled(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var (
				mu    sync.Mutex
				calls int
				at    = -1 // the store's reads of the clock after which ctx ends; -1 for never
			)
			c := setupWith(t, e.open, store.Config{Now: func() time.Time {
				mu.Lock()
				defer mu.Unlock()
				if calls++; calls == at {
					cancel()
				}
				return time.Now()
			}})
			const total = 6
			for i := range total {
				c.enqueue(t, fmt.Sprintf("n-%d", i), gone, "")
			}
			mu.Lock()
			at = calls + 2 // in the cancel of the second delivery or before
			mu.Unlock()
			n, err := CancelEndpoint(ctx, c.store, gone)
			if err == nil || n >= total {
				t.Fatalf("CancelEndpoint with its context ended = %d, %v; want an error before all %d", n, err, total)
			}
			page, err := c.store.Outbox.List(t.Context(), store.ListParams{Endpoint: gone, Status: courier.StatusSuppressed, Limit: 100})
			if err != nil || len(page.Deliveries) != n {
				t.Fatalf("%d deliveries cancelled (%v), want the %d CancelEndpoint counted", len(page.Deliveries), err, n)
			}
		})
	}
}

// TestCancelEndpointRefusesNoEndpoint: an empty URL would be every
// endpoint's deliveries to List; CancelEndpoint refuses it and cancels
// nothing.
func TestCancelEndpointRefusesNoEndpoint(t *testing.T) {
	t.Parallel()
	c := setup(t, engines[0].open)
	id := c.enqueue(t, "n", gone, "")
	if n, err := CancelEndpoint(t.Context(), c.store, ""); n != 0 || !errors.Is(err, courier.CodeInvalidArgument) {
		t.Fatalf("CancelEndpoint of \"\" = %d, %v; want invalid_argument", n, err)
	}
	if got := c.status(t, id); got != courier.StatusPending {
		t.Fatalf("the delivery after the refusal: %s, want pending", got)
	}
}

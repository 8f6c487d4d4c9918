// Package storetest is the store conformance suite: every engine runs the
// very same tests through Run, so a guarantee shown on one engine is shown
// on all.
//
//	func TestSQLite(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) *sqlx.DB { … a fresh, empty database … })
//	}
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
)

// OpenFunc returns a fresh, empty database for one test, closed by the
// test's cleanup.
type OpenFunc func(t *testing.T) *sqlx.DB

// Run runs the conformance suite against the engine open returns.
func Run(t *testing.T, open OpenFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open OpenFunc)
	}{
		{"Schema", testSchema},
		{"EnqueueCommitAndRollback", testEnqueueCommitAndRollback},
		{"EnqueueIdempotent", testEnqueueIdempotent},
		{"EnqueueInvalid", testEnqueueInvalid},
		{"StaleLeaseCannotSettle", testStaleLease},
		{"ParallelClaimers", testParallelClaimers},
		{"Quarantine", testQuarantine},
		{"RetryBackoff", testRetryBackoff},
		{"RetryBudgetAndHorizon", testRetryBudgetAndHorizon},
		{"ClaimOrder", testClaimOrder},
		{"AttemptsLog", testAttemptsLog},
		{"Health", testHealth},
		{"CheckConstraints", testCheckConstraints},
		{"Inbox", testInbox},
		{"InboxConcurrentDuplicates", testInboxConcurrent},
		{"InboxPrune", testInboxPrune},
		{"InboxClaim", testInboxClaim},
		{"ReplayCache", testReplayCache},
		{"Wakeups", testWakeups},
		{"Encryption", testEncryption},
		{"Publish", testPublish},
		{"Suppression", testSuppression},
		{"Breaker", testBreaker},
		{"BreakerDisablesLongFailures", testBreakerDisablesLongFailures},
		{"SettleBatch", testSettleBatch},
		{"Release", testRelease},
		{"Commands", testCommands},
		{"Admin", testAdmin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open)
		})
	}
}

// Clock is a settable clock for store.Config.Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock standing at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// bundle is what most tests need.
type bundle struct {
	db    *sqlx.DB
	store *store.Store
	clock *Clock
	ctx   context.Context
}

// setup migrates a fresh database and opens a Store over it with a
// settable clock and a backoff without jitter.
func setup(t *testing.T, open OpenFunc, cfg store.Config) *bundle {
	t.Helper()
	db := open(t)
	ctx := t.Context()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	clock := NewClock()
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	if cfg.Backoff == nil {
		cfg.Backoff = store.ExponentialBackoff{Base: time.Second, Cap: time.Minute}
	}
	s, err := store.Open(ctx, db, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &bundle{db: db, store: s, clock: clock, ctx: ctx}
}

// enqueue enqueues p in a committed transaction of its own.
func (b *bundle) enqueue(t *testing.T, p store.EnqueueParams) store.Enqueued {
	t.Helper()
	tx := b.begin(t)
	e, err := b.store.Outbox.Enqueue(b.ctx, tx, p)
	if err != nil {
		tx.Rollback()
		t.Fatalf("Enqueue: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return e
}

func (b *bundle) begin(t *testing.T) *sqlx.Tx {
	t.Helper()
	tx, err := b.db.BeginTxx(b.ctx, nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	return tx
}

func (b *bundle) claim(t *testing.T, owner string, limit int, lease time.Duration) []store.Claimed {
	t.Helper()
	c, err := b.store.Outbox.Claim(b.ctx, store.ClaimParams{Owner: owner, Limit: limit, Lease: lease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

func (b *bundle) get(t *testing.T, id int64) store.Delivery {
	t.Helper()
	d, err := b.store.Outbox.Get(b.ctx, id)
	if err != nil {
		t.Fatalf("Get(%d): %v", id, err)
	}
	return d
}

// delivery returns enqueue parameters for a small JSON notification.
func delivery(id string) store.EnqueueParams {
	return store.EnqueueParams{
		NotificationID: id,
		Endpoint:       "https://receiver.example/hooks",
		Payload:        []byte(`{"notification_id":"` + id + `"}`),
	}
}

package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// clockSetup is a migrated PostgreSQL database with one delivery enqueued.
type clockSetup struct {
	db  *sqlx.DB
	ctx context.Context
}

func setupClock(t *testing.T) clockSetup {
	t.Helper()
	db, err := sqlx.Open(postgres.DriverName, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return clockSetup{db: db, ctx: ctx}
}

// skewed is a process clock off by an offset that can change.
type skewed struct{ offset atomic.Int64 }

func newSkewed(d time.Duration) *skewed {
	s := &skewed{}
	s.offset.Store(int64(d))
	return s
}

func (s *skewed) Now() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) }

func (c clockSetup) open(t *testing.T, cfg store.Config, local func() time.Time) *store.Store {
	t.Helper()
	s, err := store.OpenWithProcessClock(c.ctx, c.db, cfg, local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (c clockSetup) enqueue(t *testing.T, s *store.Store, id string) {
	t.Helper()
	tx, err := s.Begin(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Enqueue(c.ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// dbNow reads the server's clock.
func (c clockSetup) dbNow(t *testing.T) time.Time {
	t.Helper()
	var us int64
	if err := c.db.GetContext(c.ctx, &us, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint"); err != nil {
		t.Fatal(err)
	}
	return time.UnixMicro(us)
}

func (c clockSetup) claim(t *testing.T, s *store.Store, owner string) []protocol.Claimed {
	t.Helper()
	claimed, err := protocol.For(s).Claim(c.ctx, protocol.ClaimParams{Owner: owner, Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return claimed
}

// stampedOnTheDatabasesClock fails t unless a claim's lease was stamped
// with the database's time: between the server's readings before and
// after it, give or take the store's stated error bound and a
// microsecond's rounding.
func stampedOnTheDatabasesClock(t *testing.T, c protocol.Claimed, before, after time.Time, bound time.Duration) {
	t.Helper()
	slack := bound + time.Microsecond
	if c.LeasedAt.Before(before.Add(-slack)) || c.LeasedAt.After(after.Add(slack)) {
		t.Fatalf("lease stamped %s, the database's clock read %s..%s (bound %s): off by %s",
			c.LeasedAt.Format(time.RFC3339Nano), before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano), bound, c.LeasedAt.Sub(before))
	}
	if got := c.ExpiresAt.Sub(c.LeasedAt); got != time.Minute {
		t.Fatalf("lease of %s, want a minute", got)
	}
}

// TestSkewedProcessClocksShareTheDatabasesClock shows the finding "leases
// are stamped with each process's clock (2 min of skew let two workers send
// the same delivery)" fixed on PostgreSQL: two processes whose clocks are
// two minutes behind and two minutes ahead stamp leases with the
// database's time, so the one ahead does not take the lease the one behind
// holds as expired and send the delivery again. A clock set in Config.Now
// is still taken as it is: there the same skew lets the second worker in.
func TestSkewedProcessClocksShareTheDatabasesClock(t *testing.T) {
	t.Parallel()

	t.Run("DatabaseClock", func(t *testing.T) {
		t.Parallel()
		c := setupClock(t)
		behind := c.open(t, store.Config{}, newSkewed(-2*time.Minute).Now)
		ahead := c.open(t, store.Config{}, newSkewed(2*time.Minute).Now)
		c.enqueue(t, ahead, "n-1")

		before := c.dbNow(t)
		first := c.claim(t, behind, "behind")
		after := c.dbNow(t)
		if len(first) != 1 {
			t.Fatalf("the worker behind claimed %d deliveries, want 1", len(first))
		}
		stampedOnTheDatabasesClock(t, first[0], before, after, store.ClockBound(behind))
		if again := c.claim(t, ahead, "ahead"); len(again) != 0 {
			t.Fatalf("the worker ahead claimed delivery %d again while the worker behind holds its lease", again[0].DeliveryID)
		}
	})

	t.Run("ConfigNowAsGiven", func(t *testing.T) {
		t.Parallel()
		c := setupClock(t)
		behind := c.open(t, store.Config{Now: newSkewed(-2 * time.Minute).Now}, time.Now)
		ahead := c.open(t, store.Config{Now: newSkewed(2 * time.Minute).Now}, time.Now)
		c.enqueue(t, behind, "n-1")
		if first := c.claim(t, behind, "behind"); len(first) != 1 {
			t.Fatalf("the worker behind claimed %d deliveries, want 1", len(first))
		}
		if again := c.claim(t, ahead, "ahead"); len(again) != 1 {
			t.Fatalf("with clocks set in Config.Now, the worker ahead claimed %d deliveries, want the one behind's (its lease looks expired)", len(again))
		}
	})
}

// TestTheDatabasesClockIsReadAgain: the store reads the server's clock
// again once its reading is a minute old, so what its process's clock
// gains meanwhile does not reach the leases it stamps.
func TestTheDatabasesClockIsReadAgain(t *testing.T) {
	t.Parallel()
	c := setupClock(t)
	local := newSkewed(0)
	s := c.open(t, store.Config{}, local.Now)
	c.enqueue(t, s, "n-1")

	local.offset.Store(int64(2 * time.Minute)) // the process's clock runs two minutes on
	before := c.dbNow(t)
	claimed := c.claim(t, s, "w")
	after := c.dbNow(t)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d deliveries, want 1", len(claimed))
	}
	stampedOnTheDatabasesClock(t, claimed[0], before, after, store.ClockBound(s))
}

// TestAClockThatWentBackIsReadAgain: a process clock that reads less than
// at the Store's latest reading of the database's clock (the monotonic
// clock of a host that was suspended lags the wall clock and the server's
// by the pause) has the Store read the database's clock again at its next
// claim, rather than stamp leases behind it, which another process would
// take for expired, for up to a minute.
func TestAClockThatWentBackIsReadAgain(t *testing.T) {
	t.Parallel()
	c := setupClock(t)
	local := newSkewed(0)
	resumed := c.open(t, store.Config{}, local.Now)
	other := c.open(t, store.Config{}, time.Now)
	c.enqueue(t, other, "n-1")

	local.offset.Store(int64(-time.Hour))
	before := c.dbNow(t)
	claimed := c.claim(t, resumed, "resumed")
	after := c.dbNow(t)
	if len(claimed) != 1 {
		t.Fatalf("claimed %d, want the one delivery", len(claimed))
	}
	if l := claimed[0].LeasedAt; l.Before(before.Add(-time.Second)) || l.After(after.Add(time.Second)) {
		t.Fatalf("lease stamped %s, the database's clock read %s..%s: off by %s", l.UTC(), before.UTC(), after.UTC(), l.Sub(before))
	}
	if again := c.claim(t, other, "other"); len(again) != 0 {
		t.Fatalf("another process claimed delivery %d again while its lease holds", again[0].DeliveryID)
	}
}

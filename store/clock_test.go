package store_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/testmain"
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

// TestTransactionsBegunOnTheStoreReadTheClockAgain: a process that makes
// no claim and no settle (a receiver, a web tier that only enqueues) still
// begins its transactions on the Store (Begin: the receivers, the
// middleware, the README's enqueue), and they read the database's clock
// again once its reading is old or the process's clock went back (a
// suspended host, whose monotonic clock lags by the pause), as a claim
// does. Before, only the worker's transactions did: such a process
// stamped its records as far behind as the host's pause for as long as
// it ran, and the cron's Inbox.Prune, keeping records a day, deleted a
// record made a moment ago after a pause of two, so that a redelivery
// would run the handler again.
func TestTransactionsBegunOnTheStoreReadTheClockAgain(t *testing.T) {
	t.Parallel()
	c := setupClock(t)
	local := newSkewed(0)
	receiver := c.open(t, store.Config{}, local.Now)
	cron := c.open(t, store.Config{}, time.Now)
	local.offset.Store(int64(-48 * time.Hour)) // the host was suspended for two days

	inbox := protocol.InboxFor(receiver)
	key := protocol.InboxKey{Sender: "orders", Key: "n-1", PayloadSHA256: strings.Repeat("ab", 32)}
	record := func() protocol.Receipt {
		t.Helper()
		tx, err := receiver.Begin(c.ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		r, err := inbox.RecordCompleted(c.ctx, tx, key, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := record(); !r.Fresh {
		t.Fatalf("first receipt %+v, want fresh", r)
	}
	before := c.dbNow(t)
	c.enqueue(t, receiver, "n-1")
	after := c.dbNow(t)

	if n, err := cron.Inbox.Prune(c.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || n != 0 {
		t.Fatalf("Inbox.Prune keeping a day deleted %d records made a moment ago (%v)", n, err)
	}
	if r := record(); r.Fresh {
		t.Fatal("the redelivery was recorded fresh: the handler would run again")
	}
	d, err := receiver.Outbox.Lookup(c.ctx, "n-1", "https://receiver.example/hooks")
	if err != nil {
		t.Fatal(err)
	}
	slack := store.ClockBound(receiver) + time.Microsecond
	if d.CreatedAt.Before(before.Add(-slack)) || d.CreatedAt.After(after.Add(slack)) {
		t.Fatalf("delivery stamped %s, the database's clock read %s..%s: off by %s", d.CreatedAt.UTC(), before.UTC(), after.UTC(), d.CreatedAt.Sub(before))
	}
}

// TestAClockThatWentBackIsReadAgainAfterAFailedReading: the first
// transaction after a suspended host resumes may fail to read the
// database's clock (its request was cancelled, its connection did not
// survive the pause). The next one reads it again. Before, the failed
// reading counted as the minute's: for a minute every claim stamped its
// leases an hour behind, which every other process took for expired and
// claimed again at once, sending the delivery twice.
func TestAClockThatWentBackIsReadAgainAfterAFailedReading(t *testing.T) {
	t.Parallel()
	c := setupClock(t)
	resumed, other := c.resumedAnHourBehind(t)
	cancelled, cancel := context.WithCancel(c.ctx)
	cancel()
	if _, err := protocol.For(resumed).Claim(cancelled, protocol.ClaimParams{Owner: "resumed", Limit: 10, Lease: time.Minute}); err == nil {
		t.Fatal("a claim with a cancelled context succeeded")
	}
	c.claimedOnceOnTheDatabasesClock(t, resumed, other)
}

// TestAClockThatWentBackIsNotUsedWhileReadAgain: after a suspended host
// resumes, the transactions that begin while one of them reads the
// database's clock again wait for that reading rather than stamp with the
// one an hour behind. Before, they went ahead: a claim beside a settle
// stamped leases that another process claimed again at once.
func TestAClockThatWentBackIsNotUsedWhileReadAgain(t *testing.T) {
	t.Parallel()
	c := setupClock(t)
	resumed, other := c.resumedAnHourBehind(t)
	waiting := make(chan struct{}, 1)
	release := store.HoldClock(resumed, func() { // a settle's reading under way
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.claimedOnceOnTheDatabasesClock(t, resumed, other)
	}()
	select {
	case <-done: // it did not wait
	case <-waiting:
	}
	release()
	<-done
}

// resumedAnHourBehind opens two Stores on the database, one of them on a
// host whose clock then goes an hour back (a suspended host resuming, its
// monotonic clock behind by the pause), after one overdue delivery, n-1,
// is enqueued: it returns that one and the other.
func (c clockSetup) resumedAnHourBehind(t *testing.T) (resumed, other *store.Store) {
	t.Helper()
	local := newSkewed(0)
	resumed = c.open(t, store.Config{}, local.Now)
	other = c.open(t, store.Config{}, time.Now)
	c.enqueueOverdue(t, "n-1")
	local.offset.Store(int64(-time.Hour))
	return resumed, other
}

// claimedOnceOnTheDatabasesClock fails t unless a claim by s leases the
// one delivery on the database's clock, and other then claims nothing.
func (c clockSetup) claimedOnceOnTheDatabasesClock(t *testing.T, s, other *store.Store) {
	t.Helper()
	before := c.dbNow(t)
	claimed, err := protocol.For(s).Claim(c.ctx, protocol.ClaimParams{Owner: "resumed", Limit: 10, Lease: time.Minute})
	after := c.dbNow(t)
	if err != nil {
		t.Error(err)
		return
	}
	if len(claimed) != 1 {
		t.Errorf("claimed %d, want the one delivery", len(claimed))
		return
	}
	if l := claimed[0].LeasedAt; l.Before(before.Add(-time.Second)) || l.After(after.Add(time.Second)) {
		t.Errorf("lease stamped %s, the database's clock read %s..%s: off by %s", l.UTC(), before.UTC(), after.UTC(), l.Sub(before))
	}
	again, err := protocol.For(other).Claim(c.ctx, protocol.ClaimParams{Owner: "other", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Error(err)
		return
	}
	if len(again) != 0 {
		t.Errorf("another process claimed delivery %d again while its lease holds", again[0].DeliveryID)
	}
}

// enqueueOverdue enqueues a delivery due two hours ago: one a backlog
// held, due for processes whose clocks are up to that much behind.
func (c clockSetup) enqueueOverdue(t *testing.T, id string) {
	t.Helper()
	c.enqueue(t, c.open(t, store.Config{Now: newSkewed(-2 * time.Hour).Now}, time.Now), id)
}

// TestABeginWaitingForTheClockEndsWithItsContext: a transaction that
// waits for another's reading of the database's clock (the process's
// clock went back) stops waiting when its context ends, with the
// context's error and no transaction, and leaves the reading's turn as it
// found it: once that reading ends, the next transaction reads the clock
// itself and begins.
func TestABeginWaitingForTheClockEndsWithItsContext(t *testing.T) {
	t.Parallel()
	c := setupClock(t)
	local := newSkewed(0)
	s := c.open(t, store.Config{}, local.Now)
	local.offset.Store(int64(-time.Hour))

	ctx, cancel := context.WithCancel(c.ctx)
	release := store.HoldClock(s, cancel) // the Begin below waits: its context ends
	tx, err := s.Begin(ctx)
	if err == nil {
		tx.Rollback()
		t.Fatal("Begin waiting for the clock's reading began a transaction once its context ended")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Begin waiting for the clock's reading, its context cancelled: %v; want context.Canceled", err)
	}
	release()

	before := c.dbNow(t)
	tx, err = s.Begin(c.ctx)
	if err != nil {
		t.Fatalf("Begin after the wait ended: %v", err)
	}
	defer tx.Rollback()
	if now := store.NowOf(s); now.Before(before.Add(-time.Second)) {
		t.Fatalf("the Store's clock reads %s after the wait, the database's %s: its reading was not taken again", now.UTC(), before.UTC())
	}
}

package store

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
)

// clockRefresh is how often a Store reads the database's clock again.
const clockRefresh = time.Minute

// clockSamples is how many readings a measurement takes; the one with the
// shortest round trip is kept.
const clockSamples = 3

// dbClock is the database's clock as this process keeps it: one reading
// of the server's time, anchored to this process's monotonic clock at the
// middle of the round trip, so that a step or skew of the process's wall
// clock does not move it. Its error is at most half that round trip plus
// the drift of the two clocks' rates since, which a new reading every
// clockRefresh bounds.
type dbClock struct {
	read   func(ctx context.Context, db *sqlx.DB) (time.Time, error) // the engine's
	db     *sqlx.DB
	local  func() time.Time // this process's clock
	anchor atomic.Pointer[clockAnchor]

	// turn is held by the one measurement at a time: a channel rather
	// than a mutex, so that a wait for it ends with the waiter's context.
	turn  chan struct{}
	tried time.Time // local time of the latest measurement, holding turn

	waiting func() // tests: called by a refresh about to wait for turn
}

// clockAnchor pairs a reading of the database's clock with the local time
// it was taken at.
type clockAnchor struct {
	db    time.Time
	local time.Time
	rtt   time.Duration // the reading's round trip: twice its error bound
}

// newDBClock measures the database's clock once: a store whose clock
// cannot be read does not open.
func newDBClock(ctx context.Context, db *sqlx.DB, read func(context.Context, *sqlx.DB) (time.Time, error), local func() time.Time) (*dbClock, error) {
	c := &dbClock{read: read, db: db, local: local, turn: make(chan struct{}, 1)}
	if err := c.measure(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// now is the database's time now.
func (c *dbClock) now() time.Time {
	a := c.anchor.Load()
	return a.db.Add(c.local().Sub(a.local))
}

// refresh measures the database's clock again when the latest measurement
// is clockRefresh old, unless another goroutine is at it. A failure keeps
// the anchor there is: it errs by the rate drift alone.
//
// The age is that of the monotonic clock the anchor is kept on, and of the
// wall clock too: the monotonic one does not count a host's suspend (or a
// paused VM), after which it lags the database's by the whole pause, and
// would take another clockRefresh of its own to notice. So the anchor is
// off (jumped) when the two clocks' ages of it disagree by more than
// clockJump (a suspend, or a step of the wall clock), or the age is
// negative. An anchor that is off is measured again at every refresh
// until a measurement succeeds, and a refresh that finds another
// goroutine at it waits for that measurement (or for ctx to end): the
// anchor it would go ahead with is off by the whole pause, not by a
// drift.
func (c *dbClock) refresh(ctx context.Context) {
	select {
	case c.turn <- struct{}{}:
	default:
		if !c.jumped(c.anchor.Load(), c.local()) {
			return
		}
		if c.waiting != nil {
			c.waiting()
		}
		select {
		case c.turn <- struct{}{}:
		case <-ctx.Done():
			return // the caller's transaction ends with ctx
		}
	}
	defer func() { <-c.turn }()
	now := c.local()
	if age := now.Sub(c.tried); age >= 0 && age < clockRefresh && !c.jumped(c.anchor.Load(), now) {
		return
	}
	_ = c.measure(ctx)
}

// jumped reports whether a, read at now, is off by more than the rates'
// drift: this process's monotonic and wall clocks disagree by more than
// clockJump on how long ago it was taken, or say it was taken later than
// now.
func (c *dbClock) jumped(a *clockAnchor, now time.Time) bool {
	age := now.Sub(a.local)
	wall := now.Round(0).Sub(a.local.Round(0))
	return age < 0 || wall < 0 || (wall-age).Abs() > clockJump
}

// clockJump is how far the monotonic and wall clocks' ages of the anchor
// may disagree before it is measured again.
const clockJump = time.Second

// measure takes clockSamples readings and anchors the one with the
// shortest round trip. The caller holds turn, or is newDBClock.
func (c *dbClock) measure(ctx context.Context) error {
	c.tried = c.local()
	var best *clockAnchor
	for range clockSamples {
		before := c.local()
		db, err := c.read(ctx, c.db)
		if err != nil {
			return wrapf(err, "read the database's clock")
		}
		rtt := c.local().Sub(before)
		if best == nil || rtt < best.rtt {
			best = &clockAnchor{db: db, local: before.Add(rtt / 2), rtt: rtt}
		}
	}
	c.anchor.Store(best)
	return nil
}

package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
)

// OpenWithProcessClock is Open in a process whose own clock is local:
// tests skew it.
func OpenWithProcessClock(ctx context.Context, db *sqlx.DB, cfg Config, local func() time.Time) (*Store, error) {
	return open(ctx, db, cfg, local)
}

// ClockBound is how far the store's reading of the database's clock may
// be off: half the round trip of its latest measurement; 0 without one.
func ClockBound(s *Store) time.Duration {
	if s.clock == nil {
		return 0
	}
	return s.clock.anchor.Load().rtt / 2
}

// ConfigOf is the Config s was opened with, its defaults applied.
func ConfigOf(s *Store) Config { return s.cfg }

// HoldClock holds s's reading of the database's clock as a measurement
// under way in another goroutine would, and has waiting called by each
// transaction that then waits for it, until release.
func HoldClock(s *Store, waiting func()) (release func()) {
	s.clock.turn <- struct{}{}
	s.clock.waiting = waiting
	return func() { <-s.clock.turn }
}

// NowOf reads s's clock (Config.Now, or its reading of the database's).
func NowOf(s *Store) time.Time { return time.UnixMicro(s.now()) }

// SetClaimCommitWindow has each inbox claim of s whose context ends while
// it commits call window as the window its COMMIT runs on in begins, and
// give the COMMIT up once the channel window returned is ready (never,
// for nil), in place of claimCommitWindow's timer. Set it before s claims.
func SetClaimCommitWindow(s *Store, window func() <-chan time.Time) { s.Inbox.commitWindow = window }

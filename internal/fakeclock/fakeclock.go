// Package fakeclock is a clock tests set by hand, for the Now fields of
// courier's configs.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a settable clock. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock standing at a fixed instant.
func New() *Clock {
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

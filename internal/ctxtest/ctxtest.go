// Package ctxtest gives tests a context whose deadline passes at the step
// the test chooses, not at a time: a test of what a deadline does to a
// request in flight then holds however loaded the machine is, and waits
// for nothing.
package ctxtest

import (
	"context"
	"sync"
	"time"
)

// WithDeadline returns a context with parent's values and a deadline an
// hour away, which passes when pass is called: Done is closed and Err is
// context.DeadlineExceeded, as they are when a context.WithTimeout's time
// has come, and so is context.Cause. parent's own cancellation does not
// reach it.
func WithDeadline(parent context.Context) (ctx context.Context, pass func()) {
	c := &deadline{Context: context.WithoutCancel(parent), at: time.Now().Add(time.Hour), done: make(chan struct{})}
	return c, func() { c.once.Do(func() { close(c.done) }) }
}

// deadline is what WithDeadline returns. Its embedded context is one
// context.WithoutCancel made, which tells context.Cause it has no cause
// of its own: Cause is then Err.
type deadline struct {
	context.Context
	at   time.Time
	done chan struct{}
	once sync.Once
}

func (c *deadline) Deadline() (time.Time, bool) { return c.at, true }

func (c *deadline) Done() <-chan struct{} { return c.done }

func (c *deadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

package store

import (
	"math/rand/v2"
	"time"
)

// Backoff decides how long a delivery waits before its next attempt.
type Backoff interface {
	// Delay returns the wait after the attempt-th attempt (1-based) failed.
	// retryAfter is the receiver's Retry-After, zero when it sent none.
	Delay(attempt int, retryAfter time.Duration) time.Duration
}

// ExponentialBackoff doubles the delay from Base with each attempt, up to
// Cap, and takes up to Jitter (a fraction, 0..1) of it off at random so that
// deliveries failed together do not retry together. A receiver's
// Retry-After is honoured, clamped to [Base, Cap].
type ExponentialBackoff struct {
	Base   time.Duration
	Cap    time.Duration
	Jitter float64
}

// Delay implements Backoff.
func (b ExponentialBackoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(max(retryAfter, b.Base), b.Cap)
	}
	d := b.Base
	for i := 1; i < attempt && d < b.Cap; i++ {
		d *= 2
	}
	d = min(d, b.Cap)
	if b.Jitter > 0 {
		d -= time.Duration(rand.Float64() * b.Jitter * float64(d))
	}
	return max(d, 0)
}

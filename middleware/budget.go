package middleware

import "sync/atomic"

// Budget is a number of bytes that request bodies may hold in buffers at
// once, across every request and handler that shares it. A request reserves
// what it will buffer before it reads a byte and gives it back when it is
// done; a reservation that does not fit is refused at once. A Budget never
// makes a request wait for room, so it never builds a queue: a server over
// its Budget answers 503 server_busy and the sender retries later.
//
// Make one with [NewBudget] and put it in [BodyLimits]; it is safe for
// concurrent use. The zero Budget has no room at all.
type Budget struct {
	size int64
	used atomic.Int64
}

// NewBudget returns a Budget of the given number of bytes. It panics if
// bytes <= 0.
func NewBudget(bytes int64) *Budget {
	if bytes <= 0 {
		panic("middleware: NewBudget bytes must be greater than zero")
	}
	return &Budget{size: bytes}
}

// Reserve takes n bytes from b if they are free and reports whether it did.
// It never waits. Reserve(0) always succeeds; it panics if n < 0.
func (b *Budget) Reserve(n int64) bool {
	if n < 0 {
		panic("middleware: Budget.Reserve of a negative size")
	}
	for {
		used := b.used.Load()
		if n > b.size-used {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release gives back n bytes taken by Reserve. It panics, giving back
// nothing, if that would give back more than is reserved: a Budget that
// drifts would bound nothing.
func (b *Budget) Release(n int64) {
	for {
		used := b.used.Load()
		if n < 0 || n > used {
			panic("middleware: Budget.Release of more than was reserved")
		}
		if b.used.CompareAndSwap(used, used-n) {
			return
		}
	}
}

// InUse returns the bytes reserved now.
func (b *Budget) InUse() int64 { return b.used.Load() }

// Size returns the bytes b holds in all.
func (b *Budget) Size() int64 { return b.size }

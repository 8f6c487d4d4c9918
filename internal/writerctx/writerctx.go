// Package writerctx marks a context whose request already holds the
// store's writer. On SQLite there is one writer at a time: a courier
// receiver runs the application's function inside the transaction that
// records the notification, and that transaction holds the writer until
// it ends. A write through the Store's DB() from inside the function (a
// second transaction) would wait for the busy timeout and then fail; the
// SQLite engine reads the mark and fails such a write at once instead.
//
// Package handler sets the mark on the context it passes to the
// application's function; store/sqlite reads it. The mark says only that
// the writer is held, not by which transaction: statements run on that
// transaction itself carry the same context and must not be refused.
package writerctx

import "context"

// heldKey is the context key of the mark.
type heldKey struct{}

// WithHeld returns ctx marked: its request holds the store's writer.
func WithHeld(ctx context.Context) context.Context {
	return context.WithValue(ctx, heldKey{}, true)
}

// Held reports whether ctx, or a context derived from it, was marked by
// WithHeld.
func Held(ctx context.Context) bool {
	held, _ := ctx.Value(heldKey{}).(bool)
	return held
}

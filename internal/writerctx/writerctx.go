// Package writerctx marks a context whose request holds the database's one
// writer: a receiver runs the application's function inside a transaction
// on the connection courier writes through, and marks the context it
// passes, so that the SQLite engine can refuse a write through another
// connection (which would wait for that very transaction) at once, with an
// error that says to write through the transaction instead.
package writerctx

import "context"

// heldKey is the context key of the mark.
type heldKey struct{}

// WithHeld returns a copy of ctx marked as running while its request holds
// the writer.
func WithHeld(ctx context.Context) context.Context {
	return context.WithValue(ctx, heldKey{}, true)
}

// Held reports whether ctx was marked by WithHeld.
func Held(ctx context.Context) bool {
	held, _ := ctx.Value(heldKey{}).(bool)
	return held
}

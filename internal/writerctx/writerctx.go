// Package writerctx marks a context whose request already holds the
// store's writer. On SQLite there is one writer at a time: a courier
// receiver runs the application's function inside the transaction that
// records the notification, and that transaction holds the writer until
// it ends. A write through the Store's DB() from inside the function (a
// second transaction) would wait for the busy timeout and then fail, and
// a Store method that writes, or Store.Begin, would wait for the Store's
// one writer connection until the context ends; each fails at once with
// ErrWriteOutside instead.
//
// Package handler sets the mark on the context it passes to the
// application's function, and middleware.Transaction on the context it
// passes to the next handler; store and store/sqlite read it. The mark
// says only that the writer is held, not by which transaction: statements
// run on that transaction itself carry the same context and must not be
// refused.
//
// WithAsked marks a context with the moment its statement or transaction
// asked for the store's writer: on SQLite the writer's wait for SQLite's
// write lock, held by another process, ends as long after that moment as
// the busy timeout, its time queued for the writer behind the store's
// other writes included.
package writerctx

import (
	"context"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
)

// heldKey is the context key of the mark.
type heldKey struct{}

// ErrWriteOutside is the error of a write, from a context marked by
// WithHeld, that would wait for the writer its own request holds.
var ErrWriteOutside = &coded.Error{Code: courier.CodeWriteOutsideTransaction, Msg: "write through the transaction this request was given: it holds the database's one writer, which this write would wait for"}

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

// askedKey is the context key of the moment a write asked for the writer.
type askedKey struct{}

// WithAsked returns ctx marked with at, the moment its write asked for
// the store's writer.
func WithAsked(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, askedKey{}, at)
}

// Asked returns the moment WithAsked marked ctx, or a context it derives
// from, with; ok is false for a context not marked.
func Asked(ctx context.Context) (at time.Time, ok bool) {
	at, ok = ctx.Value(askedKey{}).(time.Time)
	return at, ok
}

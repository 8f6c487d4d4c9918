package handler_test

import (
	"context"
	"errors"
	"testing"

	"github.com/courier-go/courier/internal/writerctx"
)

// TestReceiversRunTheFunctionWithTheWriterHeld: a write through the
// Store's DB() inside a receiver's function waited for SQLite's busy
// timeout and then answered 500. Every receiver now passes its function a
// context marked as holding the writer (internal/writerctx), which the
// SQLite engine reads to fail such a write at once; the request's own
// context is not marked.
func TestReceiversRunTheFunctionWithTheWriterHeld(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		errNotHeld := errors.New("the function's context is not marked")
		e := target.open(t, anyOptions{app: func(ctx context.Context) error {
			if !writerctx.Held(ctx) {
				return errNotHeld
			}
			return nil
		}})
		req := e.request(t)
		if writerctx.Held(req.Context()) {
			t.Fatal("the request's context is marked before the receiver runs")
		}
		if rec := serve(e.handler, req); rec.Code != e.ok || e.calls.Load() != 1 {
			t.Fatalf("got %d after %d calls, want %d after 1: %s", rec.Code, e.calls.Load(), e.ok, rec.Body)
		}
	})
}

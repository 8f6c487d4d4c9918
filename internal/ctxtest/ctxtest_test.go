package ctxtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/ctxtest"
)

type key struct{}

// TestWithDeadlinePassesWhenTold: before pass the context is live, with a
// deadline ahead and its parent's values; after it, it and a context
// derived from it end as a passed deadline ends them, cause included.
func TestWithDeadlinePassesWhenTold(t *testing.T) {
	parent, cancelParent := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	ctx, pass := ctxtest.WithDeadline(parent)
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	cancelParent() // does not reach ctx
	if at, ok := ctx.Deadline(); !ok || !at.After(time.Now()) {
		t.Fatalf("Deadline = %v, %v; want one ahead", at, ok)
	}
	if ctx.Value(key{}) != "v" || ctx.Err() != nil || child.Err() != nil {
		t.Fatalf("before pass: value %v, Err %v, child's %v; want v, nil, nil", ctx.Value(key{}), ctx.Err(), child.Err())
	}
	pass()
	pass() // a second call is no-op
	<-ctx.Done()
	<-child.Done()
	for name, c := range map[string]context.Context{"ctx": ctx, "child": child} {
		if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
			t.Fatalf("%s after pass: Err %v, Cause %v; want context.DeadlineExceeded", name, c.Err(), context.Cause(c))
		}
	}
}

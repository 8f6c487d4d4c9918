package writerctx_test

import (
	"context"
	"testing"

	"github.com/courier-go/courier/internal/writerctx"
)

// TestHeldIsTheMark: a context is held only once WithHeld marked it or a
// context it derives from, and marking leaves the parent unmarked.
func TestHeldIsTheMark(t *testing.T) {
	t.Parallel()
	parent := context.Background()
	if writerctx.Held(parent) {
		t.Fatal("an unmarked context is held")
	}
	held := writerctx.WithHeld(parent)
	child, cancel := context.WithCancel(held)
	defer cancel()
	if !writerctx.Held(held) || !writerctx.Held(child) {
		t.Fatal("a marked context, or one derived from it, is not held")
	}
	if writerctx.Held(parent) {
		t.Fatal("marking a context marked its parent")
	}
	type otherKey struct{}
	if writerctx.Held(context.WithValue(parent, otherKey{}, true)) {
		t.Fatal("another package's value reads as the mark")
	}
}

package writerctx_test

import (
	"context"
	"testing"

	"github.com/courier-go/courier/internal/writerctx"
)

func TestHeldIsSeenThroughDerivedContexts(t *testing.T) {
	t.Parallel()
	if writerctx.Held(t.Context()) {
		t.Fatal("an unmarked context reports the writer held")
	}
	held := writerctx.WithHeld(t.Context())
	if !writerctx.Held(held) {
		t.Fatal("WithHeld's context does not report the writer held")
	}
	type otherKey struct{}
	derived, cancel := context.WithCancel(context.WithValue(held, otherKey{}, 1))
	defer cancel()
	if !writerctx.Held(derived) {
		t.Fatal("a context derived from a marked one lost the mark")
	}
	if !writerctx.Held(context.WithoutCancel(held)) {
		t.Fatal("WithoutCancel lost the mark")
	}
}

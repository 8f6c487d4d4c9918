package courier_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/courier-go/courier"
)

func TestErrorsMatchByCode(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("enqueue: %w", fmt.Errorf("%w: other payload", courier.CodeIdempotencyCollision))
	if !errors.Is(wrapped, courier.CodeIdempotencyCollision) {
		t.Fatal("an error with the collision code does not match CodeIdempotencyCollision")
	}
	if errors.Is(wrapped, courier.CodeLeaseLost) {
		t.Fatal("codes do not distinguish errors")
	}
	if got := courier.CodeOf(wrapped); got != courier.CodeIdempotencyCollision {
		t.Fatalf("CodeOf = %q", got)
	}
	if got := wrapped.Error(); got != "enqueue: idempotency_collision: other payload" {
		t.Fatalf("Error = %q", got)
	}
	if got := courier.CodeOf(errors.New("plain")); got != "" {
		t.Fatalf("CodeOf(plain) = %q", got)
	}
	// The first code in the chain, depth first, gives the code.
	outer := fmt.Errorf("%w: lookup: %w", courier.CodeInvalidArgument, fmt.Errorf("store: %w", courier.CodeNotFound))
	if courier.CodeOf(outer) != courier.CodeInvalidArgument || !errors.Is(outer, courier.CodeNotFound) {
		t.Fatal("CodeOf did not take the first code of the chain")
	}
	if courier.CodeOf(fmt.Errorf("%w: %w", fmt.Errorf("lookup: %w", courier.CodeNotFound), courier.CodeInvalidArgument)) != courier.CodeNotFound {
		t.Fatal("CodeOf did not look into the first wrapped error before the second")
	}
	// A case of a broader class: the precise code first, then the class.
	sig := fmt.Errorf("%w: %w", courier.CodeWebhookReplayed, courier.CodeSignatureInvalid)
	if !errors.Is(sig, courier.CodeSignatureInvalid) || courier.CodeOf(sig) != courier.CodeWebhookReplayed {
		t.Fatalf("a case of a class: Is=%v code=%q", errors.Is(sig, courier.CodeSignatureInvalid), courier.CodeOf(sig))
	}
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	final := map[courier.Status]bool{}
	for _, s := range courier.Statuses() {
		final[s] = s.Final()
	}
	want := map[courier.Status]bool{
		courier.StatusPending: false, courier.StatusLeased: false, courier.StatusRetryWait: false,
		courier.StatusSucceeded: true, courier.StatusFailed: true, courier.StatusSuppressed: true, courier.StatusQuarantined: true,
	}
	if fmt.Sprint(final) != fmt.Sprint(want) {
		t.Fatalf("Final = %v, want %v", final, want)
	}
	if slices.Contains(courier.Statuses(), "done") || len(final) != 7 {
		t.Fatal("Statuses lists an unknown status, or one twice")
	}
}

// Every error courier returns matches its code with errors.Is, however it
// was wrapped; CodeOf reads the precise code, for a log line or a metric.
func ExampleCodeOf() {
	err := fmt.Errorf("enqueue order-7: %w", fmt.Errorf("%w: same identity, different content", courier.CodeIdempotencyCollision))
	fmt.Println(errors.Is(err, courier.CodeIdempotencyCollision), courier.CodeOf(err))
	fmt.Println(err)
	// Output:
	// true idempotency_collision
	// enqueue order-7: idempotency_collision: same identity, different content
}

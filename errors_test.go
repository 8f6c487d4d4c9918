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
	wrapped := fmt.Errorf("enqueue: %w", &courier.Error{Code: courier.CodeIdempotencyCollision, Msg: "other payload"})
	if !errors.Is(wrapped, courier.CodeIdempotencyCollision) {
		t.Fatal("an error with the collision code does not match CodeIdempotencyCollision")
	}
	if errors.Is(wrapped, courier.CodeLeaseLost) {
		t.Fatal("codes do not distinguish errors")
	}
	if got := courier.CodeOf(wrapped); got != courier.CodeIdempotencyCollision {
		t.Fatalf("CodeOf = %q", got)
	}
	if got := courier.CodeOf(errors.New("plain")); got != "" {
		t.Fatalf("CodeOf(plain) = %q", got)
	}
	// A bare Code is an error of its own code, found however deep.
	bare := fmt.Errorf("store: %w", courier.CodeNotFound)
	if !errors.Is(bare, courier.CodeNotFound) || courier.CodeOf(bare) != courier.CodeNotFound || bare.Error() != "store: not_found" {
		t.Fatalf("a wrapped Code: Is=%v CodeOf=%q Error=%q", errors.Is(bare, courier.CodeNotFound), courier.CodeOf(bare), bare.Error())
	}
	// The first coded error in the chain gives the code.
	outer := &courier.Error{Code: courier.CodeInvalidArgument, Msg: fmt.Sprintf("lookup: %v", bare)}
	if courier.CodeOf(fmt.Errorf("%w: %w", outer, courier.CodeNotFound)) != courier.CodeInvalidArgument {
		t.Fatal("CodeOf did not take the first coded error of the chain")
	}
	// An *Error target matches by code too.
	if !errors.Is(wrapped, &courier.Error{Code: courier.CodeIdempotencyCollision, Msg: ""}) {
		t.Fatal("an *Error target with the same code does not match")
	}
	sig := &courier.Error{Code: "webhook_signature_replayed", Msg: "replayed", Err: courier.CodeSignatureInvalid}
	if !errors.Is(sig, courier.CodeSignatureInvalid) || courier.CodeOf(sig) != "webhook_signature_replayed" {
		t.Fatalf("Wrap: Is=%v code=%q", errors.Is(sig, courier.CodeSignatureInvalid), courier.CodeOf(sig))
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
	err := fmt.Errorf("enqueue order-7: %w", &courier.Error{Code: courier.CodeIdempotencyCollision, Msg: "same identity, different content"})
	fmt.Println(errors.Is(err, courier.CodeIdempotencyCollision), courier.CodeOf(err))
	// Output: true idempotency_collision
}

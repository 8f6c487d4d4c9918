package courier_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/courier-go/courier"
)

func TestErrorsMatchByCode(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("enqueue: %w", courier.NewError(courier.CodeIdempotencyCollision, "other payload"))
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
	sig := courier.Wrap(courier.CodeSignatureInvalid, "webhook_signature_replayed", "replayed")
	if !errors.Is(sig, courier.CodeSignatureInvalid) || courier.CodeOf(sig) != "webhook_signature_replayed" {
		t.Fatalf("Wrap: Is=%v code=%q", errors.Is(sig, courier.CodeSignatureInvalid), courier.CodeOf(sig))
	}
}

func TestStatuses(t *testing.T) {
	t.Parallel()
	final := map[courier.Status]bool{}
	for _, s := range courier.Statuses() {
		if !s.Valid() {
			t.Fatalf("%s is not Valid", s)
		}
		final[s] = s.Final()
	}
	want := map[courier.Status]bool{
		courier.StatusPending: false, courier.StatusLeased: false, courier.StatusRetryWait: false,
		courier.StatusSucceeded: true, courier.StatusFailed: true, courier.StatusSuppressed: true, courier.StatusQuarantined: true,
	}
	if fmt.Sprint(final) != fmt.Sprint(want) {
		t.Fatalf("Final = %v, want %v", final, want)
	}
	if courier.Status("done").Valid() {
		t.Fatal("an unknown status is Valid")
	}
}

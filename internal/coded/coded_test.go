package coded_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
)

// An Error prints as the fmt.Errorf("%w: %s", code, msg) a user writes,
// and is tested the same way: errors.Is for the code and the class,
// CodeOf for the precise code, however deep either is wrapped.
func TestErrorIsItsCodeThenItsClass(t *testing.T) {
	t.Parallel()
	broader := fmt.Errorf("lookup: %w", courier.CodeConfigInvalid)
	tests := []struct {
		name string
		err  *coded.Error
		text string
		is   []error
	}{
		{"a code and a message", &coded.Error{Code: courier.CodeNotFound, Msg: "no such delivery"}, "not_found: no such delivery", []error{courier.CodeNotFound}},
		{"a code alone", &coded.Error{Code: courier.CodeNotFound}, "not_found", []error{courier.CodeNotFound}},
		{"a case of a class", &coded.Error{Code: courier.CodeWebhookReplayed, Msg: "replayed", Err: courier.CodeSignatureInvalid}, "webhook_signature_replayed: replayed", []error{courier.CodeWebhookReplayed, courier.CodeSignatureInvalid}},
		{"a case of a wrapped class", &coded.Error{Code: courier.CodeSigningFailed, Msg: "no key k9", Err: broader}, "signing_failed: no key k9", []error{courier.CodeSigningFailed, courier.CodeConfigInvalid, broader}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("store: %w", tt.err)
			if got := tt.err.Error(); got != tt.text {
				t.Errorf("Error() = %q, want %q", got, tt.text)
			}
			if got := courier.CodeOf(err); got != tt.err.Code {
				t.Errorf("CodeOf = %q, want %q", got, tt.err.Code)
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = false", target)
				}
			}
			if errors.Is(err, courier.CodeInternal) {
				t.Error("errors.Is matches a code the error does not have")
			}
			var e *coded.Error
			if !errors.As(err, &e) || e != tt.err {
				t.Error("errors.As does not find the Error in the chain")
			}
		})
	}
}

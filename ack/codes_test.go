package ack_test

import (
	"errors"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
)

// TestEveryErrorHasItsCode: the root package's rule, that every error
// courier returns matches its code with errors.Is and CodeOf reads it,
// holds for canonical JSON's refusals too, so a caller can tell a
// duplicate key from a malformed document without importing anything
// internal; ErrNotFinite stays matchable.
func TestEveryErrorHasItsCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		code courier.Code
	}{
		{"malformed", `{"a":`, courier.CodeMalformedJSON},
		{"invalid UTF-8", "\"\xff\"", courier.CodeMalformedJSON},
		{"duplicate key", `{"a":1,"a":2}`, courier.CodeDuplicateKey},
		{"not finite", `{"a":1e999}`, courier.CodePayloadInvalid},
	}
	for _, tt := range tests {
		for form, write := range map[string]func([]byte) ([]byte, error){"Canonical": ack.Canonical, "JCS": canonical.JCS} {
			_, err := write([]byte(tt.doc))
			if courier.CodeOf(err) != tt.code || !errors.Is(err, tt.code) {
				t.Errorf("%s of %s: %v (code %q), want code %s", form, tt.name, err, courier.CodeOf(err), tt.code)
			}
			if tt.code == courier.CodePayloadInvalid && !errors.Is(err, canonical.ErrNotFinite) {
				t.Errorf("%s of %s: %v, want ErrNotFinite", form, tt.name, err)
			}
		}
	}
	if _, err := canonical.Marshal(func() {}); courier.CodeOf(err) != courier.CodeInvalidArgument {
		t.Errorf("Marshal of a func: %v (code %q), want invalid_argument", err, courier.CodeOf(err))
	}
	var c ack.Command
	if err := c.UnmarshalJSON([]byte(`{"a":`)); courier.CodeOf(err) != courier.CodeMalformedJSON {
		t.Errorf("Command.UnmarshalJSON of malformed JSON: %v (code %q), want malformed_json", err, courier.CodeOf(err))
	}
	var n ack.Terminal
	if err := n.UnmarshalJSON([]byte(`{"a":1,"a":1}`)); courier.CodeOf(err) != courier.CodeDuplicateKey {
		t.Errorf("Terminal.UnmarshalJSON of a duplicate key: %v (code %q), want duplicate_json_key", err, courier.CodeOf(err))
	}
}

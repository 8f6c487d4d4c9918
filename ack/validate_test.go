package ack_test

import (
	"errors"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

// TestValidateNeverPanics: Validate is public, and validator/v10 panics on
// tags it cannot run (a rule it does not have, a dive on a field that is
// neither slice nor map, a bound that is no number) and these panics
// reached Validate's caller. Such a type is refused with code
// config_invalid, as NewReceiver refuses it; a value that is no struct
// (nil, a nil pointer, a string, a slice) with code invalid_argument,
// where it had no code. Neither is a validation failure of a payload.
func TestValidateNeverPanics(t *testing.T) {
	t.Parallel()
	type unknownRule struct {
		A string `validate:"no_such_rule"`
	}
	type diveOnString struct {
		A string `validate:"dive,required"`
	}
	type wordBound struct {
		N int `validate:"min=one"`
	}
	type holdsBadTags struct {
		Inner *diveOnString `json:"inner"`
	}
	for _, tc := range []struct {
		name string
		v    any
		code courier.Code
	}{
		{"a rule the validator does not have", unknownRule{A: "x"}, courier.CodeConfigInvalid},
		{"a pointer to such a struct", &unknownRule{}, courier.CodeConfigInvalid},
		{"a dive on a string", diveOnString{A: "x"}, courier.CodeConfigInvalid},
		{"a bound that is no number", wordBound{N: 1}, courier.CodeConfigInvalid},
		{"a nested struct with a dive on a string", holdsBadTags{Inner: &diveOnString{A: "x"}}, courier.CodeConfigInvalid},
		{"nil", nil, courier.CodeInvalidArgument},
		{"a nil pointer to a struct", (*ack.Terminal)(nil), courier.CodeInvalidArgument},
		{"a string", "x", courier.CodeInvalidArgument},
		{"a slice of structs", []ack.Terminal{{}}, courier.CodeInvalidArgument},
		{"a map", map[string]any{"a": 1}, courier.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("Validate panicked: %v", v)
					}
				}()
				err = ack.Validate(tc.v)
			}()
			if courier.CodeOf(err) != tc.code || errors.Is(err, courier.CodePayloadInvalid) {
				t.Fatalf("Validate = %v (code %q), want code %s, no payload_invalid", err, courier.CodeOf(err), tc.code)
			}
		})
	}
}

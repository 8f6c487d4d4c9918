package ack_test

import (
	"errors"
	"fmt"
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

// TestValidateNamesAnInterfaceItCannotDiveInto: a field of interface type
// that a tag dives into holds what a body put there. One that holds
// neither slice, array nor map (a string, a number) was refused with code
// config_invalid, naming no field, as if its type were at fault, where one
// that holds nothing fails with rule dive. It fails with rule dive too,
// named at any depth, under omitempty too, where only nothing passes; a
// dive on a type that holds no list stays the type's fault.
func TestValidateNamesAnInterfaceItCannotDiveInto(t *testing.T) {
	t.Parallel()
	type line struct {
		Tags any `json:"tags" validate:"dive,required"`
	}
	type payload struct {
		Tags  any    `json:"tags" validate:"dive,required"`
		Lists []any  `json:"lists" validate:"dive,dive"`
		Opt   *any   `json:"opt" validate:"omitempty,dive"`
		Lines []line `json:"lines" validate:"dive"`
	}
	type diveOnString struct {
		A   string `validate:"dive"`
		Any any    `validate:"dive"`
	}
	str, empty := any("x"), any("")
	for _, tc := range []struct {
		name string
		v    any
		want string // the fields, or the code when no field is named
	}{
		{"a list", payload{Tags: []any{1}}, "<nil>"},
		{"nothing", payload{}, "[{tags dive}]"},
		{"a string", payload{Tags: "x"}, "[{tags dive}]"},
		{"a number in a list of lists", payload{Tags: []any{1}, Lists: []any{[]any{1}, 2.0}}, "[{lists[1] dive}]"},
		{"a string behind a pointer", &payload{Tags: []any{1}, Opt: &str}, "[{opt dive}]"},
		{"an empty string under omitempty", payload{Tags: []any{1}, Opt: &empty}, "[{opt dive}]"},
		{"nothing under omitempty", payload{Tags: []any{1}}, "<nil>"},
		{"a bool in a line", payload{Tags: map[string]any{"k": 1}, Lines: []line{{Tags: []any{1}}, {Tags: true}}}, "[{lines[1].tags dive}]"},
		{"a dive on a string type", diveOnString{A: "x", Any: "y"}, string(courier.CodeConfigInvalid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := ack.Validate(tc.v)
			var ve *ack.ValidationError
			got := fmt.Sprint(err)
			switch {
			case errors.As(err, &ve):
				got = fmt.Sprint(ve.Fields)
			case err != nil:
				got = string(courier.CodeOf(err))
			}
			if got != tc.want {
				t.Fatalf("Validate = %v, want %s", err, tc.want)
			}
		})
	}
}

package ack

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/courier-go/courier/internal/wire"

	"github.com/go-playground/validator/v10"

	"github.com/courier-go/courier"
)

// FieldError names one field that failed validation and the rule it broke.
// It never carries the field's value.
type FieldError struct {
	Field string `json:"field"`
	Rule  string `json:"rule"`
}

// ValidationError lists the fields of a payload that failed validation. It
// wraps courier.CodePayloadInvalid.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	names := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		names[i] = f.Field + " (" + f.Rule + ")"
	}
	return "ack: invalid payload: " + strings.Join(names, ", ")
}

// Unwrap returns courier.CodePayloadInvalid: a validation failure is of
// that class, so errors.Is(err, courier.CodePayloadInvalid) holds for it
// however it is wrapped. (A receiver answers it 400 validation_failed,
// listing Fields.)
func (e *ValidationError) Unwrap() error { return courier.CodePayloadInvalid }

// Checker is implemented by payloads with rules that struct tags cannot
// express (one field's value depending on another's). Check returns a
// *ValidationError.
type Checker interface {
	Check() error
}

var (
	validateOnce sync.Once
	validate     *validator.Validate
)

// validatorOf returns the validator/v10 instance Validate uses, made once.
// Field errors are named by their JSON names.
func validatorOf() *validator.Validate {
	validateOnce.Do(func() {
		v := validator.New(validator.WithRequiredStructEnabled())
		v.RegisterTagNameFunc(jsonName)
		must(v.RegisterValidation("courier_token", func(fl validator.FieldLevel) bool { return wire.IsToken(fl.Field().String()) }))
		must(v.RegisterValidation("courier_sha256", func(fl validator.FieldLevel) bool { return wire.IsDigest(fl.Field().String()) }))
		must(v.RegisterValidation("datetime", isDatetime))
		validate = v
	})
	return validate
}

// isDatetime is validator's datetime rule (the field parses with the
// rule's layout), except for the RFC 3339 layout, which is RFC 3339's
// date-time exactly (isRFC3339): JSON Schema's date-time, which AdCP's
// timestamps are.
func isDatetime(fl validator.FieldLevel) bool {
	if fl.Param() == time.RFC3339 {
		return isRFC3339(fl.Field().String())
	}
	_, err := time.Parse(fl.Param(), fl.Field().String())
	return err == nil
}

// isRFC3339 reports whether s is an RFC 3339 date-time (section 5.6):
// YYYY-MM-DDTHH:MM:SS, a fraction of a second if any, and Z or an offset
// ±HH:MM, every field its digits and within its range. T and Z may be
// lower case, and a leap second (:60) is allowed where it falls at 23:59
// UTC. time.Parse alone is looser (one-digit hours, a comma before the
// fraction) and refuses leap seconds.
func isRFC3339(s string) bool {
	const shape = "dddd-dd-ddTdd:dd:dd" // then .d+ if any, then Z or ±dd:dd
	if len(s) < len(shape)+1 {
		return false
	}
	for i, c := range []byte(shape) {
		if !matches(s[i], c) {
			return false
		}
	}
	rest := s[len(shape):]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && matches(rest[1], 'd') && matches(rest[2], 'd') &&
		rest[3] == ':' && matches(rest[4], 'd') && matches(rest[5], 'd'):
		if rest[1:3] > "23" || rest[4:6] > "59" {
			return false
		}
	default:
		return false
	}
	upper := []byte(s)
	upper[10] = 'T'
	if upper[len(upper)-1] == 'z' {
		upper[len(upper)-1] = 'Z'
	}
	leap := s[17:19] == "60"
	if leap {
		upper[17], upper[18] = '5', '9'
	}
	t, err := time.Parse(time.RFC3339, string(upper))
	if err != nil {
		return false
	}
	if leap {
		utc := t.UTC()
		return utc.Hour() == 23 && utc.Minute() == 59
	}
	return true
}

// matches reports whether b fits c of isRFC3339's shape: 'd' a digit, 'T'
// a T of either case, anything else itself.
func matches(b, c byte) bool {
	switch c {
	case 'd':
		return b >= '0' && b <= '9'
	case 'T':
		return b == 'T' || b == 't'
	}
	return b == c
}

func must(err error) {
	if err != nil {
		panic(err) // a misspelt rule name: a programming error caught by any test
	}
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}

// Validate checks v against its `validate` struct tags and, if v is a
// Checker, its own rules. Failures are a *ValidationError listing every
// failing field, named by its JSON name. Beyond validator/v10's built-in
// rules, the tags may use courier's own:
//
//	courier_token   1–256 of A-Z a-z 0-9 _ . : -
//	courier_sha256  64 lowercase hex characters
func Validate(v any) error {
	err := validatorOf().Struct(v)
	var verrs validator.ValidationErrors
	switch {
	case errors.As(err, &verrs):
		fields := make([]FieldError, len(verrs))
		for i, fe := range verrs {
			fields[i] = FieldError{Field: fieldPath(fe.Namespace()), Rule: fe.Tag()}
		}
		return &ValidationError{Fields: fields}
	case err != nil:
		return err
	}
	if c, ok := v.(Checker); ok {
		return c.Check()
	}
	return nil
}

// fieldPath drops the struct type name validator puts first: "Terminal.site_id" -> "site_id".
func fieldPath(ns string) string {
	if _, rest, ok := strings.Cut(ns, "."); ok {
		return rest
	}
	return ns
}

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
// rule's layout) with, for the RFC 3339 layout, RFC 3339's own allowance
// (section 5.6) of a lower-case "t" and "z". JSON Schema's date-time,
// which AdCP's timestamps are, is RFC 3339's, so a sender may write
// either case.
func isDatetime(fl validator.FieldLevel) bool {
	s := fl.Field().String()
	if fl.Param() == time.RFC3339 {
		s = strings.Map(func(r rune) rune {
			switch r {
			case 't':
				return 'T'
			case 'z':
				return 'Z'
			}
			return r
		}, s)
	}
	_, err := time.Parse(fl.Param(), s)
	return err == nil
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

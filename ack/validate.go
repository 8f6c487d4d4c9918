package ack

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/fieldlist"
	"github.com/courier-go/courier/internal/recovered"
	"github.com/courier-go/courier/internal/rules"
	"github.com/courier-go/courier/internal/typewalk"
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

// Error names the first 100 fields that failed, each path cut to 256
// bytes, and counts the others: a payload can fail on every value it
// holds. They are the fields a receiver's 400 answer lists.
func (e *ValidationError) Error() string {
	named, more := fieldlist.First(e.Fields, (*FieldError).path)
	names := make([]string, len(named))
	for i, f := range named {
		names[i] = f.Field + " (" + f.Rule + ")"
	}
	msg := "ack: invalid payload: " + strings.Join(names, ", ")
	if more > 0 {
		msg += fmt.Sprintf(", and %d more", more)
	}
	return msg
}

// path is where fieldlist.First finds f's path.
func (f *FieldError) path() *string { return &f.Field }

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
		v := validator.New(validator.WithRequiredStructEnabled(), validator.WithTagNameFuncBlankOmit())
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

func init() { rules.Register(checkRules) }

// checkRules returns why Validate cannot validate values of the struct
// type t: a validate tag, on t or on a struct type its fields hold
// (through pointers, slices, arrays and maps), that names a rule the
// validator does not have, or that the validator cannot apply to its
// field (dive on a field that is neither slice nor map, a bound that is
// no number). validator/v10 panics on those, so each of those struct
// types is validated here, as its zero value and as a value whose fields
// are all set (see runRules), to find them, and each field's dives are
// checked against its type (see divesInto). Fields validator does not
// visit (unexported ones, and those tagged validate:"-") are not followed.
func checkRules(t reflect.Type) error {
	return typewalk.Structs(t, func(t reflect.Type) ([]reflect.Type, error) {
		var fields []reflect.Type
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("validate")
			if (!f.IsExported() && !f.Anonymous) || tag == "-" {
				continue
			}
			if !divesInto(tag, f.Type) {
				return nil, fmt.Errorf("ack: the validate tag of %s.%s dives where its type, %s, holds no slice, array or map", t, f.Name, f.Type)
			}
			if name, ok := namesFields(tag, t); !ok {
				return nil, fmt.Errorf("ack: the validate tag of %s.%s names %q, which is no field of %s (a rule names other fields by their Go names)", t, f.Name, name, t)
			}
			fields = append(fields, f.Type)
		}
		return fields, nil
	}, runRules) // after its fields' types, so a failure names the type that holds the tag
}

// divesInto reports whether each dive of tag, a validate tag of a field of
// type t, has a slice, an array or a map to dive into, where the type
// tells: validator/v10 panics on one that has not, but only for a value
// that is set, which a zero value does not show. The rules between keys
// and endkeys, which apply to a map's keys, are not followed.
func divesInto(tag string, t reflect.Type) bool {
	keys := false
	for rule := range strings.SplitSeq(tag, ",") {
		switch {
		case keys:
			keys = rule != "endkeys"
		case rule == "keys":
			keys = true
		case rule == "dive":
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			switch t.Kind() {
			case reflect.Interface:
				return true // the value's own type decides
			case reflect.Slice, reflect.Array, reflect.Map:
				t = t.Elem()
			default:
				return false
			}
		}
	}
	return true
}

// fieldRules are validator/v10's rules whose parameter names fields of
// the struct that holds the tag (by Go name, a dotted path into nested
// structs): the whole parameter (false), or its words (true), every
// other word of them for the rules that pair a field with a value.
var fieldRules = map[string]struct{ words, pairs bool }{
	"eqfield": {}, "nefield": {}, "gtfield": {}, "gtefield": {}, "ltfield": {}, "ltefield": {},
	"fieldcontains": {}, "fieldexcludes": {},
	"required_with": {words: true}, "required_with_all": {words: true},
	"required_without": {words: true}, "required_without_all": {words: true},
	"excluded_with": {words: true}, "excluded_with_all": {words: true},
	"excluded_without": {words: true}, "excluded_without_all": {words: true},
	"required_if": {words: true, pairs: true}, "required_unless": {words: true, pairs: true},
	"excluded_if": {words: true, pairs: true}, "excluded_unless": {words: true, pairs: true},
	"skip_unless": {words: true, pairs: true},
}

// paramWords splits a rule's parameter into words as validator/v10 does:
// a word in single quotes may hold spaces.
var paramWords = regexp.MustCompile(`'[^']*'|\S+`)

// namesFields reports whether every field that tag, a validate tag of a
// field of struct type t, names in a cross-field rule (see fieldRules) is
// a field of t, and returns the first that is not. validator/v10 takes a
// name t does not have for a field that is never set, so such a rule
// never holds (eqfield) or never applies (required_if): a json name where
// the Go name belongs, or a typo, would refuse every payload or let every
// one through, unseen.
func namesFields(tag string, t reflect.Type) (string, bool) {
	for rule := range strings.SplitSeq(tag, ",") {
		for rule := range strings.SplitSeq(rule, "|") {
			name, param, _ := strings.Cut(rule, "=")
			kind, ok := fieldRules[name]
			if !ok {
				continue
			}
			names := []string{param}
			if kind.words {
				names = paramWords.FindAllString(param, -1)
			}
			for i, field := range names {
				if kind.pairs && i%2 == 1 {
					continue
				}
				if !hasField(t, field) {
					return field, false
				}
			}
		}
	}
	return "", true
}

// hasField reports whether path, a field's Go name or a dotted path of
// them, names a field of struct type t, promoted ones too, as validator/v10
// looks fields up. Past a map's key or a slice's index, or into a type
// that is no struct, the type does not tell: it is taken.
func hasField(t reflect.Type, path string) bool {
	for path != "" {
		t = typewalk.Deref(t)
		if t.Kind() != reflect.Struct || t.ConvertibleTo(reflect.TypeFor[time.Time]()) {
			return true
		}
		name, rest, _ := strings.Cut(path, ".")
		name, _, indexed := strings.Cut(name, "[")
		f, ok := t.FieldByName(name)
		if !ok {
			return false
		}
		if indexed {
			return true
		}
		t, path = f.Type, rest
	}
	return true
}

// runRules validates two values of the struct type t, its zero value and
// one whose fields are all set (see fill), reporting a panic of the
// validator's as an error: validator/v10 skips what follows omitempty on
// an empty field, and a nil pointer's rules, so a rule it cannot apply
// there shows only on a value that is set. Whether the values are valid
// does not matter, nor is their Check run.
func runRules(t reflect.Type) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("ack: the validate tags of %s cannot be run: %v", t, v)
		}
	}()
	_ = validatorOf().Struct(reflect.New(t).Interface())
	set := reflect.New(t)
	fill(set.Elem(), map[reflect.Type]bool{})
	_ = validatorOf().Struct(set.Interface())
	return nil
}

// fill sets v, a settable value, to one that is not empty: a number 1, a
// string "x", true, a pointer to a filled value, a slice or map of one
// filled element, and a struct's settable fields filled. Interfaces,
// channels and functions stay nil, and a struct type already being filled
// (seen) stays zero, so a type that holds itself ends.
func fill(v reflect.Value, seen map[reflect.Type]bool) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), seen)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), seen)
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i), seen)
		}
	case reflect.Map:
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, seen)
		fill(e, seen)
		m := reflect.MakeMapWithSize(v.Type(), 1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		if seen[v.Type()] {
			return
		}
		seen[v.Type()] = true
		defer delete(seen, v.Type())
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(f, seen)
			}
		}
	}
}

func must(err error) {
	if err != nil {
		panic(err) // a misspelt rule name: a programming error caught by any test
	}
}

// jsonName names field f as encoding/json does: by its json tag, or its
// Go name where the tag gives none (and where the tag is "-": such a
// field is no member of a body, but a rule it fails still needs a name).
// An untagged embedded struct, or pointer to one, has no name: encoding/json
// promotes its fields, so they are named at the level of f's struct.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case name == "" && f.Anonymous && indirect(f.Type).Kind() == reflect.Struct:
		return ""
	case name == "" || name == "-":
		return f.Name
	}
	return name
}

// indirect returns the type t points to, or t.
func indirect(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

// Validate checks v against its `validate` struct tags and, if v is a
// Checker, its own rules. Failures are a *ValidationError listing every
// failing field, named by its JSON name, in one order for one value: a
// struct's fields in their order, the elements of a slice by index and the
// entries of a map by key, whatever order Go ranges over the map in.
// Beyond validator/v10's built-in rules, the tags may use courier's own:
//
//	courier_token   1–256 of A-Z a-z 0-9 _ . : -
//	courier_sha256  64 lowercase hex characters
//
// v must be a struct or a non-nil pointer to one: anything else is
// refused with courier.CodeInvalidArgument. Tags the validator cannot run
// on v (a rule it does not have, a bound that is no number, a dive on a
// field that is neither slice nor map) are refused with
// courier.CodeConfigInvalid, where the validator would panic. A field of
// interface type that a tag dives into is the value's to fit: one that
// holds neither slice, array nor map (a string, a number, a bool) fails
// with rule dive, as one that holds nothing does. A Check that v has from
// an embedded pointer (or interface) that is nil is called as Go calls it,
// and one that cannot take nil (it panics: a method of the struct's value,
// or one that dereferences its receiver) fails that field instead, with
// rule required.
func Validate(v any) error {
	err := validateStruct(v)
	var (
		verrs   validator.ValidationErrors
		invalid *validator.InvalidValidationError
	)
	switch {
	case courier.CodeOf(err) == courier.CodeConfigInvalid:
		// The tags may be the value's to fit rather than at fault: v's
		// type passes its check (see checkRules) and the validator
		// panicked on a value of interface type it dove into.
		if checkRules(reflect.TypeOf(v)) == nil {
			if fields := diveMisfits(reflect.ValueOf(v)); len(fields) > 0 {
				inOrder(fields)
				return &ValidationError{Fields: fields}
			}
		}
		return err
	case errors.As(err, &invalid):
		return &coded.Error{Code: courier.CodeInvalidArgument, Msg: fmt.Sprintf("ack: Validate: %T is not a struct or a non-nil pointer to one", v)}
	case errors.As(err, &verrs):
		fields := make([]FieldError, len(verrs))
		for i, fe := range verrs {
			fields[i] = FieldError{Field: fieldPath(fe), Rule: fe.Tag()}
		}
		inOrder(fields)
		return &ValidationError{Fields: fields}
	case err != nil:
		return err
	}
	if c, ok := v.(Checker); ok {
		field, unset := typewalk.NilEmbedded(reflect.ValueOf(v), "Check")
		if !unset {
			return c.Check()
		}
		var err error
		if _, _, panicked := recovered.Run(func() { err = c.Check() }); panicked {
			return &ValidationError{Fields: []FieldError{{Field: field, Rule: "required"}}}
		}
		return err
	}
	return nil
}

// inOrder sorts fields, failures of one value as Validate names them, into
// an order that does not depend on the order they were found in: the
// validator goes through a struct's fields in their order, but through a
// map's entries in Go's, which differs from one run to the next, so the
// same body would list its fields differently each time. The validator
// names the failures under one struct field (or path of struct fields:
// the part of their paths before the first index or key, which no map key
// is part of) one after another, and those fields in a fixed order, so
// each such run is sorted on its own, by fieldlist.Compare (bytes, but
// runs of digits, an index or within a key, by the number they spell),
// and the runs keep their order.
func inOrder(fields []FieldError) {
	for start := 0; start < len(fields); {
		outer, end := outerField(fields[start].Field), start+1
		for end < len(fields) && outerField(fields[end].Field) == outer {
			end++
		}
		slices.SortFunc(fields[start:end], func(a, b FieldError) int {
			if c := fieldlist.Compare(a.Field, b.Field); c != 0 {
				return c
			}
			return strings.Compare(a.Rule, b.Rule)
		})
		start = end
	}
}

// outerField is the part of path before its first index or key: the path
// of struct fields that leads to it, which no map key is part of.
func outerField(path string) string {
	outer, _, _ := strings.Cut(path, "[")
	return outer
}

// maxDiveDepth bounds how deep diveMisfits looks into a value: deeper
// than any body's nesting, which strictjson bounds.
const maxDiveDepth = 256

// diveMisfits returns the values of v, a struct or a pointer to one, of
// interface type that a validate tag dives into and that hold one the
// dive cannot go into (see misfitDives), at any depth, named as Validate
// names fields, rule dive: the values on which the validator panics.
func diveMisfits(v reflect.Value) []FieldError {
	var out []FieldError
	var walk func(v reflect.Value, path string, depth int)
	walk = func(v reflect.Value, path string, depth int) {
		v = elem(v)
		if !v.IsValid() || depth > maxDiveDepth {
			return
		}
		switch v.Kind() {
		case reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				f := t.Field(i)
				tag := f.Tag.Get("validate")
				if (!f.IsExported() && !f.Anonymous) || tag == "-" {
					continue
				}
				name := jsonName(f)
				fpath := path
				if name != "" {
					fpath = joinPath(path, name)
				}
				out = append(out, misfitDives(v.Field(i), tag, fpath)...)
				walk(v.Field(i), fpath, depth+1)
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
			}
		case reflect.Map:
			iter := v.MapRange()
			for iter.Next() {
				walk(iter.Value(), fmt.Sprintf("%s[%v]", path, iter.Key()), depth+1)
			}
		}
	}
	walk(v, "", 0)
	return out
}

// misfitDives returns v, at path, if a dive of tag (a field's validate
// tag) meets a value of interface type it cannot go into, v or one of its
// elements there: one that holds neither slice, array nor map, nor is
// nil (which the validator names itself), empty or not. A dive on a type
// that holds neither is the type's, not the value's: it is not returned.
func misfitDives(v reflect.Value, tag, path string) []FieldError {
	rules := strings.Split(tag, ",")
	for i, keys := 0, false; i < len(rules); i++ {
		switch {
		case keys:
			keys = rules[i] != "endkeys"
		case rules[i] == "keys":
			keys = true
		case rules[i] == "dive":
			static := typewalk.Deref(v.Type()).Kind() == reflect.Interface
			if v = elem(v); !v.IsValid() {
				return nil
			}
			rest := strings.Join(rules[i+1:], ",")
			var out []FieldError
			switch v.Kind() {
			case reflect.Slice, reflect.Array:
				for j := range v.Len() {
					out = append(out, misfitDives(v.Index(j), rest, fmt.Sprintf("%s[%d]", path, j))...)
				}
			case reflect.Map:
				iter := v.MapRange()
				for iter.Next() {
					out = append(out, misfitDives(iter.Value(), rest, fmt.Sprintf("%s[%v]", path, iter.Key()))...)
				}
			default:
				if static {
					out = []FieldError{{Field: path, Rule: "dive"}}
				}
			}
			return out
		}
	}
	return nil
}

// elem returns what v holds through pointers and interfaces: the zero
// Value where one is nil.
func elem(v reflect.Value) reflect.Value {
	for n := 0; n < maxDiveDepth && v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface); n++ {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// joinPath names field name within the value at path.
func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// validateStruct runs the validator over v, reporting a panic of the
// validator's, on tags it cannot run (see checkRules), as an error.
func validateStruct(v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &coded.Error{Code: courier.CodeConfigInvalid, Msg: fmt.Sprintf("ack: the validate tags of %T cannot be run: %v", v, p)}
		}
	}()
	return validatorOf().Struct(v)
}

// fieldPath drops the struct type name validator puts first:
// "Terminal.site_id" -> "site_id". An embedded struct's own failure at
// the top (required, on a nil pointer to one) has no JSON name: it is
// named by its Go name.
func fieldPath(fe validator.FieldError) string {
	if _, rest, ok := strings.Cut(fe.Namespace(), "."); ok {
		return rest
	}
	return fe.StructField()
}

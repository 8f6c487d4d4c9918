package strictjson

import (
	"encoding/json"
	"errors"
	"iter"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/courier-go/courier/internal/typewalk"
)

// PathOf returns the path, as CheckNames spells it ("items[1].count",
// "labels[k]", "region"), to the value of doc that err, from decoding doc
// into v, is about, where encoding/json names that value otherwise or
// not at all:
//
//   - a value of the wrong type (an *json.UnmarshalTypeError) is named by
//     the struct members on the way alone, without the array indexes and
//     map keys ("items.count"), and with the Go names of embedded structs
//     whose fields are promoted ("Meta.region"). It is found at the
//     error's offset (the innermost value that starts before it and ends
//     at or after it: encoding/json reports just past a literal, just
//     inside an object or array), and must be the field the error names.
//   - a value that decodes itself (a json.Unmarshaler or
//     encoding.TextUnmarshaler, a time.Time), is a json.Number, or is a
//     string decoded as base64 into a []byte fails with its own error,
//     which names no field: it is the first such
//     value, in document order, that fails alone with an error that reads
//     as err does.
//
// A value whose type decodes itself, or is an interface, is not looked
// into. ok is false for a doc Parse refuses, and where no value below the
// root is found.
func PathOf(doc []byte, v any, err error) (path string, ok bool) {
	t := reflect.TypeOf(v)
	if t == nil || err == nil || Check(doc) != nil {
		return "", false
	}
	s := pathScan{b: doc, offset: -1}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		s.offset = te.Offset
	} else {
		s.failure = err.Error()
	}
	s.value(SkipSpace(doc, 0), t)
	if !s.ok || s.path == "" || (te != nil && !sameField(s.members, te.Field)) {
		return "", false
	}
	return s.path, true
}

// sameField reports whether field, encoding/json's name of a field,
// names the value reached through members: they are its names, in order,
// among the Go names of the embedded structs on the way, and its last.
func sameField(members []string, field string) bool {
	names := strings.Split(field, ".")
	if len(members) == 0 || names[len(names)-1] != members[len(members)-1] {
		return false
	}
	i := 0
	for _, n := range names {
		if i < len(members) && n == members[i] {
			i++
		}
	}
	return i == len(members)
}

// pathScan walks a strict document for PathOf, keeping the steps to the
// value it is in.
type pathScan struct {
	b       []byte
	offset  int64  // an UnmarshalTypeError's
	failure string // or another error's text
	steps   []step
	path    string
	members []string
	ok      bool
}

var numberType = reflect.TypeFor[json.Number]()

// value scans the value at i, to be decoded into t (nil: none), and
// returns the index just past it. Its children are scanned first, so the
// innermost value spanning the offset is the first to claim it.
func (s *pathScan) value(i int, t reflect.Type) int {
	field := t
	if t != nil {
		t = typewalk.Deref(t)
	}
	var end int
	switch {
	case t == nil || t.Kind() == reflect.Interface:
		end = ValueEnd(s.b, i)
	case decodesItself(t) || t == numberType || isBytes(t) && s.b[i] == '"':
		end = ValueEnd(s.b, i)
		if s.failure != "" && !s.ok {
			err := json.Unmarshal(s.b[i:end], reflect.New(field).Interface())
			s.claim(err != nil && err.Error() == s.failure)
		}
	case s.b[i] == '{':
		end = s.object(i, t)
	case s.b[i] == '[':
		end = s.array(i, t)
	default:
		end = ValueEnd(s.b, i)
	}
	s.claim(int64(i) < s.offset && s.offset <= int64(end))
	return end
}

// isBytes reports whether encoding/json decodes a JSON string into t as
// base64 (a slice of bytes), failing with an error that names no field.
func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// claim makes the value being scanned the one found, when it is and none
// is yet.
func (s *pathScan) claim(found bool) {
	if found && !s.ok {
		s.ok = true
		s.path, s.members = spell(s.steps)
	}
}

// object scans the object at i, decoded into t (a struct's members, or a
// map's values), and returns the index just past it.
func (s *pathScan) object(i int, t reflect.Type) int {
	var fields map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		fields = jsonFields(t)
	}
	i = SkipSpace(s.b, i+1)
	if s.b[i] == '}' {
		return i + 1
	}
	for {
		keyEnd := ValueEnd(s.b, i)
		var key string
		_ = json.Unmarshal(s.b[i:keyEnd], &key)      // a strict document's key decodes
		i = SkipSpace(s.b, SkipSpace(s.b, keyEnd)+1) // past ':'
		st, elem := step{kind: memberStep, name: key}, fields[key]
		if t.Kind() == reflect.Map {
			st.kind, elem = keyStep, t.Elem()
		}
		s.steps = append(s.steps, st)
		i = SkipSpace(s.b, s.value(i, elem))
		s.steps = s.steps[:len(s.steps)-1]
		if s.b[i] == '}' {
			return i + 1
		}
		i = SkipSpace(s.b, i+1) // past ','
	}
}

// array scans the array at i, decoded into t, and returns the index just
// past it.
func (s *pathScan) array(i int, t reflect.Type) int {
	var elem reflect.Type
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		elem = t.Elem()
	}
	i = SkipSpace(s.b, i+1)
	if s.b[i] == ']' {
		return i + 1
	}
	for n := 0; ; n++ {
		s.steps = append(s.steps, step{kind: indexStep, index: n})
		i = SkipSpace(s.b, s.value(i, elem))
		s.steps = s.steps[:len(s.steps)-1]
		if s.b[i] == ']' {
			return i + 1
		}
		i = SkipSpace(s.b, i+1) // past ','
	}
}

// spell returns the path steps lead along, as CheckNames spells it, and
// the names of its members.
func spell(steps []step) (path string, members []string) {
	var p strings.Builder
	for _, st := range steps {
		st.writeTo(&p)
		if st.kind == memberStep {
			members = append(members, st.name)
		}
	}
	return p.String(), members
}

// Members yields the members of the object a valid JSON document is,
// read in place: each one's name as it stands (quoted, perhaps escaped)
// and its value's bytes, in order; nothing when the document is no
// object. doc must be valid (json.Valid): another may make it panic.
func Members(doc []byte) iter.Seq2[[]byte, []byte] {
	return func(yield func(name, value []byte) bool) {
		i := SkipSpace(doc, 0)
		if i == len(doc) || doc[i] != '{' {
			return
		}
		for i = SkipSpace(doc, i+1); doc[i] == '"'; {
			nameEnd := ValueEnd(doc, i)
			name := doc[i:nameEnd]
			i = SkipSpace(doc, SkipSpace(doc, nameEnd)+1) // past ':'
			end := ValueEnd(doc, i)
			if !yield(name, doc[i:end]) {
				return
			}
			if i = SkipSpace(doc, end); doc[i] == ',' {
				i = SkipSpace(doc, i+1)
			}
		}
	}
}

// ValueEnd returns the index just past the value of a strict document
// that starts at i.
func ValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = ValueEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(" \t\r\n,]}", rune(b[i])) {
		i++
	}
	return i
}

// NotFinite returns the path, as CheckNames spells it ("items[1].count"),
// of the first number of doc, in document order, that has no finite
// float64 value (it overflows to ±Inf), which canonical JSON cannot
// write; the path is "" when doc itself is that number. ok is false when
// doc has none.
func NotFinite(doc Value) (path string, ok bool) {
	var steps []step
	var walk func(v Value) bool
	walk = func(v Value) bool {
		switch v.Kind {
		case Number:
			f, err := strconv.ParseFloat(v.Text, 64)
			return err != nil || math.IsInf(f, 0)
		case Array:
			for i, item := range v.Items {
				steps = append(steps, step{kind: indexStep, index: i})
				if walk(item) {
					return true
				}
				steps = steps[:len(steps)-1]
			}
		case Object:
			for _, m := range v.Members {
				steps = append(steps, step{kind: memberStep, name: m.Key})
				if walk(m.Val) {
					return true
				}
				steps = steps[:len(steps)-1]
			}
		}
		return false
	}
	if !walk(doc) {
		return "", false
	}
	path, _ = spell(steps)
	return path, true
}

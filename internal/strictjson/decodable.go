package strictjson

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"

	"github.com/courier-go/courier/internal/typewalk"
)

// CheckType returns why encoding/json cannot decode a JSON object into a
// value of the struct type t as t's fields declare, or nil when it can.
// It looks at t and every struct type t's fields hold (through pointers,
// slices, arrays and maps, and embedded ones), but not inside a type that
// decodes itself, and refuses:
//
//   - an embedded pointer to an unexported struct type whose fields a body
//     can set: encoding/json cannot allocate it, and fails to decode any
//     body that sets one of them (or, where a json tag names it, panics);
//   - a JSON name several fields share at one depth, none of them tagged
//     where another is not: encoding/json decodes none of them, so the
//     member is unknown, or dropped;
//   - an UnmarshalJSON or UnmarshalText promoted from an embedded field
//     into a struct type with fields of its own: encoding/json hands the
//     embedded field's method the whole value, and the other fields are
//     never set (a type that only wraps the embedded one is fine);
//   - a member no body can set: a field that holds (through pointers,
//     slices, arrays and maps) a channel, a function, a complex number,
//     an unsafe.Pointer, an interface with methods, or a map whose keys
//     are neither strings, integers nor text (encoding.TextUnmarshaler),
//     into which encoding/json decodes nothing but null;
//   - a field tagged inline (json:",inline"), an option of other
//     encoders that encoding/json ignores, decoding the field as a member
//     of its own rather than its fields as members of t;
//   - a t that decodes itself from a JSON string only (UnmarshalText
//     without UnmarshalJSON): no object decodes into it.
func CheckType(t reflect.Type) error {
	visit := func(t reflect.Type) ([]reflect.Type, error) {
		iface, method := jsonUnmarshaler, "UnmarshalJSON" // encoding/json's choice, before UnmarshalText
		if !reflect.PointerTo(t).Implements(iface) {
			iface, method = textUnmarshaler, "UnmarshalText"
		}
		if f, ok := promoted(t, iface, method); ok && hasOwnFields(t, f) {
			return nil, fmt.Errorf("%s.%s gives %s its %s: encoding/json hands that the whole value, and never sets %s's other fields (declare %s on %s, or name the embedded field)",
				t, f.Name, t, method, t, method, t)
		}
		if decodesItself(t) {
			return nil, nil // its fields are its own method's affair
		}
		var next []reflect.Type
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			// encoding/json ignores unexported fields but embedded structs,
			// whose exported fields it promotes.
			if tag == "-" || (!sf.IsExported() && (!sf.Anonymous || typewalk.Deref(sf.Type).Kind() != reflect.Struct)) {
				continue
			}
			if sf.Anonymous && !sf.IsExported() && sf.Type.Kind() == reflect.Pointer && sf.Type.Elem().Kind() == reflect.Struct {
				name, _, _ := strings.Cut(tag, ",")
				if isValidTag(name) || len(jsonFields(sf.Type.Elem())) > 0 {
					return nil, fmt.Errorf("%s.%s is an embedded pointer to an unexported struct type, which encoding/json cannot allocate to set its fields (embed the struct itself, or export its type)", t, sf.Name)
				}
			}
			if _, opts, _ := strings.Cut(tag, ","); slices.Contains(strings.Split(opts, ","), "inline") {
				return nil, fmt.Errorf("%s.%s is tagged inline, an option encoding/json does not have: it decodes the field as a member of its own (embed the struct without a json name to have its fields promoted)", t, sf.Name)
			}
			if bad, ok := undecodable(sf.Type); ok {
				return nil, fmt.Errorf("%s.%s is a member no JSON body can set: encoding/json decodes nothing but null into %s (tag it json:\"-\", or give it a type JSON holds)", t, sf.Name, bad)
			}
			next = append(next, sf.Type)
		}
		if c := typeFields(t).clashes; len(c) > 0 {
			var names []string // a struct type embedded twice at one depth gives its field twice
			for _, f := range c[0] {
				if name := f.owner.String() + "." + f.goName; !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
			return nil, fmt.Errorf("%s has several fields named %q in JSON (%s), which encoding/json decodes none of: give them distinct json tags", t, c[0][0].name, strings.Join(names, ", "))
		}
		return next, nil
	}
	if err := typewalk.Structs(t, visit, nil); err != nil {
		return err
	}
	if pt := reflect.PointerTo(t); pt.Implements(textUnmarshaler) && !pt.Implements(jsonUnmarshaler) {
		return fmt.Errorf("%s has UnmarshalText and no UnmarshalJSON: encoding/json decodes it from a JSON string only, never from an object", t)
	}
	return nil
}

// promoted returns the embedded field of struct type t whose method, of
// interface iface, t or *t has by promotion rather than by declaring it,
// if there is one.
func promoted(t, iface reflect.Type, method string) (reflect.StructField, bool) {
	pt := reflect.PointerTo(t)
	if !pt.Implements(iface) {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.Anonymous || !reflect.PointerTo(f.Type).Implements(iface) && !f.Type.Implements(iface) {
			continue
		}
		// The compiler writes the method a struct type has by promotion;
		// one declared on t, or on *t, has its source.
		for _, mt := range []reflect.Type{t, pt} {
			if m, ok := mt.MethodByName(method); ok {
				pc := m.Func.Pointer()
				if file, _ := runtime.FuncForPC(pc).FileLine(pc); file != "<autogenerated>" {
					return reflect.StructField{}, false
				}
			}
		}
		return f, true
	}
	return reflect.StructField{}, false
}

// hasOwnFields reports whether struct type t has a field, other than the
// embedded one, that encoding/json would decode a member into.
func hasOwnFields(t reflect.Type, embedded reflect.StructField) bool {
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Name == embedded.Name || sf.Tag.Get("json") == "-" {
			continue
		}
		if sf.IsExported() || sf.Anonymous && typewalk.Deref(sf.Type).Kind() == reflect.Struct {
			return true
		}
	}
	return false
}

// undecodable returns the type, held by t (itself, or through pointers,
// slices, arrays and maps), that encoding/json decodes nothing but null
// into, where there is one: a channel, a function, a complex number, an
// unsafe.Pointer, an interface with methods, a map whose key type is
// neither a string, an integer nor text. A type that decodes itself
// decodes what it will.
func undecodable(t reflect.Type) (reflect.Type, bool) {
	for range 64 { // as deep as typewalk looks
		if decodesItself(typewalk.Deref(t)) {
			return nil, false
		}
		switch t.Kind() {
		case reflect.Chan, reflect.Func, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
			return t, true
		case reflect.Interface:
			return t, t.NumMethod() > 0
		case reflect.Map:
			switch k := t.Key(); k.Kind() {
			case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			default:
				if !reflect.PointerTo(k).Implements(textUnmarshaler) {
					return t, true
				}
			}
			t = t.Elem()
		case reflect.Pointer, reflect.Slice, reflect.Array:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return nil, false
}

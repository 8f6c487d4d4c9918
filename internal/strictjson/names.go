package strictjson

import (
	"cmp"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// CheckNames walks the JSON document doc against v's type once and
// returns the names that type does not take as they are, each named by
// its path ("order.ID", "items[0].Name"), in sorted order: the paths
// ack.Validate names fields by. v is a value of the type doc is to be
// decoded into, or a pointer to one (a nil pointer will do).
//
// variants are the members whose names match a field only
// case-insensitively: encoding/json would take "ID" or "Currency" for the
// field named "id" or "currency" (or for an untagged field ID), so a
// payload could carry a value under a spelling that no check of the exact
// name sees. unknown are the members that match no field, not even
// case-insensitively, which encoding/json's DisallowUnknownFields refuses
// but names without their path ("sku" for items[0].sku); a caller that
// takes unknown members ignores them. Unknown members are not looked for
// inside a value whose type decodes itself (a json.Unmarshaler or
// encoding.TextUnmarshaler): encoding/json hands that its bytes whole,
// and what it takes is its own affair.
//
// Fields are named as encoding/json names them: by the json tag, by the Go
// field name where the tag gives none, none for a field tagged "-", and
// the fields of embedded structs promoted as encoding/json promotes them.
// The walk follows doc into every member, element and map value that
// decodes into a struct, however nested in pointers, slices, arrays and
// maps. A doc of another shape than v's type has none here: decoding
// reports it.
func CheckNames(doc []byte, v any) (variants, unknown []string) {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil, nil
	}
	var w nameWalk
	w.check(doc, t, "", true)
	slices.Sort(w.variants)
	slices.Sort(w.unknown)
	return w.variants, w.unknown
}

// nameWalk follows a document down a type, collecting the paths of the
// members whose names the type does not take as they are.
type nameWalk struct {
	variants, unknown []string
}

// check collects the case variants among the members of doc, at path,
// and if unknowns the members that match no field of t, and follows the
// others down t.
func (w *nameWalk) check(doc []byte, t reflect.Type, path string, unknowns bool) {
	t = indirect(t)
	unknowns = unknowns && !decodesItself(t)
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		if len(fields) == 0 && !unknowns {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) != nil {
			return // not an object: decoding reports it
		}
	next:
		for name, val := range members {
			if ft, ok := fields[name]; ok {
				w.check(val, ft, memberPath(path, name), unknowns)
				continue
			}
			for field := range fields {
				if strings.EqualFold(field, name) { // as encoding/json folds names
					w.variants = append(w.variants, memberPath(path, name))
					continue next
				}
			}
			if unknowns {
				w.unknown = append(w.unknown, memberPath(path, name))
			}
		}
	case reflect.Slice, reflect.Array:
		if !holdsStruct(t.Elem()) {
			return
		}
		var items []json.RawMessage
		if json.Unmarshal(doc, &items) != nil {
			return
		}
		for i, item := range items {
			if t.Kind() == reflect.Array && i >= t.Len() {
				break // encoding/json drops what an array has no room for
			}
			w.check(item, t.Elem(), path+"["+strconv.Itoa(i)+"]", unknowns)
		}
	case reflect.Map:
		if !holdsStruct(t.Elem()) {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) != nil {
			return
		}
		for key, val := range members {
			w.check(val, t.Elem(), path+"["+key+"]", unknowns)
		}
	}
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself reports whether encoding/json hands a value of type t
// (not a pointer) to its own method rather than decoding its members.
func decodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonUnmarshaler) || pt.Implements(textUnmarshaler)
}

func memberPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// indirect returns the type a pointer type finally points to (t itself
// for another kind). A type that points to itself ends the walk.
func indirect(t reflect.Type) reflect.Type {
	seen := map[reflect.Type]bool{}
	for t.Kind() == reflect.Pointer && !seen[t] {
		seen[t] = true
		t = t.Elem()
	}
	return t
}

// holdsStruct reports whether a value of type t may hold a struct, through
// pointers, slices, arrays and maps.
func holdsStruct(t reflect.Type) bool {
	seen := map[reflect.Type]bool{}
	for !seen[t] {
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			return true
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return false
		}
	}
	return false
}

// fieldCache holds jsonFields' answer per struct type.
var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields returns the fields encoding/json decodes a JSON object into
// for struct type t, by JSON name, with the type of each. It follows
// encoding/json's rules (typeFields): exported fields, and the exported
// fields of embedded structs without a tag name, promoted breadth first;
// where several fields at the shallowest depth share a name, the one
// tagged wins, and with no single one the name decodes into none.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	type field struct {
		name   string
		typ    reflect.Type
		depth  int
		tagged bool
	}
	var all []field
	visited := map[reflect.Type]bool{}
	next := map[reflect.Type]int{t: 1} // struct types at the next depth, and how often each is embedded there
	for depth := 0; len(next) > 0; depth++ {
		current := next
		next = map[reflect.Type]int{}
		for st, count := range current {
			if visited[st] {
				continue
			}
			visited[st] = true
			for i := range st.NumField() {
				sf := st.Field(i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				switch {
				case sf.Anonymous && !sf.IsExported() && ft.Kind() != reflect.Struct:
					continue // an embedded unexported non-struct: ignored
				case !sf.Anonymous && !sf.IsExported():
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					next[ft]++
					continue
				}
				f := field{name: name, typ: sf.Type, depth: depth, tagged: name != ""}
				if f.name == "" {
					f.name = sf.Name
				}
				// A struct embedded twice at one depth gives each of its
				// fields twice, so that they annihilate each other below.
				for range min(count, 2) {
					all = append(all, f)
				}
			}
		}
	}

	// Keep, per name, the dominant field: the only one at the shallowest
	// depth, or the only tagged one there.
	slices.SortFunc(all, func(a, b field) int {
		if c := cmp.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(a.depth, b.depth); c != 0 {
			return c
		}
		switch {
		case a.tagged && !b.tagged:
			return -1
		case b.tagged && !a.tagged:
			return 1
		}
		return 0
	})
	fields := map[string]reflect.Type{}
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		if j == i+1 || all[i].depth != all[i+1].depth || all[i].tagged != all[i+1].tagged {
			fields[all[i].name] = all[i].typ
		}
		i = j
	}
	fieldCache.Store(t, fields)
	return fields
}

// isValidTag is encoding/json's: a tag name it does not accept leaves
// the field its Go name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
			// Backslash and quote chars are reserved, but otherwise any
			// punctuation chars are allowed in a tag name.
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

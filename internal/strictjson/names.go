package strictjson

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/courier-go/courier/internal/typewalk"
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
//
// doc is checked (see Check), then read once more, guided by the type,
// each of its values visited once, so the cost is linear in its size
// however deep it nests; no tree of it is built, so what the walk keeps is
// bounded by its depth and the paths it reports. A document Parse refuses
// (a duplicate key, invalid UTF-8, deeper than MaxDepth) but encoding/json
// reads is read as encoding/json reads it, the last of duplicate members
// winning, so that the names checked are those decoding would see; one
// encoding/json refuses has none.
func CheckNames(doc []byte, v any) (variants, unknown []string) {
	vs, us := checkNames(doc, v, false, 0, true)
	return vs.paths, us.paths
}

// CheckVariants is CheckNames for a caller that takes unknown members: it
// returns the case variants alone, and spends nothing on the members that
// match no field, neither naming nor keeping them, however many there are.
func CheckVariants(doc []byte, v any) (variants []string) {
	vs, _ := checkNames(doc, v, false, 0, false)
	return vs.paths
}

// CheckNamesFirst is CheckNames, for a document Check has accepted where
// checked (which it does not check again: another may make it panic), that
// keeps of each list only its first n paths in sorted order, and counts
// them all: nVariants and nUnknown. What it keeps is bounded by n however
// many members of doc its type does not take (a refusal names no more).
func CheckNamesFirst(doc []byte, v any, checked bool, n int) (variants, unknown []string, nVariants, nUnknown int) {
	vs, us := checkNames(doc, v, checked, n, true)
	return vs.paths, us.paths, vs.n, us.n
}

// checkNames is CheckNames, trusting doc to be strict where checked,
// keeping the first limit paths of each list (all of them where limit is
// 0), looking for unknown members only where unknowns.
func checkNames(doc []byte, v any, checked bool, limit int, unknowns bool) (variants, unknown found) {
	t := reflect.TypeOf(v)
	if t == nil {
		return found{}, found{}
	}
	if !checked && Check(doc) != nil {
		root, ok := parseLikeEncodingJSON(doc)
		if !ok {
			return found{}, found{}
		}
		return checkValueNames(root, v, limit, unknowns)
	}
	w := nameWalk{variants: found{limit: limit}, unknown: found{limit: limit}}
	p := parser{b: doc}
	p.space()
	w.scan(&p, t, unknowns, 0)
	return w.variants.sorted(), w.unknown.sorted()
}

// checkValueNames is CheckNames for a document already read into a tree,
// keeping the first limit paths of each list (all of them where limit is
// 0), looking for unknown members only where unknowns.
func checkValueNames(doc Value, v any, limit int, unknowns bool) (variants, unknown found) {
	t := reflect.TypeOf(v)
	if t == nil {
		return found{}, found{}
	}
	w := nameWalk{variants: found{limit: limit}, unknown: found{limit: limit}}
	w.check(doc, t, unknowns)
	return w.variants.sorted(), w.unknown.sorted()
}

// found is the paths a name walk found of one kind: the first limit of
// them in sorted order (all of them where limit is 0), and how many.
type found struct {
	paths []string
	n     int
	limit int
}

// add counts path and keeps it while it may be among the first limit:
// the paths are sorted and cut back to limit each time they reach twice
// that, so what is kept stays under 2*limit paths.
func (f *found) add(path string) {
	f.n++
	f.paths = append(f.paths, path)
	if f.limit > 0 && len(f.paths) >= 2*f.limit {
		slices.Sort(f.paths)
		clear(f.paths[f.limit:])
		f.paths = f.paths[:f.limit]
	}
}

// sorted returns f with its paths sorted and cut to its limit.
func (f found) sorted() found {
	slices.Sort(f.paths)
	if f.limit > 0 && len(f.paths) > f.limit {
		f.paths = f.paths[:f.limit:f.limit]
	}
	return f
}

// parseLikeEncodingJSON reads a document Parse refuses into a Value the way
// json.Unmarshal reads it into maps and slices: invalid UTF-8 and lone
// surrogates become U+FFFD, the last of duplicate members wins, nesting
// may go as deep as encoding/json allows. ok is false for a document
// encoding/json refuses.
func parseLikeEncodingJSON(doc []byte) (v Value, ok bool) {
	if !json.Valid(doc) {
		return Value{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // no number can fail to convert
	var x any
	if dec.Decode(&x) != nil {
		return Value{}, false
	}
	return valueOf(x), true
}

// valueOf converts what encoding/json decodes into an interface value.
func valueOf(x any) Value {
	switch x := x.(type) {
	case map[string]any:
		v := Value{Kind: Object, Members: make([]Member, 0, len(x))}
		for key, val := range x {
			v.Members = append(v.Members, Member{Key: key, Val: valueOf(val)})
		}
		return v
	case []any:
		v := Value{Kind: Array, Items: make([]Value, len(x))}
		for i, item := range x {
			v.Items[i] = valueOf(item)
		}
		return v
	case string:
		return Value{Kind: String, Text: x}
	case json.Number:
		return Value{Kind: Number, Text: string(x)}
	case bool:
		if x {
			return Value{Kind: True}
		}
		return Value{Kind: False}
	}
	return Value{Kind: Null}
}

// nameWalk follows a document down a type, collecting the paths of the
// members whose names the type does not take as they are.
type nameWalk struct {
	// path leads from the root to the value being checked. It is spelled
	// out only for a member reported: building every value's path as the
	// walk goes would cost the depth at every element of a deep array.
	path              []step
	variants, unknown found
}

// step is one step of a path: into an object's member, a map's value or
// an array's element.
type step struct {
	kind  stepKind
	name  string // the member's name or the map's key
	raw   []byte // or these, decoded, where the name is not yet a string
	index int    // the element's index
}

type stepKind uint8

const (
	memberStep stepKind = iota
	keyStep
	indexStep
)

// check collects the case variants among the members of doc, at w.path,
// and if unknowns the members that match no field of t, and follows the
// others down t.
func (w *nameWalk) check(doc Value, t reflect.Type, unknowns bool) {
	t = typewalk.Deref(t)
	unknowns = unknowns && !decodesItself(t)
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		if len(fields) == 0 && !unknowns {
			return
		}
		if doc.Kind != Object {
			return // decoding reports another shape, or takes null
		}
		for _, m := range doc.Members {
			if ft, ok := fields[m.Key]; ok {
				w.descend(step{kind: memberStep, name: m.Key}, m.Val, ft, unknowns)
				continue
			}
			switch {
			case foldsToField(fields, m.Key):
				w.variants.add(w.pathTo(step{kind: memberStep, name: m.Key}))
			case unknowns:
				w.unknown.add(w.pathTo(step{kind: memberStep, name: m.Key}))
			}
		}
	case reflect.Slice, reflect.Array:
		if doc.Kind != Array || !holdsStruct(t.Elem()) {
			return
		}
		for i, item := range doc.Items {
			if t.Kind() == reflect.Array && i >= t.Len() {
				break // encoding/json drops what an array has no room for
			}
			w.descend(step{kind: indexStep, index: i}, item, t.Elem(), unknowns)
		}
	case reflect.Map:
		if doc.Kind != Object || !holdsStruct(t.Elem()) {
			return
		}
		for _, m := range doc.Members {
			w.descend(step{kind: keyStep, name: m.Key}, m.Val, t.Elem(), unknowns)
		}
	}
}

// scan is check for the value of a strict document at p, which it reads
// past: it follows the members, elements and map values that t may take
// a struct in, and reads past the others without keeping them.
func (w *nameWalk) scan(p *parser, t reflect.Type, unknowns bool, depth int) {
	t = typewalk.Deref(t)
	unknowns = unknowns && !decodesItself(t)
	switch c := p.b[p.i]; {
	case c == '{' && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		if len(fields) == 0 && !unknowns {
			break
		}
		w.members(p, depth, func(key []byte) {
			s := step{kind: memberStep, raw: key}
			if ft, ok := fields[string(key)]; ok {
				w.scanDescend(p, s, ft, unknowns, depth+1)
				return
			}
			switch {
			case foldsToField(fields, string(key)):
				w.variants.add(w.pathTo(s))
			case unknowns:
				w.unknown.add(w.pathTo(s))
			}
			_, _ = p.value(depth + 1)
		})
		return
	case c == '{' && t.Kind() == reflect.Map && holdsStruct(t.Elem()):
		w.members(p, depth, func(key []byte) {
			w.scanDescend(p, step{kind: keyStep, raw: key}, t.Elem(), unknowns, depth+1)
		})
		return
	case c == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && holdsStruct(t.Elem()):
		p.i++ // [
		p.space()
		for i := 0; p.b[p.i] != ']'; i++ {
			if t.Kind() == reflect.Array && i >= t.Len() {
				_, _ = p.value(depth + 1) // encoding/json drops what an array has no room for
			} else {
				w.scanDescend(p, step{kind: indexStep, index: i}, t.Elem(), unknowns, depth+1)
			}
			p.space()
			if p.b[p.i] == ',' {
				p.i++
				p.space()
			}
		}
		p.i++ // ]
		return
	}
	_, _ = p.value(depth) // decoding reports another shape, or takes null
}

// members reads the object of a strict document at p, calling member with
// each key, and p at its value, to be read past.
func (w *nameWalk) members(p *parser, depth int, member func(key []byte)) {
	p.i++ // {
	p.space()
	for p.b[p.i] != '}' {
		key, _ := p.stringBytes()
		p.space()
		p.i++ // :
		p.space()
		member(key)
		p.space()
		if p.b[p.i] == ',' {
			p.i++
			p.space()
		}
	}
	p.i++ // }
}

// scanDescend scans the value at p, reached from the current value by s,
// against t.
func (w *nameWalk) scanDescend(p *parser, s step, t reflect.Type, unknowns bool, depth int) {
	w.path = append(w.path, s)
	w.scan(p, t, unknowns, depth)
	w.path = w.path[:len(w.path)-1]
}

// descend checks doc, reached from the current value by s, against t.
func (w *nameWalk) descend(s step, doc Value, t reflect.Type, unknowns bool) {
	w.path = append(w.path, s)
	w.check(doc, t, unknowns)
	w.path = w.path[:len(w.path)-1]
}

// foldsToField reports whether name matches one of fields as encoding/json
// matches names, ignoring case.
func foldsToField(fields map[string]reflect.Type, name string) bool {
	for field := range fields {
		if strings.EqualFold(field, name) {
			return true
		}
	}
	return false
}

// pathTo spells out the path of the value reached from the current one by
// last.
func (w *nameWalk) pathTo(last step) string {
	var b strings.Builder
	for _, s := range w.path {
		s.writeTo(&b)
	}
	last.writeTo(&b)
	return b.String()
}

// writeTo appends s to the path b spells: a member after a dot (with none
// where the path is still empty), a map key or an index in brackets.
func (s step) writeTo(b *strings.Builder) {
	switch s.kind {
	case memberStep:
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
		b.Write(s.raw)
	case keyStep:
		b.WriteByte('[')
		b.WriteString(s.name)
		b.Write(s.raw)
		b.WriteByte(']')
	case indexStep:
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(s.index))
		b.WriteByte(']')
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

// holdsStruct reports whether a value of type t may hold a struct, through
// pointers, slices, arrays and maps.
func holdsStruct(t reflect.Type) bool {
	_, ok := typewalk.Held(t)
	return ok
}

// fieldCache holds typeFields' answer per struct type.
var fieldCache sync.Map // reflect.Type -> *fieldSet

// fieldSet is what encoding/json makes of a struct type's fields: those a
// JSON object's members decode into, and the names no field takes because
// several share them.
type fieldSet struct {
	types   map[string]reflect.Type
	clashes [][]jsonField // per name lost, the fields that share it
}

// jsonField is one field encoding/json sees in a struct type, with where
// it is declared.
type jsonField struct {
	name   string
	typ    reflect.Type
	depth  int
	tagged bool
	owner  reflect.Type // the struct type that declares it
	goName string
}

// jsonFields returns the fields encoding/json decodes a JSON object into
// for struct type t, by JSON name, with the type of each. It follows
// encoding/json's rules (typeFields): exported fields, and the exported
// fields of embedded structs without a tag name, promoted breadth first;
// where several fields at the shallowest depth share a name, the one
// tagged wins, and with no single one the name decodes into none.
func jsonFields(t reflect.Type) map[string]reflect.Type { return typeFields(t).types }

// typeFields is jsonFields, with the names it leaves out for their clash.
func typeFields(t reflect.Type) *fieldSet {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*fieldSet)
	}
	f, _ := fieldCache.LoadOrStore(t, dominantFields(embeddedFields(t)))
	return f.(*fieldSet)
}

// embeddedFields returns the fields of struct type t and of the structs
// it embeds without a tag name, breadth first, each with its JSON name
// and depth. A struct embedded twice at one depth gives its fields twice.
func embeddedFields(t reflect.Type) []jsonField {
	var all []jsonField
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
				f := jsonField{name: name, typ: sf.Type, depth: depth, tagged: name != "", owner: st, goName: sf.Name}
				if f.name == "" {
					f.name = sf.Name
				}
				// A struct embedded twice at one depth gives each of its
				// fields twice, so that they annihilate each other (dominantFields).
				for range min(count, 2) {
					all = append(all, f)
				}
			}
		}
	}
	return all
}

// dominantFields keeps, per name, the dominant field of all: the only one
// at the shallowest depth, or the only tagged one there. Where there is
// none, the fields that clash are its clashes.
func dominantFields(all []jsonField) *fieldSet {
	slices.SortFunc(all, func(a, b jsonField) int {
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
	set := &fieldSet{types: map[string]reflect.Type{}}
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].name == all[i].name {
			j++
		}
		if j == i+1 || all[i].depth != all[i+1].depth || all[i].tagged != all[i+1].tagged {
			set.types[all[i].name] = all[i].typ
		} else {
			k := i + 1
			for k < j && all[k].depth == all[i].depth && all[k].tagged == all[i].tagged {
				k++
			}
			set.clashes = append(set.clashes, all[i:k])
		}
		i = j
	}
	return set
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

package strictjson

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/typewalk"
)

// The types the name check is tried against: every kind of field the walk
// follows or stops at.
type (
	item struct {
		SKU string `json:"sku"`
	}
	untagged struct {
		ID     string
		Amount int `json:",omitempty"`
	}
	base struct {
		Tenant string `json:"tenant"`
	}
	order struct {
		base
		ID       string                   `json:"id"`
		Secret   string                   `json:"-"`
		Items    []item                   `json:"items"`
		Pair     [1]item                  `json:"pair"`
		ByKey    map[string]item          `json:"by_key"`
		Ref      *item                    `json:"ref"`
		Nested   [][]*item                `json:"nested"`
		Extra    json.RawMessage          `json:"extra"`
		Loose    map[string]any           `json:"loose"`
		Own      selfDecoding             `json:"own"`
		Children map[string][]untagged    `json:"children"`
		Named    struct{ Inner untagged } `json:"named"`
	}
	request struct {
		Order order `json:"order"`
	}
	site struct {
		Tenant string
		Region string
	}
	account struct {
		Tenant string
		Region string `json:"region"`
	}
	ambiguous struct {
		site
		account
	}
	tree struct {
		ID       string `json:"id"`
		Children []tree `json:"children"`
	}
)

// selfDecoding decodes itself: the walk leaves its members to it.
type selfDecoding struct{ A string }

func (s *selfDecoding) UnmarshalJSON(b []byte) error { return nil }

// referenceCheckNames is the name check written the plain way: it unmarshals
// each value it follows into a map or a slice of raw members and reads
// those again one level down. That reads a value once per level above it,
// too slow for a request body, but it is plainly what encoding/json sees,
// and CheckNames must find exactly what it finds.
func referenceCheckNames(doc []byte, v any) (variants, unknown []string) {
	var r reference
	r.check(doc, reflect.TypeOf(v), "", true)
	slices.Sort(r.variants)
	slices.Sort(r.unknown)
	return r.variants, r.unknown
}

type reference struct{ variants, unknown []string }

func (r *reference) check(doc []byte, t reflect.Type, path string, unknowns bool) {
	t = typewalk.Deref(t)
	unknowns = unknowns && !decodesItself(t)
	member := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		if len(fields) == 0 && !unknowns {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) != nil {
			return
		}
		for name, val := range members {
			if ft, ok := fields[name]; ok {
				r.check(val, ft, member(name), unknowns)
				continue
			}
			variant := false
			for field := range fields {
				variant = variant || strings.EqualFold(field, name)
			}
			switch {
			case variant:
				r.variants = append(r.variants, member(name))
			case unknowns:
				r.unknown = append(r.unknown, member(name))
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
		for i, it := range items {
			if t.Kind() == reflect.Array && i >= t.Len() {
				break
			}
			r.check(it, t.Elem(), path+"["+strconv.Itoa(i)+"]", unknowns)
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
			r.check(val, t.Elem(), path+"["+key+"]", unknowns)
		}
	}
}

// nest wraps inner in levels tree objects, each the only child of the one
// above.
func nest(levels int, inner string) string {
	return strings.Repeat(`{"id":"n","children":[`, levels) + inner + strings.Repeat(`]}`, levels)
}

// TestCheckNames: what the name check reports (CheckVariants the same
// variants), named by path, at the top, nested, and at depth; for
// documents Parse takes and for those only encoding/json takes, which are
// read as encoding/json reads them.
func TestCheckNames(t *testing.T) {
	t.Parallel()
	deepPath := strings.Repeat("children[0].", 49)
	for _, tc := range []struct {
		name              string
		doc               string
		v                 any
		variants, unknown []string
	}{
		{"exact names", `{"ID":"a","Amount":1}`, (*untagged)(nil), nil, nil},
		{"case variant of an untagged field", `{"id":"a","amount":1}`, (*untagged)(nil), []string{"amount", "id"}, nil},
		{"unknown at the top", `{"x":1}`, (*untagged)(nil), nil, []string{"x"}},
		{"nested variant", `{"order":{"id":"a","ID":"b"}}`, (*request)(nil), []string{"order.ID"}, nil},
		{"variant of the parent, not followed", `{"ORDER":{"x":1}}`, (*request)(nil), []string{"ORDER"}, nil},
		{"slice element", `{"order":{"items":[{"sku":"a"},{"SKU":"b","x":1}]}}`, (*request)(nil), []string{"order.items[1].SKU"}, []string{"order.items[1].x"}},
		{"array element, and what it has no room for", `{"order":{"pair":[{"Sku":"a"},{"SKU":"b"}]}}`, (*request)(nil), []string{"order.pair[0].Sku"}, nil},
		{"map value", `{"order":{"by_key":{"k":{"sKu":"a","y":1}}}}`, (*request)(nil), []string{"order.by_key[k].sKu"}, []string{"order.by_key[k].y"}},
		{"slices of pointers", `{"order":{"nested":[[null,{"SKU":"a"}]]}}`, (*request)(nil), []string{"order.nested[0][1].SKU"}, nil},
		{"promoted field", `{"order":{"TENANT":"t"}}`, (*request)(nil), []string{"order.TENANT"}, nil},
		{"a field tagged -", `{"order":{"secret":"s","Secret":"s"}}`, (*request)(nil), nil, []string{"order.Secret", "order.secret"}},
		{"inside raw JSON, maps of any, a type that decodes itself", `{"order":{"extra":{"ID":1},"loose":{"ID":1},"own":{"A":1,"x":2}}}`, (*request)(nil), nil, nil},
		{"a variant inside a type that decodes itself", `{"order":{"own":{"a":1}}}`, (*request)(nil), []string{"order.own.a"}, nil},
		{"ambiguous promoted name", `{"TENANT":"t","REGION":"r"}`, (*ambiguous)(nil), []string{"REGION"}, []string{"TENANT"}},
		{"another shape than the type's", `{"order":{"items":{"sku":"a"},"ref":[1]}}`, (*request)(nil), nil, nil},
		{"escaped names are read decoded", `{"\u006frder":{"\u0049D":"a"}}`, (*request)(nil), []string{"order.ID"}, nil},
		{"variant 49 levels down", nest(49, `{"ID":"x"}`), (*tree)(nil), []string{deepPath + "ID"}, nil},
		{"unknown 49 levels down", nest(49, `{"id":"x","x":1}`), (*tree)(nil), nil, []string{deepPath + "x"}},
		{"empty names", `{"":{"":1}}`, (*map[string]untagged)(nil), nil, []string{"[]."}},
		{"top-level array", `[{"Id":1}]`, (*[]untagged)(nil), []string{"[0].Id"}, nil},
		{"not JSON", `{"ID":`, (*untagged)(nil), nil, nil},
		// Documents Parse refuses, which encoding/json reads.
		{"duplicate members: the last wins", `{"order":{"ref":{"x":1},"ref":{"SKU":1}}}`, (*request)(nil), []string{"order.ref.SKU"}, nil},
		{"invalid UTF-8 in a name", "{\"order\":{\"\xff\":1}}", (*request)(nil), nil, []string{"order.\uFFFD"}},
		{"lone surrogate in a name", `{"order":{"\ud800":1}}`, (*request)(nil), nil, []string{"order.\uFFFD"}},
		{"deeper than MaxDepth", nest(MaxDepth, `{"Id":"x"}`), (*tree)(nil), []string{strings.Repeat("children[0].", MaxDepth) + "Id"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			variants, unknown := CheckNames([]byte(tc.doc), tc.v)
			if !slices.Equal(variants, tc.variants) || !slices.Equal(unknown, tc.unknown) {
				t.Errorf("CheckNames(%s) = %q, %q; want %q, %q", tc.doc, variants, unknown, tc.variants, tc.unknown)
			}
			refVariants, refUnknown := referenceCheckNames([]byte(tc.doc), tc.v)
			if !slices.Equal(variants, refVariants) || !slices.Equal(unknown, refUnknown) {
				t.Errorf("CheckNames(%s) = %q, %q; the reference finds %q, %q", tc.doc, variants, unknown, refVariants, refUnknown)
			}
			if only := CheckVariants([]byte(tc.doc), tc.v); !slices.Equal(only, tc.variants) {
				t.Errorf("CheckVariants(%s) = %q, want %q", tc.doc, only, tc.variants)
			}
		})
	}
}

// TestCheckNamesMatchesReference runs CheckNames and the reference on
// random documents built from the names of the test types, their case
// variants and strangers, sometimes duplicated, escaped or not valid
// UTF-8, against every test type.
func TestCheckNamesMatchesReference(t *testing.T) {
	t.Parallel()
	types := []any{
		(*request)(nil), (*order)(nil), (*untagged)(nil), (*ambiguous)(nil), (*tree)(nil),
		(*[]item)(nil), (*[2]item)(nil), (*map[string][]*tree)(nil), (*selfDecoding)(nil),
	}
	r := rand.New(rand.NewPCG(28, 1))
	var refused int
	for range 3000 {
		doc := randomDocument(r, 0)
		if Check([]byte(doc)) != nil {
			refused++
		}
		for _, v := range types {
			variants, unknown := CheckNames([]byte(doc), v)
			refVariants, refUnknown := referenceCheckNames([]byte(doc), v)
			if !slices.Equal(variants, refVariants) || !slices.Equal(unknown, refUnknown) {
				t.Fatalf("CheckNames(%s, %T) = %q, %q; the reference finds %q, %q", doc, v, variants, unknown, refVariants, refUnknown)
			}
			if only := CheckVariants([]byte(doc), v); !slices.Equal(only, refVariants) {
				t.Fatalf("CheckVariants(%s, %T) = %q; the reference finds %q", doc, v, only, refVariants)
			}
		}
	}
	if refused == 0 {
		t.Error("every random document was strict: the fallback went untried")
	}
}

// names are the keys of random documents: the test types' field names,
// case variants of them, strangers, one escaped and one invalid UTF-8.
var names = []string{
	"order", "Order", "id", "ID", "Id", "sku", "SKU", "items", "Items", "pair", "by_key", "ref", "nested",
	"extra", "loose", "own", "children", "Children", "named", "Inner", "inner", "tenant", "TENANT",
	"Tenant", "Region", "region", "REGION", "Amount", "amount", "secret", "Secret", "x", "", `\u0069d`, "\xff",
}

func randomDocument(r *rand.Rand, depth int) string {
	switch k := r.IntN(10); {
	case depth > 5 || k < 3:
		return []string{`1`, `"s"`, `null`, `true`, `-0.5e3`, `[]`, `{}`}[r.IntN(7)]
	case k < 7:
		var b strings.Builder
		b.WriteByte('{')
		for i := range r.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`"` + names[r.IntN(len(names))] + `":` + randomDocument(r, depth+1))
		}
		b.WriteByte('}')
		return b.String()
	default:
		var b strings.Builder
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(randomDocument(r, depth+1))
		}
		b.WriteByte(']')
		return b.String()
	}
}

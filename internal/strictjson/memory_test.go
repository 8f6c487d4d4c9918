package strictjson

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCheckBuildsNoTree: checking a 1 MiB body, strictly and for the
// names a type takes, costs what its depth and largest object need, not
// a node per value: a body of many small values is checked in a few
// kilobytes, where a tree of it would take tens of megabytes.
func TestCheckBuildsNoTree(t *testing.T) {
	for _, s := range bodyShapes(1 << 20) {
		if n := allocated(func() {
			if err := Check(s.doc); err != nil {
				t.Fatal(err)
			}
		}); n > 64<<10 {
			t.Errorf("%s: Check allocated %d bytes for a %d-byte document", s.name, n, len(s.doc))
		}
		if n := allocated(func() {
			if variants, unknown := CheckNames(s.doc, []benchNode(nil)); variants != nil || unknown != nil {
				t.Fatal(variants, unknown)
			}
		}); n > 64<<10 {
			t.Errorf("%s: CheckNames allocated %d bytes for a %d-byte document", s.name, n, len(s.doc))
		}
	}
}

// TestCheckAgreesWithParse: Check refuses exactly what Parse refuses, with
// the same error, on random documents (spaced out and not), on duplicates
// found by scan and by set, spelled alike or through escapes, and at each
// depth; and the name check reads a spaced-out document as it reads the
// same document without the spaces.
func TestCheckAgreesWithParse(t *testing.T) {
	var many strings.Builder
	for i := range 20 {
		fmt.Fprintf(&many, `"k%d":%d,`, i, i)
	}
	docs := []string{
		`{"a":1,"\u0061":2}`, `{"a":{"a":1},"b":{"a":2,"a":3}}`, `[{"a":1},{"a":1}]`,
		`{` + many.String() + `"k0":0}`, `{` + many.String() + `"k\u0031\u0039":0}`,
		`{` + many.String() + `"k20":0}`, `[{` + many.String() + `"x":0},{"k0":0,"k0":1}]`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
		`{"a":"\ud800"}`, "[\"\xff\"]", `[1,]`, `{"a" 1}`, `[1] 2`,
	}
	r := rand.New(rand.NewPCG(34, 11))
	for range 3000 {
		docs = append(docs, randomDocument(r, 0))
	}
	spaced := strings.NewReplacer("{", " { ", "}", "\t}\n", "[", "\r[ ", "]", " ] ", ",", " , ", ":", " : ")
	for _, doc := range docs {
		for _, d := range []string{doc, spaced.Replace(doc)} {
			_, parseErr := Parse([]byte(d))
			if err := Check([]byte(d)); fmt.Sprint(err) != fmt.Sprint(parseErr) {
				t.Fatalf("Check(%q) = %v; Parse refuses it with %v", d, err, parseErr)
			}
		}
		for _, v := range []any{(*order)(nil), (*[]item)(nil), (*map[string][]*tree)(nil)} {
			variants, unknown := CheckNames([]byte(doc), v)
			spacedVariants, spacedUnknown := CheckNames([]byte(spaced.Replace(doc)), v)
			if !slices.Equal(variants, spacedVariants) || !slices.Equal(unknown, spacedUnknown) {
				t.Fatalf("CheckNames(%q, %T) = %q, %q; spaced out, %q, %q", doc, v, variants, unknown, spacedVariants, spacedUnknown)
			}
		}
	}
}

// TestParseAllocatesItsTree: Parse of a 1 MiB array of small numbers
// allocates its tree, a Value per item in one array of their number, and
// next to nothing else; not the arrays an item at a time would grow
// through, several times the tree.
func TestParseAllocatesItsTree(t *testing.T) {
	doc := bodyShapes(1 << 20)[0].doc // flat-numbers
	var v Value
	n := allocated(func() {
		var err error
		if v, err = Parse(doc); err != nil {
			t.Fatal(err)
		}
	})
	tree := uint64(len(v.Items)) * uint64(unsafe.Sizeof(Value{}))
	if len(v.Items) != (len(doc)-1)/2 || n > tree+64<<10 {
		t.Errorf("Parse of %d items allocated %d bytes, for a tree of %d", len(v.Items), n, tree)
	}
}

// FuzzCheckNames: Check refuses what Parse refuses, with the same error,
// and CheckNames, which reads a strict document without its tree, finds
// what the reference finds.
func FuzzCheckNames(f *testing.F) {
	f.Add([]byte(`{"id":1,"ID":2,"items":[{"sku":"a","SKU":"b"}],"by_key":{"k":{"x":1}}}`))
	f.Add([]byte(` [ { "sku" : "a" , "x" : [ 1 , { } ] } ] `))
	f.Add([]byte(`{"pair":[{"sku":"a"},{"SKU":"b"}],"nested":[[{"Sku":1}]]}`))
	f.Add([]byte(`{"\u0069d":"x","i\u0044":"y"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, parseErr := Parse(doc)
		if err := Check(doc); fmt.Sprint(err) != fmt.Sprint(parseErr) {
			t.Fatalf("Check(%q) = %v; Parse refuses it with %v", doc, err, parseErr)
		}
		for _, v := range []any{(*order)(nil), (*[]item)(nil), (*[2]item)(nil), (*map[string][]*tree)(nil)} {
			variants, unknown := CheckNames(doc, v)
			refVariants, refUnknown := referenceCheckNames(doc, v)
			if !slices.Equal(variants, refVariants) || !slices.Equal(unknown, refUnknown) {
				t.Fatalf("CheckNames(%q, %T) = %q, %q; the reference finds %q, %q", doc, v, variants, unknown, refVariants, refUnknown)
			}
		}
	})
}

package strictjson

import (
	"encoding/json"
	"testing"
	"time"
)

// Types for TestPathOf.
type (
	pathLine struct {
		Qty int       `json:"qty"`
		At  time.Time `json:"at"`
	}
	pathMeta struct {
		Region string `json:"region"`
	}
	// pathSelf decodes itself, through a plain decode of its own: the
	// offsets of its errors are its own bytes'.
	pathSelf struct {
		Count int `json:"count"`
	}
	pathDoc struct {
		pathMeta
		Lines  []pathLine          `json:"lines"`
		ByKey  map[string]pathLine `json:"by_key"`
		Grid   [][]int             `json:"grid"`
		Total  json.Number         `json:"total"`
		Selves []pathSelf          `json:"selves"`
		Any    any                 `json:"any"`
	}
)

func (p *pathSelf) UnmarshalJSON(b []byte) error {
	type plain pathSelf
	return json.Unmarshal(b, (*plain)(p))
}

// TestPathOf: the value a decode error is about is named as CheckNames
// names paths, with the indexes and map keys encoding/json leaves out and
// promoted fields where the body has them; a value that decodes itself
// by its own failure. A self-decoding value's own type error, whose offset
// is into its own bytes, is not named by that offset in the document.
func TestPathOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc  string
		path string // "": none found
	}{
		{`{"lines":[{"qty":1},{"qty":"2"}]}`, "lines[1].qty"},
		{`{"lines":[{"qty":1},{"qty":1e400}]}`, "lines[1].qty"},
		{`{"lines":[{"qty":1},{"qty":1}, 5]}`, "lines[2]"},
		{`{"lines":{}}`, "lines"},
		{`{"by_key":{"a":{"qty":1},"b.c":{"qty":true}}}`, "by_key[b.c].qty"},
		{`{"grid":[[1],[2, "3"]]}`, "grid[1][1]"},
		{`{"region":7}`, "region"},
		{`{"lines":[{"at":"2026-01-02T03:04:05Z"},{"at":"yesterday"}]}`, "lines[1].at"},
		{`{"total":"many"}`, "total"},
		{`{"any":{"x":[1e400]}}`, "any"},
		{`{"lines":[{"qty":1}],"selves":[{"count":1},{"count":"x"}]}`, ""},
		{`[]`, ""},
	} {
		var v pathDoc
		err := json.Unmarshal([]byte(tc.doc), &v)
		if err == nil {
			t.Fatalf("%s decoded", tc.doc)
		}
		path, ok := PathOf([]byte(tc.doc), &v, err)
		if path != tc.path || ok != (tc.path != "") {
			t.Errorf("PathOf(%s, %v) = %q, %v; want %q", tc.doc, err, path, ok, tc.path)
		}
	}
}

// FuzzPathOf: whatever the document, PathOf does not panic, and a path it
// finds for a wrong type names the field the error names.
func FuzzPathOf(f *testing.F) {
	for _, seed := range []string{
		`{"lines":[{"qty":1},{"qty":"2"}]}`, `{"by_key":{"a\"]":{"qty":true}}}`, `{"grid":[[1],[2, "3"]]}`,
		`{"region":7}`, `{"lines":[{"at":"x"}]}`, `{"total":"many"}`, `{"selves":[{"count":"x"}]}`, `[1, {"a": [null]}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var v pathDoc
		err := json.Unmarshal(doc, &v)
		if err == nil {
			return
		}
		path, ok := PathOf(doc, &v, err)
		if ok && path == "" {
			t.Fatalf("PathOf(%q) found an empty path", doc)
		}
	})
}

// TestNotFinite: the first number that overflows a float64 is named by
// its path, as CheckNames names members and indexes; huge but finite
// numbers and tiny ones (which round to zero) are not it.
func TestNotFinite(t *testing.T) {
	for _, tc := range []struct {
		doc, path string
		ok        bool
	}{
		{`{"a":1,"b":[2,{"c":1e400}],"d":-1e400}`, "b[1].c", true},
		{`[1.7976931348623157e308,-1e999]`, "[1]", true},
		{`1e400`, "", true},
		{`{"a":1e308,"b":1e-400,"c":"1e400"}`, "", false},
	} {
		doc, err := Parse([]byte(tc.doc))
		if err != nil {
			t.Fatal(err)
		}
		if path, ok := NotFinite(doc); path != tc.path || ok != tc.ok {
			t.Errorf("NotFinite(%s) = %q, %v; want %q, %v", tc.doc, path, ok, tc.path, tc.ok)
		}
	}
}

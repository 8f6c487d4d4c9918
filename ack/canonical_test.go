package ack_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/strictjson"
)

// TestCanonicalGolden compares Canonical with python3's json.dumps(v,
// sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
// on the corpus testdata/canonical/gen.py writes.
func TestCanonicalGolden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/canonical/*.json")
	if err != nil || len(inputs) < 10 {
		t.Fatalf("corpus: %d files, %v", len(inputs), err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			doc := readFile(t, in)
			want := readFile(t, strings.TrimSuffix(in, ".json")+".golden")
			got, err := ack.Canonical(doc)
			if err != nil {
				t.Fatalf("Canonical: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Canonical mismatch\n got: %q\nwant: %q", got, want)
			}
			again, err := ack.Canonical(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("Canonical is not idempotent: %q, %v", again, err)
			}
		})
	}
}

func TestMarshalMatchesCanonical(t *testing.T) {
	t.Parallel()
	v := map[string]any{"z": "<&>", "a": []any{1, 2.5, "\u2028"}, "m": map[string]int{"b": 1, "a": 2}}
	got, err := canonical.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":[1,2.5,"` + "\u2028" + `"],"m":{"a":2,"b":1},"z":"<&>"}`
	if string(got) != want {
		t.Fatalf("Marshal = %s, want %s", got, want)
	}
}

func TestCanonicalRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want error
	}{
		{"infinity", `{"x":1e400}`, canonical.ErrNotFinite},
		{"negative infinity", `[-1e999]`, canonical.ErrNotFinite},
		{"duplicate key", `{"a":1,"a":2}`, strictjson.ErrDuplicateKey},
		{"duplicate nested key", `{"a":{"b":1,"c":2,"b":3}}`, strictjson.ErrDuplicateKey},
		{"duplicate after escape", `{"a":1,"\u0061":2}`, strictjson.ErrDuplicateKey},
		{"trailing comma", `{"a":1,}`, strictjson.ErrMalformed},
		{"trailing data", `{} {}`, strictjson.ErrMalformed},
		{"NaN literal", `[NaN]`, strictjson.ErrMalformed},
		{"leading zero", `[01]`, strictjson.ErrMalformed},
		{"lone surrogate", `["\ud800"]`, strictjson.ErrMalformed},
		{"invalid UTF-8", "[\"\xff\"]", strictjson.ErrMalformed},
		{"raw control character", "[\"a\x01\"]", strictjson.ErrMalformed},
		{"empty", ``, strictjson.ErrMalformed},
		{"too deep", strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1), strictjson.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ack.Canonical([]byte(tt.doc)); !errors.Is(err, tt.want) {
				t.Fatalf("Canonical(%q) error = %v, want %v", tt.doc, err, tt.want)
			}
		})
	}
}

func TestDuplicateKeysInLargeObject(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&b, `"k%d":1,`, i)
	}
	b.WriteString(`"k7":2}`)
	if err := strictjson.Check([]byte(b.String())); !errors.Is(err, strictjson.ErrDuplicateKey) {
		t.Fatalf("Check = %v, want ErrDuplicateKey", err)
	}
}

// TestJCS checks the RFC 8785 canonical form on the examples of its
// appendix and section 3.2.3 (UTF-16 key order, ECMAScript numbers).
func TestJCS(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			`{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`},
		{`[1.0, -0, 100, 1e21, 1e-7, 123e-9]`, `[1,0,100,1e+21,1e-7,1.23e-7]`},
	}
	for _, tt := range tests {
		got, err := canonical.JCS([]byte(tt.in))
		if err != nil {
			t.Fatalf("JCS(%s): %v", tt.in, err)
		}
		if string(got) != tt.want {
			t.Errorf("JCS(%s)\n got: %s\nwant: %s", tt.in, got, tt.want)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/canonical/*.json")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[1e400]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := ack.Canonical(doc)
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Canonical produced invalid JSON %q", got)
		}
		again, err := ack.Canonical(got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("Canonical not idempotent: %q -> %q (%v)", got, again, err)
		}
		if _, err := canonical.JCS(doc); err != nil && !errors.Is(err, canonical.ErrNotFinite) {
			t.Fatalf("JCS rejects what Canonical accepts: %v", err)
		}
	})
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAnIntegerNoFloatHoldsIsCanonicalButNotJCS: Canonical keeps an
// integer of any size exactly, as Python does; JCS, whose numbers are
// doubles, refuses one no float64 holds, with ErrNotFinite and the code
// payload_invalid, as both refuse 1e400. Each doc says so; Canonical's
// said it refused every number no float64 holds.
func TestAnIntegerNoFloatHoldsIsCanonicalButNotJCS(t *testing.T) {
	t.Parallel()
	huge := "1" + strings.Repeat("0", 309) // 10^309 > math.MaxFloat64
	if got, err := ack.Canonical([]byte(`{"n":` + huge + `}`)); err != nil || string(got) != `{"n":`+huge+`}` {
		t.Errorf("Canonical of 10^309 = %.20s…, %v; want it kept exactly", got, err)
	}
	for _, doc := range []string{`{"n":` + huge + `}`, `{"n":-` + huge + `}`, `{"n":1e400}`} {
		if _, err := canonical.JCS([]byte(doc)); !errors.Is(err, canonical.ErrNotFinite) || !errors.Is(err, courier.CodePayloadInvalid) {
			t.Errorf("JCS of %.12s… = %v; want ErrNotFinite, payload_invalid", doc, err)
		}
	}
	if _, err := ack.Canonical([]byte(`{"n":1e400}`)); !errors.Is(err, canonical.ErrNotFinite) {
		t.Errorf("Canonical of 1e400 = %v; want ErrNotFinite", err)
	}
}

package canonical

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/strictjson"
)

// treeForm writes the canonical forms from the parsed tree of a document,
// as Python and JCS did before they wrote from its bytes: the
// reference they are held to.
func treeForm(doc []byte, jcs bool) ([]byte, error) {
	v, err := strictjson.Parse(doc)
	if err != nil {
		return nil, err
	}
	number, compare := appendPythonNumber, bytes.Compare
	if jcs {
		number, compare = appendJCSNumber, compareUTF16
	}
	var write func(dst []byte, v strictjson.Value) ([]byte, error)
	write = func(dst []byte, v strictjson.Value) ([]byte, error) {
		var err error
		switch v.Kind {
		case strictjson.Null:
			return append(dst, "null"...), nil
		case strictjson.True:
			return append(dst, "true"...), nil
		case strictjson.False:
			return append(dst, "false"...), nil
		case strictjson.String:
			return AppendString(dst, v.Text), nil
		case strictjson.Number:
			return number(dst, []byte(v.Text))
		case strictjson.Array:
			dst = append(dst, '[')
			for i, item := range v.Items {
				if i > 0 {
					dst = append(dst, ',')
				}
				if dst, err = write(dst, item); err != nil {
					return nil, err
				}
			}
			return append(dst, ']'), nil
		}
		members := slices.Clone(v.Members)
		slices.SortFunc(members, func(a, b strictjson.Member) int { return compare([]byte(a.Key), []byte(b.Key)) })
		dst = append(dst, '{')
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.Key)
			dst = append(dst, ':')
			if dst, err = write(dst, m.Val); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return write(nil, v)
}

// sameAsTree fails t unless Python and JCS return for doc what the
// tree writer does, bytes and error.
func sameAsTree(t *testing.T, doc []byte) {
	t.Helper()
	for _, form := range []struct {
		name string
		fn   func([]byte) ([]byte, error)
		jcs  bool
	}{{"Canonical", Python, false}, {"JCS", JCS, true}} {
		got, err := form.fn(doc)
		want, wantErr := treeForm(doc, form.jcs)
		if wantErr != nil {
			wantErr = WithCode(wantErr) // with the code Python's errors carry
		}
		if !bytes.Equal(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%s(%q) = %q, %v; from the tree, %q, %v", form.name, doc, got, err, want, wantErr)
		}
	}
}

// randomDocument returns a JSON document of every kind of value, spaced
// out at random, with keys that are out of order, escaped, non-ASCII,
// empty, and now and then repeated.
func randomDocument(r *rand.Rand, depth int) string {
	strs := []string{``, `a`, `b`, `é`, `\u00e9`, `\ud83d\ude00`, `😀`, `\ufb33`, `\"`, `\\`, `\/`, `\n\t\u0001`, `k\u0000`, `€`, `z`}
	nums := []string{`0`, `-0`, `1`, `-12`, `1.0`, `1.5e3`, `1E400`, `-1e-7`, `123456789012345678901234567890`, `0.1`, `4.50`, `1e21`}
	sp := func() string { return []string{"", "", " ", "\n\t ", "\r"}[r.IntN(5)] }
	str := func() string { return `"` + strs[r.IntN(len(strs))] + strs[r.IntN(len(strs))] + `"` }
	n := 4
	if depth > 4 {
		n = 2
	}
	switch k := r.IntN(9); {
	case k == 0 && depth < 6:
		var items []string
		for range r.IntN(5) {
			items = append(items, sp()+randomDocument(r, depth+1)+sp())
		}
		return "[" + strings.Join(items, ",") + "]"
	case k <= 2 && depth < 6:
		var members []string
		for range r.IntN(6) {
			members = append(members, sp()+str()+sp()+":"+sp()+randomDocument(r, depth+1)+sp())
		}
		return "{" + strings.Join(members, ",") + "}"
	case k < n:
		return str()
	case k < 6:
		return nums[r.IntN(len(nums))]
	}
	return []string{"true", "false", "null"}[r.IntN(3)]
}

// TestWriteMatchesTree: Python and JCS, which write from a document's
// bytes, return what writing from its tree returns, byte for byte and
// error for error, on the package's canonical-JSON cases and on random
// documents.
func TestWriteMatchesTree(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../ack/testdata/canonical/*.json")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sameAsTree(t, b)
	}
	r := rand.New(rand.NewPCG(8785, 34))
	for range 20_000 {
		sameAsTree(t, []byte(randomDocument(r, 0)))
	}
}

// FuzzWriteMatchesTree: on any input, Python and JCS return what
// writing from the document's tree returns.
func FuzzWriteMatchesTree(f *testing.F) {
	files, _ := filepath.Glob("../../ack/testdata/canonical/*.json")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	r := rand.New(rand.NewPCG(8785, 35))
	for range 20 {
		f.Add([]byte(randomDocument(r, 0)))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { sameAsTree(t, doc) })
}

// TestWriteBuildsNoTree: the canonical forms of a 1 MiB body of many small
// values cost their output and a copy of an object's members, a few
// megabytes; not a tree of the body, tens of megabytes.
func TestWriteBuildsNoTree(t *testing.T) {
	for _, item := range []string{"0", `{"name":"n","children":[]}`} {
		doc := []byte(`{"idempotency_key":"k","extra":[` + item + strings.Repeat(","+item, (1<<20)/(len(item)+1)) + `]}`)
		for _, form := range []struct {
			name string
			fn   func([]byte) ([]byte, error)
		}{{"Canonical", Python}, {"JCS", JCS}} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := form.fn(doc); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > 4*uint64(len(doc)) {
				t.Errorf("%s of a %d-byte body of %s allocated %d bytes", form.name, len(doc), item, n)
			}
		}
	}
}

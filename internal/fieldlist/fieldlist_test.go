package fieldlist_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/courier-go/courier/internal/fieldlist"
)

func TestCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"short", "items[0].qty", "items[0].qty"},
		{"at the bound", strings.Repeat("k", 256), strings.Repeat("k", 256)},
		{"one byte over", strings.Repeat("k", 257), strings.Repeat("k", 126) + "…" + strings.Repeat("k", 127)},
		{"long", strings.Repeat("k", 900000), strings.Repeat("k", 126) + "…" + strings.Repeat("k", 127)},
		{"a deep path keeps its end", strings.Repeat("children[0].", 50) + "x", strings.Repeat("children[0].", 10) + "childr…en[0]." + strings.Repeat("children[0].", 10) + "x"},
		// 126 bytes would end inside a two-byte é, and 127 from the end
		// begin inside one: the cut keeps whole characters on both sides.
		{"not inside a character", strings.Repeat("é", 200), strings.Repeat("é", 63) + "…" + strings.Repeat("é", 63)},
		{"four-byte characters", strings.Repeat("😀", 100), strings.Repeat("😀", 31) + "…" + strings.Repeat("😀", 32)},
	} {
		got := fieldlist.Cut(tc.path)
		if got != tc.want || len(got) > fieldlist.MaxPathBytes || !utf8.ValidString(got) {
			t.Errorf("%s: Cut = %q (%d bytes), want %q", tc.name, got, len(got), tc.want)
		}
	}
}

// TestFirst: of a list of failing fields First keeps the first Max, in
// their order, cuts a long path in a copy, and counts the others; a list
// within the bounds is the list given.
func TestFirst(t *testing.T) {
	t.Parallel()
	type field struct{ path, rule string }
	pathOf := func(f *field) *string { return &f.path }
	var fields []field
	for i := range 60000 {
		fields = append(fields, field{fmt.Sprintf("u%d", i), "unknown"})
	}
	fields[1].path = strings.Repeat("k", 900000)
	named, left := fieldlist.First(fields, pathOf)
	if len(named) != fieldlist.Max || left != 60000-fieldlist.Max ||
		named[0] != fields[0] || named[1] != (field{fieldlist.Cut(fields[1].path), "unknown"}) || named[99] != (field{"u99", "unknown"}) {
		t.Fatalf("named %d fields (%.40q, %.40q, …), left %d", len(named), named[0], named[1], left)
	}
	if len(fields[1].path) != 900000 {
		t.Fatal("First cut a path of the list it was given")
	}
	within := fields[2:5]
	named, left = fieldlist.First(within, pathOf)
	if left != 0 || len(named) != 3 || &named[0] != &within[0] {
		t.Fatalf("a list within the bounds came back as %q, left %d", named, left)
	}
	if named, left := fieldlist.First[field](nil, pathOf); len(named) != 0 || left != 0 {
		t.Fatalf("no fields came back as %q, left %d", named, left)
	}
}

// TestCompare: indexes compare as numbers, and sorting by Compare gives
// one order whatever order the paths came in.
func TestCompare(t *testing.T) {
	t.Parallel()
	want := []string{"a", "a[1]", "a[2]", "a[2].x", "a[10]", "a[010].a", "a[10].b", "b", "m[k01]", "m[k1]", "m[k2]", "m[x]"}
	for range 50 {
		got := slices.Clone(want)
		rand.Shuffle(len(got), func(i, j int) { got[i], got[j] = got[j], got[i] })
		slices.SortFunc(got, fieldlist.Compare)
		if !slices.Equal(got, want) {
			t.Fatalf("sorted %q, want %q", got, want)
		}
	}
}

// TestBoundsAreTheDocumented: README and the handler and admin docs quote
// the bounds.
func TestBoundsAreTheDocumented(t *testing.T) {
	t.Parallel()
	if fieldlist.Max != 100 || fieldlist.MaxPathBytes != 256 {
		t.Fatalf("Max %d, MaxPathBytes %d: update README.md, handler/doc.go and admin/doc.go", fieldlist.Max, fieldlist.MaxPathBytes)
	}
}

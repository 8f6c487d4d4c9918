package fieldlist_test

import (
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

package canonical

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unicode/utf16"
)

// compareUTF16Encoded is RFC 8785's key order by its definition: encode
// both keys to UTF-16 and compare the code units.
func compareUTF16Encoded(a, b string) int {
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

// TestCompareUTF16MatchesEncoding: compareUTF16 orders every pair as
// comparing the UTF-16 encodings does, on the edges of each UTF-8 length
// and of the surrogate range, runes from U+10000 on against those from
// U+E000 (where code point order and UTF-16 order part), prefixes, empty
// strings, bytes that are not UTF-8, and random strings of all of these.
func TestCompareUTF16MatchesEncoding(t *testing.T) {
	t.Parallel()
	pieces := []string{
		"", "a", "b", "\x00", "\x7f", "\u0080", "é", "\u07ff", "\u0800", "€", "\ud7ff",
		"\ue000", "\uf8ff", "\ufb33", "\ufffd", "\uffff", "\U00010000", "😀", "\U0010ffff",
		"\xff", "\xed\xa0\x80", "\xc3", "\xf0\x9f\x98", // not UTF-8: an encoded surrogate, truncated runes
	}
	var edges []string
	for _, p := range pieces {
		for _, q := range pieces {
			edges = append(edges, p+q, "k"+p+q)
		}
	}
	check := func(a, b string) {
		t.Helper()
		if got, want := compareUTF16([]byte(a), []byte(b)), compareUTF16Encoded(a, b); got != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want %d", a, b, got, want)
		}
	}
	for _, a := range edges {
		for _, b := range edges {
			check(a, b)
		}
	}
	r := rand.New(rand.NewPCG(8785, 16))
	random := func() string {
		var s string
		for range r.IntN(6) {
			s += pieces[r.IntN(len(pieces))]
		}
		return s
	}
	for range 200_000 {
		a := random()
		check(a, a)
		check(a, random())
	}
}

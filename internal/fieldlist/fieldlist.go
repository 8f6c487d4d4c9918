// Package fieldlist bounds the list of failing fields a refusal names. A
// body can fail on every value it holds, under member names its sender
// chose: a list that named every field in full could be several times the
// size of the body, and would be built and written outside the budget that
// bounds what a request may hold in memory. So a refusal names at most Max
// fields, each by a path of at most MaxPathBytes, and says how many failed
// when it names fewer.
package fieldlist

import (
	"cmp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Max is the most fields one refusal names: enough for a sender to mend
// every field of any payload courier's profiles define, and a bounded
// answer (about 30 KB) however many values a body gets wrong.
const Max = 100

// MaxPathBytes is the longest path a refusal names a field by, Marker
// included: longer than any path of a payload's own fields (a
// notification id is at most 256 bytes), so only a name a sender made up
// is cut.
const MaxPathBytes = 256

// Marker ends a path Cut shortened.
const Marker = "…"

// Cut returns path, or where it is longer than MaxPathBytes, its
// beginning and its end with Marker between them, MaxPathBytes at most in
// all, each part whole characters: the end of a deep path names the member
// that failed, its beginning where it is.
func Cut(path string) string {
	if len(path) <= MaxPathBytes {
		return path
	}
	keep := MaxPathBytes - len(Marker)
	head := keep / 2
	for head > 0 && !utf8.RuneStart(path[head]) {
		head--
	}
	tail := len(path) - (keep - head)
	for tail < len(path) && !utf8.RuneStart(path[tail]) {
		tail++
	}
	return path[:head] + Marker + path[tail:]
}

// First returns what a refusal names of fields, the failing fields in
// the order they are listed: the first Max of them, each with the path
// that path reaches in it cut (see Cut), and how many of fields it leaves
// out. Every refusal that names fields names them through First, so the
// fields an error's message names are those its answer lists. fields
// itself is left as it is: the result is a slice of it where no path is
// cut, and a copy where one is.
func First[F any](fields []F, path func(*F) *string) (named []F, left int) {
	named = fields[:min(len(fields), Max):min(len(fields), Max)]
	for i := range named {
		if len(*path(&named[i])) > MaxPathBytes {
			named = slices.Clone(named)
			for j := i; j < len(named); j++ {
				p := path(&named[j])
				*p = Cut(*p)
			}
			break
		}
	}
	return named, len(fields) - len(named)
}

// Compare orders paths as a reader scans them: byte by byte, except that
// runs of digits compare as the numbers they spell, so items[2] comes
// before items[10]. Paths that spell the same numbers differently
// (m[07], m[7]) fall back to their bytes, so Compare is a total order:
// paths sorted by it come out in one order whatever order they went in.
func Compare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			ei, ej := digitsEnd(a, i), digitsEnd(b, j)
			na, nb := strings.TrimLeft(a[i:ei], "0"), strings.TrimLeft(b[j:ej], "0")
			if c := cmp.Compare(len(na), len(nb)); c != 0 {
				return c
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			i, j = ei, ej
			continue
		}
		if a[i] != b[j] {
			return cmp.Compare(a[i], b[j])
		}
		i, j = i+1, j+1
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// digitsEnd returns the index past the run of digits in s that starts at i.
func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

package strictjson

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// object writes an object of members k0, k1, …, each key written with
// an escape when escape says so, its number zero-padded to width digits
// (with 6, the keys are in increasing order), and when dup is not
// negative a key that sorts before them all, then the key of position
// dup again, written the other way.
func object(n, width, dup int, escape func(i int) bool) string {
	key := func(i int, escaped bool) string {
		if escaped {
			return fmt.Sprintf(`"\u006b%0*d"`, width, i) // k
		}
		return fmt.Sprintf(`"k%0*d"`, width, i)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		fmt.Fprintf(&b, `%s:{"k%d":[%d]},`, key(i, escape(i)), i, i) // a member object at the next depth
	}
	if dup >= 0 {
		fmt.Fprintf(&b, `"a":1,%s:0,`, key(dup, !escape(dup)))
	}
	b.WriteString(`"z":true}`)
	return b.String()
}

// TestCheckFindsDuplicateKeys: a key written twice is refused wherever
// in an object of any size it is, escaped or not, in key order or not,
// and keys of sibling objects, which reuse one depth's keys, are not
// taken for duplicates.
func TestCheckFindsDuplicateKeys(t *testing.T) {
	escapes := map[string]func(int) bool{
		"plain":   func(int) bool { return false },
		"escaped": func(int) bool { return true },
		"mixed":   func(i int) bool { return i%3 == 1 },
	}
	for name, escape := range escapes {
		for _, width := range []int{0, 6} {
			for _, n := range []int{1, 2, 15, 16, 17, 18, 31, 32, 33, 64, 65, 100, 1000, 5000} {
				siblings := `[` + object(n, width, -1, escape) + `,` + object(n+1, width, -1, escape) + `,` + object(n, width, -1, escape) + `]`
				if err := Check([]byte(siblings)); err != nil {
					t.Fatalf("%s, width %d, %d members in three siblings: %v", name, width, n, err)
				}
				for _, dup := range []int{0, n / 2, n - 1} {
					doc := `[` + object(n, width, -1, escape) + `,` + object(n, width, dup, escape) + `]`
					if err := Check([]byte(doc)); !errors.Is(err, ErrDuplicateKey) {
						t.Fatalf("%s, width %d, %d members, k%d twice: %v", name, width, n, dup, err)
					}
				}
			}
		}
	}
	for _, doc := range []string{`{"a":1,"b":2,"b":3}`, `{"a":1,"a":2}`, `{"":1,"":2}`, `{"b":1,"c":2,"a":3,"c":4}`} {
		if err := Check([]byte(doc)); !errors.Is(err, ErrDuplicateKey) {
			t.Fatalf("%s: %v", doc, err)
		}
	}
}

// TestCheckAllocatesPerObjectNotPerKey: the duplicate check of a large
// object allocates as its table grows, not for each key.
func TestCheckAllocatesPerObjectNotPerKey(t *testing.T) {
	const members = 20_000
	doc := []byte(object(members, 0, -1, func(int) bool { return false }))
	allocs := testing.AllocsPerRun(5, func() {
		if err := Check(doc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > members/100 {
		t.Fatalf("Check of an object of %d members allocates %.0f times", members, allocs)
	}
}

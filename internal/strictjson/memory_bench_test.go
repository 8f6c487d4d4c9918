package strictjson

import (
	"strings"
	"testing"
)

// bodyShapes returns documents of about size bytes in the shapes a
// receiver may be sent: a flat array of small numbers, an array of small
// objects, and objects nested 41 deep (82 levels of JSON), many times over.
func bodyShapes(size int) []struct {
	name string
	doc  []byte
} {
	const child = `{"name":"n","children":[]}`
	chain := strings.Repeat(`{"name":"n","children":[`, 40) + child + strings.Repeat(`]}`, 40)
	fill := func(item string) []byte {
		n := max(1, (size-2)/(len(item)+1))
		return []byte("[" + item + strings.Repeat(","+item, n-1) + "]")
	}
	return []struct {
		name string
		doc  []byte
	}{
		{"flat-numbers", fill("0")},
		{"small-objects", fill(child)},
		{"deep-objects", fill(chain)},
	}
}

// BenchmarkBodyMemory measures what the strict check and the name check
// of a receiver's body cost, per shape of a 1 MiB body: run with
// -benchmem.
func BenchmarkBodyMemory(b *testing.B) {
	for _, s := range bodyShapes(1 << 20) {
		if err := Check(s.doc); err != nil {
			b.Fatal(err)
		}
		b.Run("Parse/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(s.doc)))
			for b.Loop() {
				if _, err := Parse(s.doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("Check/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(s.doc)))
			for b.Loop() {
				if err := Check(s.doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("CheckNames/"+s.name, func(b *testing.B) {
			b.SetBytes(int64(len(s.doc)))
			for b.Loop() {
				CheckNames(s.doc, []benchNode(nil))
			}
		})
	}
}

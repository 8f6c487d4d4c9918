package strictjson

import (
	"strconv"
	"strings"
	"testing"
)

type benchNode struct {
	Name     string      `json:"name"`
	Children []benchNode `json:"children"`
}

// nestedDocument returns a document of about size bytes that nests levels
// benchNode objects, one inside the other, with the bulk at the innermost
// level: one long name, or many small children, each a value the walk
// follows.
func nestedDocument(levels, size int, manyChildren bool) []byte {
	var b strings.Builder
	for range levels - 1 {
		b.WriteString(`{"name":"n","children":[`)
	}
	room := size - b.Len()*2
	if manyChildren {
		const child = `{"name":"n","children":[]}`
		b.WriteString(`{"name":"n","children":[` + child)
		b.WriteString(strings.Repeat(","+child, (room-len(child))/(len(child)+1)))
		b.WriteString(`]}`)
	} else {
		b.WriteString(`{"name":"` + strings.Repeat("x", room) + `","children":[]}`)
	}
	for range levels - 1 {
		b.WriteString(`]}`)
	}
	return []byte(b.String())
}

// BenchmarkCheckNamesDepth checks the names of documents of one size at
// one level of benchNode and at 49 (98 levels of JSON). The walk visits
// each value once and spells out no path it does not report, so depth
// costs next to nothing.
func BenchmarkCheckNamesDepth(b *testing.B) {
	for _, shape := range []struct {
		name         string
		manyChildren bool
	}{{"long-name", false}, {"many-children", true}} {
		for _, size := range []int{64 << 10, 1 << 20} {
			for _, levels := range []int{1, 49} {
				doc := nestedDocument(levels, size, shape.manyChildren)
				if err := Check(doc); err != nil {
					b.Fatal(err)
				}
				b.Run(shape.name+"/size="+strconv.Itoa(size>>10)+"KiB/depth="+strconv.Itoa(levels), func(b *testing.B) {
					b.SetBytes(int64(len(doc)))
					for b.Loop() {
						if variants, unknown := CheckNames(doc, (*benchNode)(nil)); variants != nil || unknown != nil {
							b.Fatal(variants, unknown)
						}
					}
				})
			}
		}
	}
}

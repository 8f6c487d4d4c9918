package jsonbody_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/jsonbody"
)

// node is a recursive request type: each level of a nested body decodes
// into a struct.
type node struct {
	Name     string `json:"name"`
	Children []node `json:"children"`
}

// nestedBody returns a body of about size bytes that nests levels node
// objects, one inside the other, with the bulk in the innermost name: the
// same bytes, only deeper.
func nestedBody(levels, size int) []byte {
	var b strings.Builder
	for range levels - 1 {
		b.WriteString(`{"name":"n","children":[`)
	}
	pad := size - b.Len()*2
	b.WriteString(`{"name":"` + strings.Repeat("x", pad) + `","children":[]}`)
	for range levels - 1 {
		b.WriteString(`]}`)
	}
	return []byte(b.String())
}

// BenchmarkDecodeDepth decodes bodies of one size at one level and at 49
// (98 levels of JSON, within strictjson.MaxDepth). Reading the body is
// linear in its size, so depth costs next to nothing.
func BenchmarkDecodeDepth(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, levels := range []int{1, 49} {
			body := nestedBody(levels, size)
			b.Run("size="+strconv.Itoa(size>>10)+"KiB/depth="+strconv.Itoa(levels), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					var v node
					if !jsonbody.Decode(httptest.NewRecorder(), body, &v, false) {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}

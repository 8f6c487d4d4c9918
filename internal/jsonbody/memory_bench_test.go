package jsonbody_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/jsonbody"
)

// BenchmarkDecodeMemory decodes 1 MiB bodies as a receiver does, each
// one member "items" holding a flat array of small numbers (into []int),
// an array of small objects, or objects nested 41 deep, many times over
// (into []node). Run with -benchmem.
func BenchmarkDecodeMemory(b *testing.B) {
	const child = `{"name":"n","children":[]}`
	chain := strings.Repeat(`{"name":"n","children":[`, 40) + child + strings.Repeat(`]}`, 40)
	fill := func(item string) []byte {
		n := max(1, ((1<<20)-12)/(len(item)+1))
		return []byte(`{"items":[` + item + strings.Repeat(","+item, n-1) + "]}")
	}
	for _, s := range []struct {
		name string
		body []byte
		v    func() any
	}{
		{"flat-numbers", fill("0"), func() any {
			return new(struct {
				Items []int `json:"items"`
			})
		}},
		{"small-objects", fill(child), func() any {
			return new(struct {
				Items []node `json:"items"`
			})
		}},
		{"deep-objects", fill(chain), func() any {
			return new(struct {
				Items []node `json:"items"`
			})
		}},
	} {
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(s.body)))
			for b.Loop() {
				if w := httptest.NewRecorder(); !jsonbody.Decode(w, s.body, s.v(), false) {
					b.Fatal("refused: ", w.Body.String())
				}
			}
		})
	}
}

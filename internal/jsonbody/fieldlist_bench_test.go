package jsonbody_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/jsonbody"
)

// failingNote fails on every element of Items and every value of M.
type failingNote struct {
	ID    string         `json:"id" validate:"required"`
	Items []failingItem  `json:"items" validate:"dive"`
	M     map[string]int `json:"m" validate:"dive,gt=0"`
}

type failingItem struct {
	Qty int `json:"qty" validate:"gt=0"`
}

// failingBodies are bodies of about 1 MB that fail on very many fields:
// 100,000 invalid elements, 50,000 invalid map values, 60,000 unknown
// members, and one unknown member with a 900 KB name.
func failingBodies() []struct {
	name string
	body []byte
} {
	var items, m, unknown strings.Builder
	items.WriteString(`{"id":"n1","items":[{"qty":0}`)
	m.WriteString(`{"id":"n1","m":{"k0":0`)
	unknown.WriteString(`{"id":"n1"`)
	for i := 1; i < 100000; i++ {
		items.WriteString(`,{"qty":0}`)
		if i < 50000 {
			fmt.Fprintf(&m, `,"xxxxxxxxxx%d":0`, i)
		}
		if i < 60000 {
			fmt.Fprintf(&unknown, `,"u%d":1`, i)
		}
	}
	items.WriteString("]}")
	m.WriteString("}}")
	unknown.WriteString("}")
	return []struct {
		name string
		body []byte
	}{
		{"100k-invalid-items", []byte(items.String())},
		{"50k-invalid-map-values", []byte(m.String())},
		{"60k-unknown-members", []byte(unknown.String())},
		{"900KB-member-name", []byte(`{"id":"n1","` + strings.Repeat("k", 900000) + `":1}`)},
	}
}

// BenchmarkDecodeFailingEverywhere refuses each of failingBodies as a
// receiver does, answer written: what refusing a body that fails on every
// value costs. Run with -benchmem.
func BenchmarkDecodeFailingEverywhere(b *testing.B) {
	for _, s := range failingBodies() {
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(s.body)))
			for b.Loop() {
				w := httptest.NewRecorder()
				if jsonbody.Decode(w, s.body, new(failingNote), false) {
					b.Fatal("accepted")
				}
				b.ReportMetric(float64(w.Body.Len()), "answer-bytes")
			}
		})
	}
}

package canonical

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkJCSManyKeys writes the JCS form of one object of many
// non-ASCII keys, at two sizes, and its Python form (ack.Canonical's) for scale: the two
// differ only in how keys compare (UTF-16 units against bytes), once per
// step of the sort.
func BenchmarkJCSManyKeys(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20} {
		var sb strings.Builder
		sb.WriteString("{")
		for i := 0; sb.Len() < size-64; i++ {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `"é%07d":0`, (i*7919)%10_000_000)
		}
		sb.WriteString("}")
		doc := []byte(sb.String())
		for _, form := range []struct {
			name string
			fn   func([]byte) ([]byte, error)
		}{{"JCS", JCS}, {"Canonical", Python}} {
			b.Run("size="+strconv.Itoa(size>>10)+"KiB/form="+form.name, func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					if _, err := form.fn(doc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkJCSMemory writes the JCS form of 1 MiB bodies as the reporting
// receiver does, whose bulk is a flat array of small numbers or an array
// of small objects, under a member the receiver does not know. Run with
// -benchmem: the tree of the body is most of what it costs.
func BenchmarkJCSMemory(b *testing.B) {
	for _, s := range []struct{ name, item string }{
		{"flat-numbers", "0"},
		{"small-objects", `{"name":"n","children":[]}`},
	} {
		doc := []byte(`{"idempotency_key":"k","extra":[` + s.item +
			strings.Repeat(","+s.item, (1<<20)/(len(s.item)+1)) + `]}`)
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := JCS(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJCSSmall writes the JCS form of a delivery report of the size
// the reporting receiver is mostly sent, a few hundred bytes.
func BenchmarkJCSSmall(b *testing.B) {
	doc := []byte(`{"idempotency_key":"4f0c3a9e-7b1d-4c2e-9a8f-1d2e3f4a5b6c","media_buy_id":"mb_123",` +
		`"notification_type":"scheduled","sequence_number":7,"reporting_period":{"start":"2026-12-04T00:00:00Z","end":"2026-12-04T01:00:00Z"},` +
		`"media_buy_deliveries":[{"media_buy_id":"mb_123","status":"active","totals":{"impressions":125000,"spend":1830.5,"clicks":412},` +
		`"by_package":[{"package_id":"p1","impressions":80000,"spend":1200.25},{"package_id":"p2","impressions":45000,"spend":630.25}]}]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := JCS(doc); err != nil {
			b.Fatal(err)
		}
	}
}

package admin

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// BenchmarkAdminManyEndpoints is what an outbox keeping 50,000 disabled
// endpoints costs the Admin's answers that list them: per answer, the
// time, the bytes sent (bytes/answer) and the allocations.
func BenchmarkAdminManyEndpoints(b *testing.B) {
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "outbox.db"), store.Config{Durability: store.DurabilityRelaxed})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 50_000 {
		if err := s.Endpoints.Disable(b.Context(), fmt.Sprintf("https://subscriber-%d.example/hooks", i)); err != nil {
			b.Fatal(err)
		}
	}
	ab := setupAdminConfig(b, Config{Store: s})
	for _, p := range []string{"/", "/api/endpoints", "/api/endpoints?limit=1000"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			var n int64
			for b.Loop() {
				resp, err := ab.client.Get(ab.server.URL + adminPrefix + p)
				if err != nil {
					b.Fatal(err)
				}
				n, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("GET %s: %d", p, resp.StatusCode)
				}
			}
			b.ReportMetric(float64(n), "bytes/answer")
		})
	}
}

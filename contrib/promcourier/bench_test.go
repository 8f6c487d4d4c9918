package promcourier_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// BenchmarkScrapeManyEndpoints is what one scrape costs an outbox keeping
// many disabled endpoints (subscribers gone, waiting for an operator) and
// a few with series of their own (limited): per scrape, the time, the
// series written (series/scrape) and the allocations. A scrape should
// cost what its series cost, whatever the endpoints kept.
func BenchmarkScrapeManyEndpoints(b *testing.B) {
	for _, n := range []int{5_000, 50_000} {
		b.Run(fmt.Sprintf("disabled=%d", n), func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "outbox.db"), store.Config{Durability: store.DurabilityRelaxed})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range n {
				if err := s.Endpoints.Disable(b.Context(), fmt.Sprintf("https://subscriber-%d.example/hooks", i)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 10 {
				if err := s.Endpoints.SetLimits(b.Context(), fmt.Sprintf("https://limited-%d.example/hooks", i), store.Limits{MaxInFlight: 4}); err != nil {
					b.Fatal(err)
				}
			}
			c := promcourier.New()
			c.Watch(s)
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			b.ReportAllocs()
			series := 0
			for b.Loop() {
				families, err := reg.Gather()
				if err != nil {
					b.Fatal(err)
				}
				series = 0
				for _, f := range families {
					series += len(f.GetMetric())
				}
			}
			b.ReportMetric(float64(series), "series/scrape")
		})
	}
}

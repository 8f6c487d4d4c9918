package admin

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// BenchmarkAdminManyEndpoints is what an outbox keeping 1,000 or 50,000
// disabled endpoints, each with a contract pin, costs the Admin's answers
// that list them: per answer, the time, the bytes sent (bytes/answer) and
// the allocations. The answers are the same size at either, and a JSON
// page, read from the store's indexes from its cursor on, costs the same;
// the ops page's ranking reads every endpoint and pin in the database.
func BenchmarkAdminManyEndpoints(b *testing.B) {
	for _, n := range []int{1_000, 50_000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "outbox.db"), store.Config{Durability: store.DurabilityRelaxed})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for i := range n {
				url := fmt.Sprintf("https://subscriber-%d.example/hooks", i)
				if err := s.Endpoints.Disable(b.Context(), url); err != nil {
					b.Fatal(err)
				}
				if err := s.Contracts.Pin(b.Context(), url, strings.Repeat("a", 64)); err != nil {
					b.Fatal(err)
				}
			}
			ab := setupAdminConfig(b, Config{Store: s})
			for _, p := range []string{"/", "/api/endpoints", "/api/endpoints?limit=1000", "/api/contracts"} {
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
		})
	}
}

// BenchmarkAdminDelivery is what the answers about one delivery cost, by
// the size of its payload (which none of them shows): per answer, the
// time and the allocations.
func BenchmarkAdminDelivery(b *testing.B) {
	for _, size := range []int{64 << 10, store.MaxPayloadSize} {
		b.Run(fmt.Sprintf("payload=%dKiB", size>>10), func(b *testing.B) {
			ab := setupAdminConfig(b, Config{})
			payload := append(append([]byte(`{"blob":"`), bytes.Repeat([]byte("x"), size-16)...), `"}`...)
			e, err := ab.store.Outbox.Enqueue(b.Context(), ab.store.DB(), store.EnqueueParams{
				NotificationID: "big", Endpoint: "https://receiver.example/hooks", Payload: payload})
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range []string{"/api/deliveries/", "/deliveries/"} {
				b.Run(p, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						resp, err := ab.client.Get(ab.server.URL + adminPrefix + p + fmt.Sprint(e.ID))
						if err != nil {
							b.Fatal(err)
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != 200 {
							b.Fatalf("GET %s: %d", p, resp.StatusCode)
						}
					}
				})
			}
		})
	}
}

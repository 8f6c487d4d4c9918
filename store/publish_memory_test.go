package store_test

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// BenchmarkPublishBuiltPayloads measures what a Publish with a Build
// holds: every payload Build made, until the last is written. It reports
// the live heap (MiB) as the last subscription's payload is built, for
// 32 subscriptions of 1 MiB payloads, and that as a multiple of one
// payload. Run it alone: go test -run XXX -bench PublishBuilt -benchtime
// 1x ./store.
func BenchmarkPublishBuiltPayloads(b *testing.B) {
	const subscriptions, size = 32, 1 << 20
	s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "courier.db"), store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for i := range subscriptions {
		if _, err := s.Subscriptions.Create(b.Context(), s.DB(), store.SubscriptionParams{
			Tenant: "acme", Endpoint: "https://r" + strconv.Itoa(i) + ".example/h", EventTypes: []string{"*"}, KeyID: "k",
		}); err != nil {
			b.Fatal(err)
		}
	}
	var base, held uint64
	n := 0
	build := func(store.Subscription, string) ([]byte, error) {
		n++
		if n%subscriptions == 0 { // the last: what the publish holds
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			held = ms.HeapAlloc - min(base, ms.HeapAlloc)
		}
		p := append([]byte(`{"data":"`), bytes.Repeat([]byte("x"), size-len(`{"data":""}`))...)
		return append(p, `"}`...), nil
	}
	i := 0
	for b.Loop() {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base = ms.HeapAlloc
		i++
		if _, err := s.Outbox.Publish(b.Context(), s.DB(), store.PublishParams{
			Tenant: "acme", EventType: "order.paid", EventID: "e-" + strconv.Itoa(i), Build: build,
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(held)/(1<<20), "MiB-held")
	b.ReportMetric(float64(held)/size, "payloads-held")
}

// BenchmarkClaimLargePayloads measures a claim of 16 deliveries by the
// size of their payloads, up to the largest (4 MiB), plain and sealed:
// on SQLite the claim's write transaction writes each leased row whole,
// its payload too.
func BenchmarkClaimLargePayloads(b *testing.B) {
	const n = 16
	for _, bc := range []struct {
		name   string
		size   int
		sealed bool
	}{{"1KiB", 1 << 10, false}, {"1MiB", 1 << 20, false}, {"4MiB", store.MaxPayloadSize, false}, {"4MiB-sealed", store.MaxPayloadSize, true}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := store.Config{}
			if bc.sealed {
				key, err := store.NewPayloadKey("pk1", bytes.Repeat([]byte{7}, 32))
				if err != nil {
					b.Fatal(err)
				}
				cfg.Encryption = &store.Encryption{Current: "pk1", Keys: []store.PayloadKey{key}}
			}
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "courier.db"), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			payload := append([]byte(`{"data":"`), bytes.Repeat([]byte("x"), bc.size-len(`{"data":""}`))...)
			payload = append(payload, `"}`...)
			for i := range n {
				if _, err := s.Outbox.Enqueue(b.Context(), s.DB(), store.EnqueueParams{
					NotificationID: "big-" + strconv.Itoa(i), Endpoint: "https://r.example/h", Payload: payload,
				}); err != nil {
					b.Fatal(err)
				}
			}
			out := protocol.For(s)
			b.SetBytes(int64(n * bc.size))
			for b.Loop() {
				got, err := out.Claim(b.Context(), protocol.ClaimParams{Owner: "bench", Limit: n, Lease: time.Minute})
				if err != nil || len(got) != n {
					b.Fatalf("Claim = %d, %v; want %d", len(got), err, n)
				}
				b.StopTimer()
				leases := make([]protocol.Lease, len(got))
				for i, c := range got {
					leases[i] = c.Lease
				}
				if _, err := out.Release(b.Context(), leases...); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

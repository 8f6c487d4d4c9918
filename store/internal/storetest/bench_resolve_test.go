package storetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/store"
)

// BenchmarkResolve is what Endpoints.Resolve costs an operator's tool
// that names an endpoint by its reference again and again (the admin's
// pages of one endpoint's deliveries, each resolving it), beside n
// endpoints: half with a breaker record (disabled), half known only by
// their deliveries. known resolves one of the first, outbox one of the
// others, found only in the outbox.
func BenchmarkResolve(b *testing.B) {
	for _, e := range engines {
		for _, n := range []int{5_000, 50_000} {
			b.Run(fmt.Sprintf("%s/endpoints=%d", e.name, n), func(b *testing.B) {
				s, db := migratedStore(b, e.open)
				ctx := context.Background()
				tx, err := db.BeginTxx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				put := db.Rebind(`INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, reason, updated_at) VALUES (?, 'disabled', 0, 'endpoint_disabled', ?)`)
				for i := range n / 2 {
					if _, err := tx.ExecContext(ctx, put, fmt.Sprintf("https://gone-%d.example/h", i), time.Now().UnixMicro()); err != nil {
						b.Fatal(err)
					}
					if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "d", Endpoint: fmt.Sprintf("https://quiet-%d.example/h", i), Payload: benchPayload}); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
				for name, url := range map[string]string{"known": fmt.Sprintf("https://gone-%d.example/h", n/4), "outbox": fmt.Sprintf("https://quiet-%d.example/h", n/4)} {
					b.Run(name, func(b *testing.B) {
						ref := endpoint.Ref(url)
						for b.Loop() {
							if got, err := s.Endpoints.Resolve(ctx, ref); err != nil || got != url {
								b.Fatalf("Resolve = %q, %v; want %q", got, err, url)
							}
						}
					})
				}
			})
		}
	}
}

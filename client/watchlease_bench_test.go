package client

import (
	"context"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/protocol"
)

// BenchmarkWatchLease is what watching an attempt's lease costs one that
// ends in time (the watch started and stopped), against a context
// deadline's cost (BenchmarkContextDeadline), which every attempt pays
// for its Timeout already.
func BenchmarkWatchLease(b *testing.B) {
	w := &Worker{}
	c := protocol.Claimed{Lease: protocol.Lease{DeliveryID: 1, Attempt: 1}, Endpoint: "https://example.com/hooks"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		w.watchLease(ctx, c, time.Minute).Stop()
	}
}

func BenchmarkContextDeadline(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, cancel := context.WithTimeout(ctx, time.Minute)
		cancel()
	}
}

package promcourier_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// A Collector in the application's own registry: the store's hook counts
// enqueues, the worker's its attempts, and the gauges read the outbox at
// each scrape.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "promcourier-example")
	defer os.RemoveAll(dir)
	signer := couriertest.StandardWebhooksKeys("example").Signer
	registry := prometheus.NewRegistry()
	mux := http.NewServeMux()

	// readme:promcourier
	metrics := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{Hook: metrics.StoreHook})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	metrics.Watch(s) // gauges: outbox depth by status, oldest due age, leases, breakers
	registry.MustRegister(metrics)
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Hook: metrics.WorkerHook})
	if err != nil {
		panic(err)
	}
	// Receivers: handler.ReceiverConfig{…, Hook: metrics.ReceiverHook}
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	// readme:end

	tx, _ := s.Begin(ctx)
	s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)})
	tx.Commit()
	_ = w
	err = testutil.GatherAndCompare(registry, strings.NewReader(`
# HELP courier_enqueued_total Deliveries written to the outbox (counted at enqueue, before the caller's commit).
# TYPE courier_enqueued_total counter
courier_enqueued_total 1
# HELP courier_outbox_due Pending or retrying deliveries due now.
# TYPE courier_outbox_due gauge
courier_outbox_due 1
`), "courier_enqueued_total", "courier_outbox_due")
	fmt.Println(err)
	// Output: <nil>
}

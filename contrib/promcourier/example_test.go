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
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// A Collector in the application's own registry: the store's hook counts
// enqueues, the worker's its attempts, and the gauges read the outbox at
// each scrape.
func Example() {
	dir, err := os.MkdirTemp("", "promcourier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	registry := prometheus.NewRegistry()
	err = serveMetrics(context.Background(), dir, couriertest.StandardWebhooksKeys("example").Signer, registry, http.NewServeMux(),
		func(ctx context.Context, s *store.Store) error {
			tx, err := s.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)}); err != nil {
				return err
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			return testutil.GatherAndCompare(registry, strings.NewReader(`
# HELP courier_enqueued_total Deliveries written to the outbox (counted at enqueue, before the caller's commit).
# TYPE courier_enqueued_total counter
courier_enqueued_total 1
# HELP courier_outbox_due Pending or retrying deliveries due now, those of a disabled endpoint or one cooling down aside (store.Health's Due).
# TYPE courier_outbox_due gauge
courier_outbox_due 1
`), "courier_enqueued_total", "courier_outbox_due")
		})
	fmt.Println(err)
	// Output: <nil>
}

// serveMetrics is the README's sample: the collector fed by the store's
// and the worker's hooks, in registry, served on mux. Then it runs use
// with the store open, as the application would go on to serve.
func serveMetrics(ctx context.Context, dir string, signer signature.Signer, registry *prometheus.Registry, mux *http.ServeMux,
	use func(context.Context, *store.Store) error) error {
	// readme:promcourier
	metrics := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{Hook: metrics.StoreHook})
	if err != nil {
		return err
	}
	defer s.Close()
	metrics.Watch(s) // gauges: outbox depth by status, oldest due age, leases, breakers
	if err := registry.Register(metrics); err != nil {
		return err
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Hook: metrics.WorkerHook})
	if err != nil {
		return err
	}
	// Receivers: handler.ReceiverConfig{…, Hook: metrics.ReceiverHook}
	mux.Handle("GET /metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	// readme:end
	_ = w
	return use(ctx, s)
}

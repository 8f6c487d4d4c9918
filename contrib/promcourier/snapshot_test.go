package promcourier_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/contrib/promcourier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestGaugesAgreeWhileDeliveriesMove: each scrape's outbox gauges say one
// state of the outbox, while the application enqueues and a worker
// claims and settles. The store's clock stands still and nothing waits
// for room, a key or a later time (every delivery the receiver refuses
// fails for good), so in any one state every pending delivery is due:
// courier_outbox_due equals courier_outbox_deliveries{status="pending"}.
// Read outside one snapshot, an enqueue or a claim committing between the
// reads made them differ.
func TestGaugesAgreeWhileDeliveriesMove(t *testing.T) {
	ctx := t.Context()
	t0 := time.Now()
	c := promcourier.New()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c.Watch(s)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	keys := couriertest.StandardWebhooksKeys("s")
	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer,
		Transport: roundTripper(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 422, Body: http.NoBody, Header: http.Header{}}, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	moving, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var enqueued atomic.Int64
	var enqueueErr error
	wg.Go(func() { w.Work(moving) })
	wg.Go(func() {
		for i := 0; moving.Err() == nil; i++ {
			p := store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: "https://refusing.example/hooks", Payload: []byte(`{}`)}
			if _, err := s.Outbox.Enqueue(moving, s.DB(), p); err != nil {
				if moving.Err() == nil {
					enqueueErr = err
				}
				return
			}
			enqueued.Add(1)
		}
	})
	var bad []string
	scrapes := 0
	for ; scrapes < 200 || enqueued.Load() < 200; scrapes++ {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		pending, due := gauge(families, "courier_outbox_deliveries", string(courier.StatusPending)), gauge(families, "courier_outbox_due", "")
		if pending < 0 || due < 0 {
			t.Fatalf("scrape %d has no outbox gauges", scrapes)
		}
		if due != pending {
			bad = append(bad, fmt.Sprintf("due %v, pending %v", due, pending))
		}
	}
	stop()
	wg.Wait()
	if enqueueErr != nil {
		t.Fatal(enqueueErr)
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d scrapes disagreed with themselves (%d enqueued meanwhile), the first: %s", len(bad), scrapes, enqueued.Load(), bad[0])
	}
}

// gauge returns the value of the gauge name with the status label status
// ("" for a gauge without labels) in a scrape, -1 when it has none.
func gauge(families []*dto.MetricFamily, name, status string) float64 {
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			label := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "status" {
					label = l.GetValue()
				}
			}
			if label == status {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

package prometheus_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/courier-go/courier/prometheus"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The adapter turns courier's event hooks into a /metrics page: pass its
// hooks to the store, the worker and the receivers, and mount it.
func ExampleNew() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "courier-example")
	defer os.RemoveAll(dir)
	m := prometheus.New()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{Hook: m.StoreHook})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	// client.Config{Hook: m.WorkerHook} and handler configs' Hook: m.ReceiverHook likewise.

	tx, _ := s.Begin(ctx)
	s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: "https://r.example/hooks", Payload: []byte(`{}`)})
	tx.Commit()

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, "courier_enqueued_total") {
			fmt.Println(line)
		}
	}
	// Output: courier_enqueued_total 1
}

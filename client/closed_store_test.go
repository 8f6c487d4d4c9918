package client_test

import (
	"log/slog"
	"net/http"
	"testing"

	"github.com/courier-go/courier/client"
)

// TestASettleOnAClosedStoreIsNotTriedAgain: the Store is closed while an
// attempt is in flight. The settle can never land, so the worker does not
// try it again for the rest of the lease (which held Run and Stop up to a
// minute): Work returns at once.
func TestASettleOnAClosedStoreIsNotTriedAgain(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	b.enqueue(t, "n-1", `{}`)

	done := make(chan error, 1)
	go func() {
		_, err := b.worker.Work(t.Context())
		done <- err
	}()
	<-arrived
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Work = %v", err)
	}
	if n := len(logs.lines("worker: store write failed, trying again")); n != 0 {
		t.Errorf("the settle was tried again %d times on a closed Store", n)
	}
}

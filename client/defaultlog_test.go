package client_test

import (
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logtest"
)

// TestWorkerWithoutALoggerIsHeardWhenADeliveryFails: a worker given no
// Logger logs through slog's default logger, from Warn up: a delivery
// that fails for good (the receiver refused it: Warn) is heard with no
// setup, and nothing below Warn is (the attempt before it, answered 503
// and retried, is logged at Debug). Before, a delivery failed and no log
// told of it.
func TestWorkerWithoutALoggerIsHeardWhenADeliveryFails(t *testing.T) {
	logs := logtest.AsDefault(t)
	var answered atomic.Int32
	b := setupWorker(t, func(w http.ResponseWriter, _ *http.Request) {
		if answered.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
	}, nil)
	b.enqueue(t, "n-1", `{"n":1}`)
	if e := b.work(t); e.Status != courier.StatusRetryWait {
		t.Fatalf("event %+v, want the delivery retrying", e)
	}
	b.clock.Advance(time.Hour)
	if e := b.work(t); e.Status != courier.StatusFailed {
		t.Fatalf("event %+v, want the delivery failed", e)
	}
	if got := logs.Messages(slog.LevelWarn); !slices.Equal(got, []string{"worker: delivery failed"}) {
		t.Fatalf("default logger got %q from Warn up, want the failed delivery", got)
	}
	if got := logs.Messages(slog.LevelDebug); len(got) != 1 {
		t.Fatalf("default logger got %q, want the Warn line alone", got)
	}
}

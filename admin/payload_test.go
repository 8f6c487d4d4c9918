package admin

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"

	"github.com/courier-go/courier/store"
)

// TestADeliveryIsAnsweredWithoutReadingItsPayload: the answers about one
// delivery show no payload, and read none: a delivery of 4 MiB (the most
// a payload may be) costs each of them far less than its payload. They
// read the whole row, payload included (and opened it when sealed), for
// a view that shows its digest: every look at a large delivery allocated
// its payload, twice for a sealed one.
func TestADeliveryIsAnsweredWithoutReadingItsPayload(t *testing.T) {
	ab := setupAdminConfig(t, Config{Authorize: allowAll})
	payload := append(append([]byte(`{"notification_id":"big","blob":"`), bytes.Repeat([]byte("x"), store.MaxPayloadSize-64)...), `"}`...)
	e, err := ab.store.Outbox.Enqueue(t.Context(), ab.store.DB(), store.EnqueueParams{
		NotificationID: "big", Endpoint: "https://receiver.example/hooks", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHandler(Config{Store: ab.store, Authorize: allowAll})
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(e.ID, 10)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/api/deliveries/" + id, http.StatusOK},
		{http.MethodGet, "/deliveries/" + id, http.StatusOK},
		{http.MethodPost, "/api/deliveries/" + id + "/redrive", http.StatusNotFound}, // not failed: looked up to say so
		{http.MethodPost, "/api/deliveries/" + id + "/cancel", http.StatusOK},        // last: answered with the delivery cancelled
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, nil))
		runtime.ReadMemStats(&after)
		if w.Code != c.status {
			t.Fatalf("%s %s = %d %s, want %d", c.method, c.path, w.Code, w.Body, c.status)
		}
		if bytes.Contains(w.Body.Bytes(), []byte("xxxx")) {
			t.Errorf("%s %s shows the payload", c.method, c.path)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s %s allocated %d bytes for a delivery of %d: it read the payload", c.method, c.path, n, len(payload))
		}
	}
}

package client_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logkey"
)

// TestAQuarantineAtClaimIsLogged: a claim that finds a delivery's stored
// bytes altered (or unreadable under the Store's keys) quarantines it
// rather than send it, and the worker says so at Error, with the
// delivery, its endpoint's ref and the code: it logged nothing, and an
// operator without a Hook or metrics learned of it from Health alone. No
// byte of the payload is logged, and nothing is sent.
func TestAQuarantineAtClaimIsLogged(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	var requests atomic.Int32
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusOK)
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	id := b.enqueue(t, "n-1", `{"secret-marker":1}`)
	if _, err := b.store.DB().ExecContext(t.Context(), `UPDATE courier_outbox_payload SET payload = CAST('{"secret-marker":2}' AS BLOB) WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.worker.Work(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent for an altered delivery, want none", n)
	}
	lines := logs.lines("worker: delivery quarantined at claim, not sent")
	if len(lines) != 1 {
		t.Fatalf("logged %d quarantine lines, want 1; all: %+v", len(lines), logs.lines(""))
	}
	l := lines[0]
	if l.Level != slog.LevelError || l.Attrs[logkey.Delivery] != strconv.FormatInt(id, 10) ||
		l.Attrs[logkey.Code] != string(courier.CodeIntegrity) || l.Attrs[logkey.EndpointRef] == "" {
		t.Fatalf("quarantine line %+v, want Error with the delivery, its endpoint_ref and code %s", l, courier.CodeIntegrity)
	}
	for _, r := range logs.lines("") {
		for k, v := range r.Attrs {
			if strings.Contains(v, "secret-marker") {
				t.Fatalf("%q logged the payload in %s", r.Message, k)
			}
		}
	}
}

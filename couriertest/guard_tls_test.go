package couriertest_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestGuardOverAnHTTPTestTLSServer: Guard's documentation, as written, for
// a receiver started with httptest.NewTLSServer: the worker delivers to it
// over https, trusting the test server's certificate and no other.
func TestGuardOverAnHTTPTestTLSServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(srv.Close)
	g := couriertest.Guard(srv.URL) // srv started with httptest.NewTLSServer
	g.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig

	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`), Profile: ack.ProfileNone}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("orders").Signer, Transport: g.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Outbox.Lookup(ctx, "n-1", srv.URL+"/hooks"); err != nil || d.Status != courier.StatusSucceeded {
		t.Fatalf("delivery to the httptest TLS server: %+v, %v; want succeeded", d, err)
	}
}

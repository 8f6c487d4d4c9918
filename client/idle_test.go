package client_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/store"
)

// TestStopClosesTheIdleConnections: once a stopped worker's Runs and Works
// have returned, it sends nothing more, so the keep-alive connections its
// transport holds idle (two goroutines each, for up to 90 seconds) are
// closed. They stayed open after Stop returned: a process that stops a
// worker and checks for leaked goroutines (goleak) found them, and one
// that makes and stops workers (one per tenant) piled them up.
func TestStopClosesTheIdleConnections(t *testing.T) {
	t.Parallel()
	closed := make(chan struct{}, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	b := setupWorker(t, statusHandler(200, ""), nil)
	events := make(chan client.Event, 1)
	w, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b),
		Transport: loopbackGuard(t, srv.URL).Transport(),
		Hook:      func(e client.Event) { events <- e }})
	if err != nil {
		t.Fatal(err)
	}
	enqueueAll(t, b.store, store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/hooks", Payload: []byte(`{}`)})
	if n, err := w.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want 1 delivery", n, err)
	}
	if e := <-events; e.Status != courier.StatusSucceeded {
		t.Fatalf("delivery %s/%s, want succeeded", e.Status, e.Code)
	}
	if err := w.Stop(t.Context()); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	// The server closes no idle connection of its own (no IdleTimeout):
	// only the worker closing it ends it.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker's idle connection to the receiver was still open 10s after Stop returned")
	}
}

package client_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// TestManyEndpointsHoldBoundedConnections: a worker that runs for months
// delivers to endpoints on ever more hosts (a subscriber's new domain, a
// tenant's), each host with a keep-alive pool of its own in the
// transport. What it keeps of them is bounded by the transport's idle
// limit, not by how many hosts it has ever sent to: after deliveries to
// thousands of hosts, the receiver sees no more connections held open
// than that limit, and the worker's process holds no goroutine per host.
//
// Not parallel: it counts the process's goroutines.
func TestManyEndpointsHoldBoundedConnections(t *testing.T) {
	const hosts = 5000
	var open atomic.Int64
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
			select {
			case closed <- struct{}{}:
			default: // one pending is enough to look again
			}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	s := openOutbox(t)
	guard := loopbackGuard(t, srv.URL)
	loopback := netip.MustParseAddr("127.0.0.1")
	guard.Resolve = func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{loopback}, nil }
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	ps := make([]store.EnqueueParams, hosts)
	for i := range ps {
		ps[i] = plain(fmt.Sprintf("http://h%d.example:%d/hooks/%d", i, port, i), fmt.Sprintf("n-%d", i))
	}
	enqueueAll(t, s, ps...)

	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	var delivered atomic.Int64
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Transport: guard.Transport(), Concurrency: 32,
		Hook: func(e client.Event) {
			if e.Status == courier.StatusSucceeded {
				delivered.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Stop(context.Background()) })
	for delivered.Load() < hosts {
		if n, err := w.Work(t.Context()); n == 0 || err != nil {
			t.Fatalf("Work = %d, %v with %d of %d delivered", n, err, delivered.Load(), hosts)
		}
	}
	// The transport keeps at most 256 connections idle (guardMaxIdleConns),
	// closing the oldest; the server hears of each a moment later.
	for open.Load() > 256 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d connections held open to the receiver after deliveries to %d hosts, want at most the idle limit, 256", open.Load(), hosts)
		}
	}
	// Each connection held is two goroutines of the worker's transport
	// and one of the server's.
	if grown := runtime.NumGoroutine() - before; grown > 3*256+200 {
		t.Errorf("%d goroutines more after deliveries to %d hosts, want bounded by the idle limit", grown, hosts)
	}
}

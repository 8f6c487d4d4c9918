package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGuardHTTP2IdleConnectionsBoundedAcrossHosts: a worker delivering
// to endpoints on many hosts over https speaks HTTP/2 to most of them,
// one connection per host. The transport's limit on idle connections
// (guardMaxIdleConns) is net/http's, which HTTP/2 connections escape:
// each stayed open until it had been idle for 90 seconds, so a worker
// sending to thousands of hosts a minute held thousands of sockets,
// goroutines and TLS states, and each receiver a connection it did not
// need. Past the limit, the idle ones are closed.
func TestGuardHTTP2IdleConnectionsBoundedAcrossHosts(t *testing.T) {
	t.Parallel()
	const hosts = 3 * guardMaxIdleConns
	var open atomic.Int64
	closed := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }))
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
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	loopback := netip.MustParseAddr("127.0.0.1")
	gt := Guard{
		AllowPorts: []uint16{uint16(port)}, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{loopback}, nil },
	}.Transport().(*guardTransport)
	gt.base.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone() // trusts the test server
	gt.base.TLSClientConfig.ServerName = "example.com"                                         // its certificate's name, whatever host is dialed
	c := &http.Client{Transport: gt}
	t.Cleanup(c.CloseIdleConnections)
	post := func(host string) {
		t.Helper()
		resp, err := c.Post(fmt.Sprintf("https://%s:%d/hook", host, port), "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "HTTP/2.0" {
			t.Fatalf("answer %q, %v; want one over HTTP/2", b, err)
		}
	}
	for i := range hosts {
		post(fmt.Sprintf("h%d.example", i))
		post("hot.example") // a host sent to all along is still answered
	}
	// The server hears of a connection closed a moment after the client
	// closed it.
	for open.Load() > guardMaxIdleConns+1 {
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d connections held open after requests to %d hosts, want at most %d", open.Load(), hosts+1, guardMaxIdleConns+1)
		}
	}
}

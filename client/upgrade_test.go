package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
)

// TestGuardUpgradedConnectionsAreNotTakenForIdle: a connection switched
// to another protocol (101, a WebSocket say) is in use for as long as its
// body, the connection itself, is open. The guard's transport counted it
// among the connections open but not among the requests in flight, as if
// it were idle: with more than guardMaxIdleConns of them open, each new
// connection had the transport close every idle one, and a host sent to
// over and over was dialed anew for each request, its keep-alive lost.
func TestGuardUpgradedConnectionsAreNotTakenForIdle(t *testing.T) {
	t.Parallel()
	var dialed atomic.Int64 // connections the server accepted
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			return // a plain answer, its connection kept alive
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"); err != nil {
			return
		}
		if rw.Flush() != nil {
			return
		}
		_, _ = io.Copy(io.Discard, rw) // until the client closes it
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	loopback := netip.MustParseAddr("127.0.0.1")
	gt := Guard{
		AllowHTTP: true, AllowPorts: []uint16{uint16(port)}, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolve: func(context.Context, string) ([]netip.Addr, error) { return []netip.Addr{loopback}, nil },
	}.Transport().(*guardTransport)
	c := &http.Client{Transport: gt}
	t.Cleanup(c.CloseIdleConnections)

	for i := range guardMaxIdleConns + 8 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("http://up%d.example:%d/", i, port), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("answered %d, want 101", resp.StatusCode)
		}
		if _, ok := resp.Body.(io.ReadWriteCloser); !ok {
			t.Fatalf("a 101's body is a %T, not the connection (io.ReadWriteCloser)", resp.Body)
		}
		t.Cleanup(func() { resp.Body.Close() })
	}

	get := func(host string) {
		t.Helper()
		resp, err := c.Get(fmt.Sprintf("http://%s:%d/", host, port))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		resp.Body.Close()
	}
	get("hot.example")
	before := dialed.Load()
	for i := range 10 {
		get(fmt.Sprintf("h%d.example", i)) // a new host: a new connection
		get("hot.example")                 // kept alive since its first request
	}
	if redialed := dialed.Load() - before - 10; redialed != 0 {
		t.Fatalf("a host sent to 10 times more was dialed %d times anew beside %d open upgraded connections: they were taken for idle", redialed, guardMaxIdleConns+8)
	}
}

package client

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// silencingProxy forwards TCP connections to target until silence is
// called: from then on, what the connections made so far carry either
// way is read and dropped, their sockets kept open, as by a receiver's
// process (or the backend behind a load balancer) that hung while its
// kernel still acknowledges. Connections made later are forwarded. gone
// receives once for each connection whose client hung up.
type silencingProxy struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	silent  int // connections accepted up to silence
	n       int
	gone    chan struct{}
	stopped bool
}

func newSilencingProxy(t *testing.T, target string) *silencingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silencingProxy{ln: ln, gone: make(chan struct{}, 100)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.stopped = true
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.stopped {
				p.mu.Unlock()
				c.Close()
				up.Close()
				return
			}
			p.n++
			n := p.n
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn, client bool) {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					k, err := src.Read(buf)
					if err != nil {
						if client {
							p.gone <- struct{}{}
						}
						return
					}
					p.mu.Lock()
					silent := n <= p.silent
					p.mu.Unlock()
					if !silent {
						dst.Write(buf[:k])
					}
				}
			}
			wg.Add(2)
			go pipe(up, c, true)
			go pipe(c, up, false)
		}
	}()
	return p
}

// silence makes every connection made so far silent.
func (p *silencingProxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.silent = p.n
}

// TestGuardDropsASilentHTTP2Connection: a receiver's HTTP/2 connection
// goes silent (its process hung, its kernel still acknowledging) while
// connections made afresh would be answered. Each attempt on it ends at
// its Timeout, and the transport put the next one on the same connection,
// again and again: over HTTP/2 a request cut short resets its stream, not
// the connection, so every later attempt to the host went into the silent
// one, while over HTTP/1 the next attempt dials anew. The guard's
// transport pings a connection that has read nothing for a while and
// closes it when the ping goes unanswered, so a later attempt dials anew.
func TestGuardDropsASilentHTTP2Connection(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p := newSilencingProxy(t, srv.Listener.Addr().String())
	port := p.ln.Addr().(*net.TCPAddr).Port
	gt := Guard{AllowPorts: []uint16{uint16(port)}, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}.Transport().(*guardTransport)
	gt.base.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone() // trusts the test server
	c := &http.Client{Transport: gt}
	t.Cleanup(c.CloseIdleConnections)
	// post sends one request, given timeout: a short one where no answer
	// is the point (the silent connection), a long one where an answer is
	// (a TLS handshake under -race on a loaded machine may take seconds).
	post := func(timeout time.Duration) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://127.0.0.1:"+strconv.Itoa(port)+"/hook", strings.NewReader(`{}`))
		if err != nil {
			return "", err
		}
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if proto, err := post(time.Minute); err != nil || proto != "HTTP/2.0" {
		t.Fatalf("first request: %q, %v; want an answer over HTTP/2", proto, err)
	}
	p.silence()
	if _, err := post(300 * time.Millisecond); err == nil {
		t.Fatal("a request on the silent connection was answered")
	}
	limit := guardHTTP2PingIdle + guardHTTP2PingTimeout + 10*time.Second
	select {
	case <-p.gone:
	case <-time.After(limit):
		t.Fatalf("the silent HTTP/2 connection still held %v after its last answer: every attempt to its host is sent into it", limit)
	}
	if proto, err := post(time.Minute); err != nil || proto != "HTTP/2.0" {
		t.Fatalf("once the silent connection was dropped: %q, %v; want an answer on a new connection", proto, err)
	}
}

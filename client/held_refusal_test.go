package client_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
)

// TestARefusalWhoseBodyNeverEndsFreesTheSlotAtOnce: a receiver answers 503
// with the headers and a few bytes of its body, then holds the connection
// open, the body never over. The 503 is the answer: the attempt is
// settled as a retry with code receiver_unavailable (HTTP 503) within a
// moment of it, and its slot freed, not held for the attempt's whole
// Timeout by a read of the body, be it the one for the receiver's code
// (a problem+json body) or the one that would let the connection be used
// again; its Event's Duration says as much. Over HTTP/1 and HTTP/2.
func TestARefusalWhoseBodyNeverEndsFreesTheSlotAtOnce(t *testing.T) {
	t.Parallel()
	const timeout = 10 * time.Second
	const head = `{"code":"in_pro` // of a body that never ends
	http1 := func(t *testing.T, contentType string) *workerBundle {
		return rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
			io.WriteString(c, "HTTP/1.1 503 Busy\r\nContent-Type: "+contentType+"\r\nContent-Length: 1000\r\n\r\n"+head)
			io.Copy(io.Discard, c) // holds the connection open until the worker hangs up
		}, func(c *client.Config) { c.Timeout = timeout })
	}
	http2 := func(t *testing.T, contentType string) *workerBundle {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.ReadAll(r.Body)
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, head)
			w.(http.Flusher).Flush()
			<-r.Context().Done() // the rest never comes
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, func(c *client.Config) {
			c.Transport = srv.Client().Transport
			c.Timeout = timeout
		})
		b.server.URL = srv.URL
		return b
	}
	for _, proto := range []struct {
		name  string
		setup func(*testing.T, string) *workerBundle
	}{{"HTTP/1.1", http1}, {"HTTP/2", http2}} {
		for _, contentType := range []string{"text/plain", "application/problem+json"} {
			t.Run(proto.name+" "+contentType, func(t *testing.T) {
				t.Parallel()
				b := proto.setup(t, contentType)
				id := b.enqueue(t, "n-1", `{"n":1}`)
				began := time.Now()
				e := b.work(t)
				took := time.Since(began)
				if took >= timeout/2 || e.Duration >= timeout/2 {
					t.Errorf("the attempt held its slot %v (Event.Duration %v) for a 503 whose body never ends, with a Timeout of %v: the body is waited for", took, e.Duration, timeout)
				}
				d := b.get(t, id)
				if d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeReceiverUnavailable || d.LastHTTPStatus != http.StatusServiceUnavailable {
					t.Errorf("delivery %s/%s (HTTP %d), want retry_wait/receiver_unavailable (HTTP 503)", d.Status, d.LastErrorCode, d.LastHTTPStatus)
				}
				if e.Code != courier.CodeReceiverUnavailable || e.HTTPStatus != http.StatusServiceUnavailable || e.RemoteCode != "" {
					t.Errorf("event %s (HTTP %d, remote %q), want receiver_unavailable (HTTP 503), no remote code", e.Code, e.HTTPStatus, e.RemoteCode)
				}
			})
		}
	}
}

// TestARefusalSentWholeKeepsItsConnection: the bounds on the reads of a
// refusal's body cost nothing to a receiver that sends it whole with its
// headers: its code is kept, and its connection serves the next attempt.
func TestARefusalSentWholeKeepsItsConnection(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	var mu sync.Mutex
	conns := map[string]bool{} // the worker's ends of the connections, as the receiver sees them
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		if n.Add(1)%2 == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"code":"in_progress"}`)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, strings.Repeat("busy ", 400))
	}, nil)
	for i, remote := range []courier.Code{courier.CodeInProgress, "", courier.CodeInProgress} {
		b.enqueue(t, "n-"+string(rune('a'+i)), `{}`)
		if e := b.work(t); e.Code != courier.CodeReceiverUnavailable || e.RemoteCode != remote {
			t.Fatalf("attempt %d: event %s (remote %q), want receiver_unavailable (remote %q)", i+1, e.Code, e.RemoteCode, remote)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Fatalf("three refusals sent whole took %d connections, want one", len(conns))
	}
}

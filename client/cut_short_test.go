package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
)

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAShutdownCuttingAnAckShortIsWorkerStopped: the receiver has answered
// 200 and sent part of its Ack when Run's context ends (a hard shutdown).
// As an attempt cut short before its answer, it is a retry with code
// worker_stopped, due again at once, and no failure of the endpoint's: not
// network_error after a backoff, counted against the endpoint's breaker.
func TestAShutdownCuttingAnAckShortIsWorkerStopped(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	b := rawBundle(t, func(c net.Conn, r *http.Request, body []byte) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"schema\":")
		io.Copy(io.Discard, c) // holds back the rest of the Ack
	}, func(c *client.Config) {
		c.Timeout = 10 * time.Second
		base := c.Transport
		c.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := base.RoundTrip(r)
			if err == nil {
				arrived <- struct{}{} // the worker holds the 200's headers
			}
			return resp, err
		})
		c.Backoff = client.ExponentialBackoff(time.Minute, time.Hour, 0)
	})
	id := b.enqueue(t, "n-1", `{"n":1}`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- b.worker.Run(ctx) }()
	<-arrived
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d := b.get(t, id)
	h, err := b.store.Endpoints.Get(t.Context(), d.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeWorkerStopped || d.NextAttemptAt.After(b.clock.Now()) || h.ConsecutiveFailures != 0 {
		t.Fatalf("an Ack cut short by a shutdown left the delivery %s/%s (http %d) due in %v, the endpoint with %d failures; want retry_wait/worker_stopped due at once, no failure",
			d.Status, d.LastErrorCode, d.LastHTTPStatus, d.NextAttemptAt.Sub(b.clock.Now()), h.ConsecutiveFailures)
	}
}

// TestAnAckTrickledPastTheTimeoutOverHTTP2IsATimeout: over HTTP/2 as over
// HTTP/1 (TestHostileReceivers), an Ack still arriving when the attempt's
// Timeout ends is a retry with code timeout, and Config.Classify hears the
// deadline: not the error of the body the worker closed at that moment.
// The Ack never ends, so any Timeout ends it; the Timeout is long enough
// for the 200's headers to come first (a TLS handshake and the HTTP/2
// preface) on a loaded machine.
func TestAnAckTrickledPastTheTimeoutOverHTTP2IsATimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		a := ack.New(r.Header.Get("webhook-id"), body).Marshal()
		w.Write(a[:1])
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	seen := make(chan error, 1)
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, func(c *client.Config) {
		c.Transport = srv.Client().Transport
		c.Timeout = 2 * time.Second
		c.Classify = func(r *http.Response, err error) client.Verdict {
			seen <- err
			return client.DefaultClassify(r, err)
		}
	})
	b.server.URL = srv.URL
	id := b.enqueue(t, "n-1", `{"n":1}`)
	e := b.work(t)
	if err := <-seen; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Classify heard %v, want the attempt's deadline", err)
	}
	d := b.get(t, id)
	if d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeTimeout || e.Code != courier.CodeTimeout || d.LastHTTPStatus != http.StatusOK {
		t.Fatalf("an HTTP/2 Ack cut by the Timeout left the delivery %s/%s (http %d), event %s; want retry_wait/timeout, http 200", d.Status, d.LastErrorCode, d.LastHTTPStatus, e.Code)
	}
}

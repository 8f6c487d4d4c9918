// Package rawhttp serves a handler on a loopback port and sends it
// requests written byte for byte (framing, repeated or missing headers,
// lying lengths), for the fuzz targets that hold courier's handlers to
// hostile requests. A panic of the handler is recorded before net/http
// recovers it, so that a target can fail on it.
package rawhttp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"testing"
	"time"
)

// Server serves one handler until the test that started it ends.
type Server struct {
	// Addr is the server's host:port.
	Addr string

	mu     sync.Mutex
	panics []string
}

// Serve serves the handler build makes, given the server's origin
// ("http://host:port"), until tb ends.
func Serve(tb testing.TB, build func(origin string) http.Handler) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String()}
	h := build("http://" + s.Addr)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				s.mu.Lock()
				s.panics = append(s.panics, fmt.Sprintf("%v\n%s", v, debug.Stack()))
				s.mu.Unlock()
				panic(v)
			}
		}()
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tb.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// NoPanic fails tb if the handler panicked.
func (s *Server) NoPanic(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.panics) > 0 {
		tb.Fatalf("the handler panicked: %s", s.panics[0])
	}
}

// Framings of a Request's body other than a Content-Length.
const (
	Chunked  = -1 // Transfer-Encoding: chunked, the body in one chunk
	Unframed = -2 // neither header: the body follows the headers
)

// Request is a request as it is written on the connection.
type Request struct {
	Method, Target string // Target: the request-target, "/…"
	Header         http.Header
	Body           []byte
	// Length is the Content-Length sent (it may lie: one longer than the
	// body ends the connection's writes after it), or Chunked, or
	// Unframed.
	Length int
}

// RoundTrip writes r on a new connection, after the request line, Host
// and "Connection: close", exactly as given, and reads the answer within
// timeout. tb fails if no answer comes (or the handler panicked).
func (s *Server) RoundTrip(tb testing.TB, r Request, timeout time.Duration) (status int, header http.Header, body []byte) {
	tb.Helper()
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", r.Method, r.Target, s.Addr)
	for name, vs := range r.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", name, v)
		}
	}
	switch r.Length {
	case Chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if len(r.Body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(r.Body), r.Body)
		}
		b.WriteString("0\r\n\r\n")
	case Unframed:
		b.WriteString("\r\n")
		b.Write(r.Body)
	default:
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", r.Length)
		b.Write(r.Body)
	}
	// The write may fail once the server has answered and closed: the
	// answer is still there to read.
	_, _ = conn.Write(b.Bytes())
	if r.Length > len(r.Body) {
		_ = conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: r.Method})
	if err != nil {
		s.NoPanic(tb)
		tb.Fatalf("no answer to %s %s %q: %v", r.Method, r.Target, r.Body, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, resp.Header, out
}

package middleware_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/testmain"
)

// Servers, lingering discards and their shutdown watchers all run
// goroutines: none may outlive the tests, and a PostgreSQL server the
// tests started stops with them.
func TestMain(m *testing.M) { testmain.Main(m) }

// problemDoc is the problem+json body every refusal carries.
type problemDoc struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Code   courier.Code `json:"code"`
	Detail string       `json:"detail"`
}

// post sends body to url. A chunked request carries no Content-Length, so
// the server learns the body's length only by reading it. prepare, if not
// nil, adjusts the request before it is sent.
func post(t *testing.T, c *http.Client, url string, body []byte, chunked bool, prepare func(*http.Request)) *http.Response {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = struct{ io.Reader }{rd} // hide the length from net/http
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if chunked {
		req.ContentLength = -1
	}
	if prepare != nil {
		prepare(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readProblem decodes resp as a problem+json body with the given status.
func readProblem(t *testing.T, status int, header http.Header, body []byte) problemDoc {
	t.Helper()
	if ct := header.Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("Content-Type = %q, want %q (body %q)", ct, problem.ContentType, body)
	}
	var p problemDoc
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode problem %q: %v", body, err)
	}
	if p.Status != status {
		t.Errorf("problem status = %d, want the response's %d", p.Status, status)
	}
	return p
}

// readAll returns the whole body of resp.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return b
}

// mustPanic runs f and fails unless it panics.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("did not panic")
		}
	}()
	f()
}

// watchdog bounds every raw connection of a test: a connection the server
// should have answered or closed, and has not by then, fails the test
// instead of hanging it.
const watchdog = 20 * time.Second

// rawConn is a client on a bare TCP connection, for what net/http's client
// will not do: send a whole request before reading anything, stall mid-body,
// trickle.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, srv *httptest.Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(watchdog)); err != nil {
		t.Fatal(err)
	}
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// head is a POST's request line and headers: with a Content-Length when
// length >= 0, chunked otherwise, and extra header lines.
func head(length int64, extra ...string) []byte {
	var b strings.Builder
	b.WriteString("POST / HTTP/1.1\r\nHost: courier.test\r\nContent-Type: application/json\r\n")
	if length >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", length)
	} else {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// chunk encodes p as one chunk of a chunked body; an empty p is the end.
func chunk(p []byte) []byte {
	return append(append(fmt.Appendf(nil, "%x\r\n", len(p)), p...), "\r\n"...)
}

// readResponse reads one response and its whole body.
func (c *rawConn) readResponse(t *testing.T) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return resp, body
}

// waitClosed reads until the server closes the connection (EOF or a
// reset) and fails if the watchdog fires first or the server sends more.
func (c *rawConn) waitClosed(t *testing.T) {
	t.Helper()
	n, err := io.Copy(io.Discard, c.r)
	if n > 0 {
		t.Errorf("the server sent %d bytes more", n)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after %v", watchdog)
	}
	if err != nil && !isClosedErr(err) {
		t.Fatalf("read: %v", err)
	}
}

// wantProblem checks that resp is a problem with status and code.
func wantProblem(t *testing.T, resp *http.Response, body []byte, status int, code courier.Code) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if p := readProblem(t, status, resp.Header, body); p.Code != code {
		t.Errorf("code = %q, want %q", p.Code, code)
	}
}

// isClosedErr reports whether err is the peer closing a connection with a
// reset, which is as closed as an EOF.
func isClosedErr(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

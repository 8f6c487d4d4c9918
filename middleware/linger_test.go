package middleware_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

// uploadCase is a request sent whole, body and all, before its client
// reads a byte of the answer: what Python's urllib, Node's http and any
// client sending Connection: close do.
type uploadCase struct {
	name    string
	size    int
	chunked bool
	close   bool // the request says Connection: close
}

// uploadWhole sends tc to srv tries times, each on a new connection, and
// checks every answer is a problem with status and code, followed by the
// connection's close.
func uploadWhole(t *testing.T, srv *httptest.Server, tc uploadCase, tries, status int, code courier.Code) {
	t.Helper()
	body := bytes.Repeat([]byte("x"), tc.size)
	var extra []string
	if tc.close {
		extra = append(extra, "Connection: close")
	}
	length := int64(tc.size)
	if tc.chunked {
		length = -1
		body = append(chunk(body), chunk(nil)...)
	}
	for try := range tries {
		c := dialRaw(t, srv)
		if _, err := c.Write(head(length, extra...)); err != nil {
			t.Fatalf("try %d: write head: %v", try, err)
		}
		if _, err := c.Write(body); err != nil {
			t.Fatalf("try %d: write body: %v (the server hung up on an upload instead of answering it)", try, err)
		}
		resp, got := c.readResponse(t)
		wantProblem(t, resp, got, status, code)
		if !resp.Close {
			t.Errorf("try %d: the answer does not say the connection closes", try)
		}
		c.waitClosed(t)
		c.Close()
	}
}

// Finding B: ReadBody answered 413 without reading the rest and net/http
// closed the connection, so a client still uploading saw a reset instead
// of the 413.
func TestOverLimitBodyStillGets413(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	tests := []uploadCase{
		{name: "2 MiB", size: 2 << 20},
		{name: "2 MiB, Connection: close", size: 2 << 20, close: true},
		{name: "16 MiB", size: 16 << 20},
		{name: "16 MiB, Connection: close", size: 16 << 20, close: true},
		// No length up front: the 413 comes after reading past the limit.
		{name: "2 MiB, chunked", size: 2 << 20, chunked: true},
		{name: "2 MiB, chunked, Connection: close", size: 2 << 20, chunked: true, close: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := readBodyServer(t, middleware.BodyLimits{MaxBytes: limit}, nil)
			uploadWhole(t, srv, tc, 20, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
		})
	}
}

// A request refused over the Budget is answered just as surely.
func TestOverBudgetUploadStillGets503(t *testing.T) {
	t.Parallel()
	for _, close := range []bool{false, true} {
		t.Run("close="+map[bool]string{false: "no", true: "yes"}[close], func(t *testing.T) {
			t.Parallel()
			budget := middleware.NewBudget(4 << 20)
			if !budget.Reserve(budget.Size()) { // every byte in flight elsewhere
				t.Fatal("Reserve failed on an empty budget")
			}
			srv, _ := readBodyServer(t, middleware.BodyLimits{MaxBytes: 4 << 20, Budget: budget}, nil)
			uploadWhole(t, srv, uploadCase{size: 2 << 20, close: close}, 20, http.StatusServiceUnavailable, courier.CodeServerBusy)
		})
	}
}

// A client that never finishes sending an over-limit body is cut off at
// LingerTimeout, however steadily it trickles.
func TestOverLimitLingerEndsAtTimeBound(t *testing.T) {
	t.Parallel()
	const linger = 300 * time.Millisecond
	srv, results := readBodyServer(t, middleware.BodyLimits{MaxBytes: 1 << 10, LingerTimeout: linger}, nil)
	c := dialRaw(t, srv)
	start := time.Now()
	if _, err := c.Write(append(head(2<<20), bytes.Repeat([]byte("x"), 4<<10)...)); err != nil {
		t.Fatal(err)
	}
	stopTrickle := trickle(c)
	t.Cleanup(stopTrickle)

	resp, body := c.readResponse(t) // sent before the discard starts
	wantProblem(t, resp, body, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
	c.waitClosed(t)
	if took := time.Since(start); took < linger {
		t.Errorf("closed after %v, before the linger bound %v", took, linger)
	}
	if got := <-results; got.ok || got.status != http.StatusRequestEntityTooLarge {
		t.Errorf("ReadBody = %+v, want a refusal with 413", got)
	}
}

// What is discarded is bounded in bytes too: past LingerBytes the
// connection closes long before LingerTimeout. The client sends 16 times
// LingerBytes of the 32 MiB it declares and then stalls, so the body
// never ends by itself: only the byte bound closes the connection.
func TestOverLimitLingerEndsAtByteBound(t *testing.T) {
	t.Parallel()
	srv, results := readBodyServer(t, middleware.BodyLimits{MaxBytes: 1 << 10, LingerBytes: 64 << 10, LingerTimeout: time.Hour}, nil)
	c := dialRaw(t, srv)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		c.Write(append(head(32<<20), make([]byte, 1<<20)...)) // may fail once the server hangs up
	}()
	// The 413 comes first; the close may turn into a reset before it is
	// read. The deadline bounds a failure: a discard past LingerBytes
	// would wait for the rest for an hour.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c.r)
	if err != nil && !isClosedErr(err) {
		t.Fatalf("the connection is still open after 16 times LingerBytes: %v", err)
	}
	if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 413 ")) {
		t.Errorf("the server sent %q, want a 413 or nothing", got)
	}
	if got := <-results; got.ok || got.status != http.StatusRequestEntityTooLarge {
		t.Errorf("ReadBody = %+v, want a refusal with 413", got)
	}
	c.Close()
	<-wrote
}

// A server shutting down does not wait for a discard to end.
func TestOverLimitLingerEndsOnShutdown(t *testing.T) {
	t.Parallel()
	srv, results := readBodyServer(t, middleware.BodyLimits{MaxBytes: 1 << 10, LingerTimeout: time.Hour}, nil)
	c := dialRaw(t, srv)
	if _, err := c.Write(append(head(2<<20), bytes.Repeat([]byte("x"), 4<<10)...)); err != nil {
		t.Fatal(err)
	}
	resp, body := c.readResponse(t) // the handler is discarding now, for up to an hour
	wantProblem(t, resp, body, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)

	ctx, cancel := context.WithTimeout(t.Context(), watchdog)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v (it waited for the discard)", err)
	}
	c.waitClosed(t)
	if got := <-results; got.ok || got.status != http.StatusRequestEntityTooLarge {
		t.Errorf("ReadBody = %+v, want a refusal with 413", got)
	}
}

// A client that asked for 100-continue sends no body after a 413, so
// there is nothing to discard and nothing to wait for.
func TestOverLimitWithExpectContinueIsNotDiscarded(t *testing.T) {
	t.Parallel()
	srv, results := readBodyServer(t, middleware.BodyLimits{MaxBytes: 1 << 10, LingerTimeout: time.Hour}, nil)
	c := dialRaw(t, srv)
	if _, err := c.Write(head(2<<20, "Expect: 100-continue")); err != nil {
		t.Fatal(err)
	}
	resp, body := c.readResponse(t)
	wantProblem(t, resp, body, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
	c.waitClosed(t)
	if got := <-results; got.ok || got.status != http.StatusRequestEntityTooLarge {
		t.Errorf("ReadBody = %+v, want a refusal with 413", got)
	}
}

// trickle writes a byte to c every 10 ms until c fails or stop is called;
// stop returns once it has stopped.
func trickle(c *rawConn) (stop func()) {
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	return func() { close(quit); <-stopped }
}

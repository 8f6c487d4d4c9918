package middleware_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
)

func TestReadBody(t *testing.T) {
	t.Parallel()
	const limit = 16
	tests := []struct {
		name     string
		size     int
		chunked  bool
		wantCode int
		wantCap  int // the buffer read into: what was reserved
	}{
		{name: "under", size: limit - 1, wantCode: http.StatusOK, wantCap: limit - 1},
		{name: "exactly at", size: limit, wantCode: http.StatusOK, wantCap: limit},
		{name: "under, chunked", size: 3, chunked: true, wantCode: http.StatusOK, wantCap: limit},
		{name: "exactly at, chunked", size: limit, chunked: true, wantCode: http.StatusOK, wantCap: limit},
		{name: "empty", size: 0, wantCode: http.StatusOK, wantCap: 0},
		{name: "over, Content-Length", size: limit + 1, wantCode: http.StatusRequestEntityTooLarge},
		// The length is unknown until read: the read itself finds it too large.
		{name: "over, chunked", size: limit + 1, chunked: true, wantCode: http.StatusRequestEntityTooLarge},
		{name: "far over, chunked", size: 64 << 10, chunked: true, wantCode: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			budget := middleware.NewBudget(1 << 20)
			var done atomic.Bool
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, ok := middleware.ReadBody(w, r, middleware.BodyLimits{MaxBytes: limit, Budget: budget})
				if !ok {
					return
				}
				done.Store(true)
				w.Header().Set("X-Seen-Content-Length", strconv.FormatInt(r.ContentLength, 10))
				w.Header().Set("X-Cap", strconv.Itoa(cap(body)))
				w.Write(body)
			})
			srv := httptest.NewServer(next)
			t.Cleanup(srv.Close)

			sent := bytes.Repeat([]byte("x"), tt.size)
			resp := post(t, srv.Client(), srv.URL, sent, tt.chunked, nil)
			got := readAll(t, resp)

			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, tt.wantCode, got)
			}
			srv.Close() // waits for the handler
			if n := budget.InUse(); n != 0 {
				t.Errorf("budget in use after the request = %d, want 0", n)
			}
			if tt.wantCode != http.StatusOK {
				if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeBodyTooLarge {
					t.Errorf("code = %q, want %q", p.Code, courier.CodeBodyTooLarge)
				}
				if done.Load() {
					t.Error("the handler went on with a body over the limit")
				}
				return
			}
			if !bytes.Equal(got, sent) {
				t.Errorf("read %q, want %q", got, sent)
			}
			wantCL := strconv.Itoa(tt.size)
			if tt.chunked {
				wantCL = "-1"
			}
			if cl := resp.Header.Get("X-Seen-Content-Length"); cl != wantCL {
				t.Errorf("ContentLength %s, want %s", cl, wantCL)
			}
			if c := resp.Header.Get("X-Cap"); c != strconv.Itoa(tt.wantCap) {
				t.Errorf("read into a buffer of cap %s, want exactly the reservation, %d", c, tt.wantCap)
			}
		})
	}
}

func TestReadBodyHandBuiltRequests(t *testing.T) {
	t.Parallel()
	withLength := func(body string, n int64) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.ContentLength = n
		return r
	}
	outer := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader("hello")))
	outer.ContentLength = -1
	outer.Body = http.MaxBytesReader(httptest.NewRecorder(), outer.Body, 3)
	tests := []struct {
		name     string
		req      *http.Request
		max      int64
		want     string
		wantCode int // 0: ReadBody succeeds
	}{
		{name: "fits", req: httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte("hello"))), max: 5, want: "hello"},
		{name: "no body", req: httptest.NewRequest(http.MethodPost, "/", nil), max: 5, want: ""},
		{name: "nil body", req: &http.Request{Method: http.MethodPost, Header: http.Header{}}, max: 5, want: ""},
		{name: "over", req: httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte("hello!"))), max: 5, wantCode: http.StatusRequestEntityTooLarge},
		{name: "over an outer MaxBytesReader", req: outer, max: 5, wantCode: http.StatusRequestEntityTooLarge},
		{name: "unreadable", req: httptest.NewRequest(http.MethodPost, "/", failingReader{}), max: 5, wantCode: http.StatusBadRequest},
		{name: "shorter than its Content-Length", req: withLength("hi", 4), max: 5, wantCode: http.StatusBadRequest},
		{name: "longer than its Content-Length", req: withLength("hello", 2), max: 5, wantCode: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			budget := middleware.NewBudget(16)
			rec := httptest.NewRecorder()
			body, ok := middleware.ReadBody(rec, tt.req, middleware.BodyLimits{MaxBytes: tt.max, Budget: budget})
			if n := budget.InUse(); n != 0 {
				t.Errorf("budget in use after ReadBody = %d, want 0", n)
			}
			if tt.wantCode == 0 {
				if !ok || string(body) != tt.want || body == nil {
					t.Fatalf("ReadBody = %q, %v; want %q, true", body, ok, tt.want)
				}
				if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
					t.Errorf("ReadBody wrote a response on success")
				}
				return
			}
			if ok {
				t.Fatalf("ReadBody succeeded, want a %d", tt.wantCode)
			}
			if rec.Code != tt.wantCode {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantCode)
			}
			readProblem(t, rec.Code, rec.Header(), rec.Body.Bytes())
		})
	}
}

func TestReadBodyPanicsOnInvalidLimits(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	for _, l := range invalidLimits() {
		mustPanic(t, func() { middleware.ReadBody(httptest.NewRecorder(), r, l) })
	}
}

// TestReadBodyNeedsABudgetOverTheSharedOne: with a nil Budget, ReadBody
// reserves from one shared Budget of 64 MiB, which no MaxBytes over that
// fits: ReadBody panics on such limits, though Validate, which cannot know
// the Budget they will get, accepts them; a Budget of their own is read.
func TestReadBodyNeedsABudgetOverTheSharedOne(t *testing.T) {
	t.Parallel()
	over := middleware.BodyLimits{MaxBytes: 64<<20 + 1}
	if err := over.Validate(); err != nil {
		t.Fatalf("Validate(%+v) = %v; a nil Budget is each caller's to give", over, err)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	mustPanic(t, func() { middleware.ReadBody(httptest.NewRecorder(), r, over) })
	over.Budget = middleware.NewBudget(over.MaxBytes)
	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	if body, ok := middleware.ReadBody(httptest.NewRecorder(), r, over); !ok || string(body) != "{}" {
		t.Fatalf("ReadBody with a Budget of its own = %q, %v", body, ok)
	}
	at := middleware.BodyLimits{MaxBytes: 64 << 20}
	r = httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	if body, ok := middleware.ReadBody(httptest.NewRecorder(), r, at); !ok || string(body) != "{}" {
		t.Fatalf("ReadBody with MaxBytes at the shared Budget = %q, %v", body, ok)
	}
}

// invalidLimits are limits no body could be read with.
func invalidLimits() []middleware.BodyLimits {
	return []middleware.BodyLimits{
		{MaxBytes: -1},
		{ReadTimeout: -time.Second},
		{LingerTimeout: -time.Second},
		{LingerBytes: -1},
		{MaxBytes: 2 << 20, Budget: middleware.NewBudget(1 << 20)},
		{Budget: middleware.NewBudget((1 << 20) - 1)},
		{Budget: &middleware.Budget{}},
	}
}

// outcome is what a handler's ReadBody came to.
type outcome struct {
	ok     bool
	status int
}

// readBodyServer serves ReadBody with limits and reports the first
// outcome.
func readBodyServer(t *testing.T, limits middleware.BodyLimits, configure func(*http.Server)) (*httptest.Server, <-chan outcome) {
	t.Helper()
	results := make(chan outcome, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		_, ok := middleware.ReadBody(sw, r, limits)
		select {
		case results <- outcome{ok: ok, status: sw.status}:
		default: // only a request's first outcome is looked at
		}
	}))
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, results
}

// statusWriter records the status written through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Finding A: a body read had no deadline, so a client trickling its body
// held a connection, a goroutine and a growing buffer for as long as it
// liked.
func TestReadBodyDeadlineEndsTricklingBody(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond

	t.Run("stalled", func(t *testing.T) {
		t.Parallel()
		srv, results := readBodyServer(t, middleware.BodyLimits{ReadTimeout: timeout}, nil)
		c := dialRaw(t, srv)
		start := time.Now()
		if _, err := c.Write(append(head(1024), `{"partial":`...)); err != nil {
			t.Fatal(err)
		}
		resp, body := c.readResponse(t)
		wantProblem(t, resp, body, http.StatusRequestTimeout, courier.CodeRequestTimeout)
		if !resp.Close {
			t.Error("the 408 does not say the connection closes")
		}
		c.waitClosed(t)
		if took := time.Since(start); took < timeout {
			t.Errorf("answered after %v, before the deadline of %v", took, timeout)
		}
		if got := <-results; got.ok || got.status != http.StatusRequestTimeout {
			t.Errorf("ReadBody = %+v, want a refusal with 408", got)
		}
	})

	t.Run("trickling", func(t *testing.T) {
		t.Parallel()
		srv, results := readBodyServer(t, middleware.BodyLimits{ReadTimeout: timeout}, nil)
		c := dialRaw(t, srv)
		start := time.Now()
		if _, err := c.Write(head(1024)); err != nil {
			t.Fatal(err)
		}
		// One byte every 10 ms: the body never completes, yet never idles
		// as long as the deadline.
		t.Cleanup(trickle(c))

		// What was still trickling in may turn the close into a reset
		// before the 408 is read: the connection ending is what counts.
		got, err := io.ReadAll(c.r)
		if err != nil && !isClosedErr(err) {
			t.Fatalf("the connection is still open: %v", err)
		}
		if len(got) > 0 && !bytes.HasPrefix(got, []byte("HTTP/1.1 408 ")) {
			t.Errorf("the server sent %q, want a 408 or nothing", got)
		}
		if took := time.Since(start); took < timeout {
			t.Errorf("closed after %v, before the deadline of %v", took, timeout)
		}
		if got := <-results; got.ok || got.status != http.StatusRequestTimeout {
			t.Errorf("ReadBody = %+v, want a refusal with 408", got)
		}
	})
}

// A server's own ReadTimeout, if shorter, is not stretched to ReadTimeout.
func TestReadBodyKeepsShorterServerReadTimeout(t *testing.T) {
	t.Parallel()
	srv, results := readBodyServer(t, middleware.BodyLimits{ReadTimeout: time.Hour}, func(s *http.Server) {
		s.ReadTimeout = 200 * time.Millisecond
	})
	c := dialRaw(t, srv)
	if _, err := c.Write(append(head(1024), `{"partial":`...)); err != nil {
		t.Fatal(err)
	}
	resp, body := c.readResponse(t)
	wantProblem(t, resp, body, http.StatusRequestTimeout, courier.CodeRequestTimeout)
	c.waitClosed(t)
	if got := <-results; got.ok {
		t.Errorf("ReadBody succeeded with a body that never came")
	}
}

// The read deadline bounds the read only: a handler works on past it with
// its request's context alive, and the connection goes on to serve the
// next request. (A deadline left on the connection would end net/http's
// background read and cancel the context.)
func TestReadBodyDeadlineEndsWithTheRead(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	srv := httptest.NewServer(echoAfter(timeout, 5*timeout))
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var reused []bool
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		mu.Lock()
		defer mu.Unlock()
		reused = append(reused, i.Reused)
	}})
	for i := range 2 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"n":`+strconv.Itoa(i)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(got) != `{"n":`+strconv.Itoa(i)+`}` {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reused) != 2 || !reused[1] {
		t.Errorf("connections reused: %v, want the second request on the first's connection", reused)
	}
}

// failingReader fails like a connection that dropped mid-body.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// Over HTTP/2 the same bounds hold per stream: the deadline ends a stalled
// body with a 408, an over-limit one gets its 413, and neither touches the
// connection the other streams share.
func TestReadBodyOverHTTP2(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 2 {
			http.Error(w, "not HTTP/2", http.StatusHTTPVersionNotSupported)
			return
		}
		if body, ok := middleware.ReadBody(w, r, middleware.BodyLimits{MaxBytes: 16, ReadTimeout: 200 * time.Millisecond}); ok {
			w.Write(body)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := srv.Client()

	do := func(body io.Reader, length int64) (*http.Response, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp, readAll(t, resp)
	}

	pr, pw := io.Pipe() // a body that never ends
	go pw.Write([]byte(`{"a":`))
	resp, body := do(pr, 16)
	pw.Close()
	wantProblem(t, resp, body, http.StatusRequestTimeout, courier.CodeRequestTimeout)

	resp, body = do(strings.NewReader(strings.Repeat("x", 17)), 17)
	wantProblem(t, resp, body, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)

	resp, body = do(strings.NewReader(`{"ok":true}`), 11)
	if resp.StatusCode != http.StatusOK || string(body) != `{"ok":true}` || resp.ProtoMajor != 2 {
		t.Errorf("%s %d %q, want HTTP/2 200 with the body", resp.Proto, resp.StatusCode, body)
	}
}

// TestABodyIsReadIntoWhatArrives: a body of unknown length, or declared
// larger than a buffer read at once, is read into a buffer that grows as
// its bytes come: MaxBytes of math.MaxInt64 ("no limit") reads a small
// chunked body (it allocated MaxBytes up front, and panicked), and the
// bounds hold past the buffer read at once, chunked or not.
func TestABodyIsReadIntoWhatArrives(t *testing.T) {
	t.Parallel()
	const big = 3 << 20 // past the buffer read at once
	tests := []struct {
		name     string
		max      int64
		size     int
		chunked  bool
		wantCode int
	}{
		{"no limit, chunked", math.MaxInt64, 7, true, http.StatusOK},
		{"no limit, declared", math.MaxInt64, 7, false, http.StatusOK},
		{"large, chunked, at the bound", big, big, true, http.StatusOK},
		{"large, declared, at the bound", big, big, false, http.StatusOK},
		{"large, chunked, past the bound", big, big + 1, true, http.StatusRequestEntityTooLarge},
		{"large, declared, past the bound", big, big + 1, false, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			limits := middleware.BodyLimits{MaxBytes: tt.max, Budget: middleware.NewBudget(math.MaxInt64)}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if body, ok := middleware.ReadBody(w, r, limits); ok {
					w.Write(body)
				}
			}))
			t.Cleanup(srv.Close)
			sent := bytes.Repeat([]byte{'x'}, tt.size)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(sent))
			if err != nil {
				t.Fatal(err)
			}
			if tt.chunked {
				req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sent)), -1
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.wantCode)
			}
			if tt.wantCode == http.StatusOK && !bytes.Equal(got, sent) {
				t.Fatalf("read %d bytes back, want the %d sent", len(got), len(sent))
			}
		})
	}
}

// TestReadBodyOfABodyReadInFrontLeavesNoDeadline: a body a middleware in
// front had read already (Verify hands next the same bytes again) never
// reaches the connection's end, so net/http never lifted the read deadline
// ReadBody set on the connection: when it ran out, net/http's background
// read failed and canceled the request's context, ending the handler's
// own work ReadTimeout after a read that had succeeded.
func TestReadBodyOfABodyReadInFrontLeavesNoDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 50 * time.Millisecond
	accept := verifierFunc(func(context.Context, *http.Request, []byte) (signature.Principal, error) {
		return signature.Principal{}, nil
	})
	srv := httptest.NewServer(middleware.Verify(accept, middleware.BodyLimits{})(echoAfter(timeout, 10*timeout)))
	t.Cleanup(srv.Close)

	resp := post(t, srv.Client(), srv.URL, []byte(`{"n":1}`), false, nil)
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || string(got) != `{"n":1}` {
		t.Fatalf("%d %q, want 200 and the body", resp.StatusCode, got)
	}
}

// echoAfter reads the body with ReadBody under a ReadTimeout of timeout,
// then echoes it after wait, long past the deadline, unless the request's
// context ends first: then it answers 500 "context canceled".
func echoAfter(timeout, wait time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := middleware.ReadBody(w, r, middleware.BodyLimits{ReadTimeout: timeout})
		if !ok {
			return
		}
		select {
		case <-r.Context().Done():
			http.Error(w, "context canceled: "+r.Context().Err().Error(), http.StatusInternalServerError)
		case <-time.After(wait):
			w.Write(body)
		}
	})
}

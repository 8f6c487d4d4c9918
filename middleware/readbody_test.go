package middleware_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 16
	tests := []struct {
		name      string
		size      int
		chunked   bool
		wantCode  int
		wantEnter bool // next was called at all
	}{
		{name: "under", size: limit - 1, wantCode: http.StatusOK, wantEnter: true},
		{name: "exactly at", size: limit, wantCode: http.StatusOK, wantEnter: true},
		{name: "exactly at, chunked", size: limit, chunked: true, wantCode: http.StatusOK, wantEnter: true},
		{name: "empty", size: 0, wantCode: http.StatusOK, wantEnter: true},
		{name: "over, Content-Length", size: limit + 1, wantCode: http.StatusRequestEntityTooLarge},
		// The length is unknown until read: next is called, and its read fails.
		{name: "over, chunked", size: limit + 1, chunked: true, wantCode: http.StatusRequestEntityTooLarge, wantEnter: true},
		{name: "far over, chunked", size: 64 << 10, chunked: true, wantCode: http.StatusRequestEntityTooLarge, wantEnter: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var entered, done atomic.Bool
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				entered.Store(true)
				body, ok := middleware.ReadBody(w, r, 1<<20) // the outer limit is the smaller one
				if !ok {
					return
				}
				done.Store(true)
				w.Header().Set("X-Seen-Content-Length", strconv.FormatInt(r.ContentLength, 10))
				w.Write(body)
			})
			srv := httptest.NewServer(middleware.BodyLimit(limit)(next))
			t.Cleanup(srv.Close)

			sent := bytes.Repeat([]byte("x"), tt.size)
			resp := post(t, srv.Client(), srv.URL, sent, tt.chunked, nil)
			got := readAll(t, resp)

			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, tt.wantCode, got)
			}
			if entered.Load() != tt.wantEnter {
				t.Errorf("next called = %v, want %v", entered.Load(), tt.wantEnter)
			}
			if tt.wantCode != http.StatusOK {
				if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeBodyTooLarge {
					t.Errorf("code = %q, want %q", p.Code, courier.CodeBodyTooLarge)
				}
				if done.Load() {
					t.Error("next went on with a body over the limit")
				}
				return
			}
			if !bytes.Equal(got, sent) {
				t.Errorf("next read %q, want %q", got, sent)
			}
			wantCL := strconv.Itoa(tt.size)
			if tt.chunked {
				wantCL = "-1"
			}
			if cl := resp.Header.Get("X-Seen-Content-Length"); cl != wantCL {
				t.Errorf("next saw ContentLength %s, want %s", cl, wantCL)
			}
		})
	}
}

func TestBodyLimitPanicsOnInvalidLimit(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{0, -1} {
		mustPanic(t, func() { middleware.BodyLimit(n) })
	}
}

func TestReadBody(t *testing.T) {
	t.Parallel()
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
		{name: "unreadable", req: httptest.NewRequest(http.MethodPost, "/", failingReader{}), max: 5, wantCode: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			body, ok := middleware.ReadBody(rec, tt.req, tt.max)
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

// failingReader fails like a connection that dropped mid-body.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

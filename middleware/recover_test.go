package middleware_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/middleware"
)

func TestRecover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		wantCode  int
		wantBody  string // "" for a problem body
		wantPanic string // the logged panic value; "" when nothing is logged
	}{
		{
			name:      "panic with a string",
			handler:   func(http.ResponseWriter, *http.Request) { panic("boom") },
			wantCode:  http.StatusInternalServerError,
			wantPanic: "boom",
		},
		{
			name:      "panic with an error",
			handler:   func(http.ResponseWriter, *http.Request) { panic(errors.New("broken invariant")) },
			wantCode:  http.StatusInternalServerError,
			wantPanic: "broken invariant",
		},
		{
			name: "headers set but nothing written",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Encoding", "gzip")
				w.Header().Set("X-Handler", "set")
				panic("late")
			},
			wantCode:  http.StatusInternalServerError,
			wantPanic: "late",
		},
		{
			name: "no panic",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, "fine")
			},
			wantCode: http.StatusAccepted,
			wantBody: "fine",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, nil))
			rec := httptest.NewRecorder()
			rec.Header().Set("X-Outer", "kept")
			middleware.Recover(logger)(tt.handler).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))

			if rec.Code != tt.wantCode {
				t.Fatalf("status = %d, want %d", rec.Code, tt.wantCode)
			}
			if rec.Header().Get("X-Outer") != "kept" {
				t.Errorf("outer header lost: %v", rec.Header())
			}
			if tt.wantBody != "" {
				if rec.Body.String() != tt.wantBody {
					t.Errorf("body = %q, want %q", rec.Body, tt.wantBody)
				}
			} else {
				if p := readProblem(t, rec.Code, rec.Header(), rec.Body.Bytes()); p.Code != courier.CodeInternal {
					t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
				}
				if h := rec.Header(); h.Get("X-Handler") != "" || h.Get("Content-Encoding") != "" {
					t.Errorf("the 500 carries the panicking handler's headers: %v", h)
				}
			}

			if tt.wantPanic == "" {
				if logs.Len() != 0 {
					t.Errorf("logged %s, want nothing", logs.Bytes())
				}
				return
			}
			var entry struct {
				Level, Msg, Panic, Stack string
			}
			if err := json.Unmarshal(logs.Bytes(), &entry); err != nil {
				t.Fatalf("log %q: %v", logs.Bytes(), err)
			}
			if entry.Level != "ERROR" || entry.Msg != "middleware: panic recovered" || entry.Panic != tt.wantPanic {
				t.Errorf("log = %+v, want ERROR %q with panic %q", entry, "middleware: panic recovered", tt.wantPanic)
			}
			if bad := logkey.UndocumentedJSON(logs.String()); len(bad) != 0 {
				t.Errorf("logged keys %v, which courier's documentation does not list", bad)
			}
			if !strings.Contains(entry.Stack, "recover_test.go") {
				t.Errorf("logged stack does not reach the panicking handler:\n%s", entry.Stack)
			}
		})
	}
}

func TestRecoverNilLogger(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	middleware.Recover(nil)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", rec.Code)
	}
}

// http.ErrAbortHandler, bare or wrapped, goes on up exactly as it was
// panicked, unlogged, with nothing written.
func TestRecoverRepanicsErrAbortHandler(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("stop: %w", http.ErrAbortHandler)
	for _, v := range []error{http.ErrAbortHandler, wrapped} {
		t.Run(v.Error(), func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			h := middleware.Recover(slog.New(slog.NewJSONHandler(&logs, nil)))(
				http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(v) }))
			rec := httptest.NewRecorder()
			got := func() (v any) {
				defer func() { v = recover() }()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
				return nil
			}()
			if got != v { //nolint:errorlint // the very value panicked with, not an error chain
				t.Fatalf("re-panicked with %v, want %v itself", got, v)
			}
			if rec.Body.Len() != 0 || len(rec.Header()) != 0 || logs.Len() != 0 {
				t.Errorf("wrote %q %v and logged %q, want nothing", rec.Body, rec.Header(), logs.Bytes())
			}
		})
	}
}

// Over a real connection: an aborted handler and a panic after the
// response started both break the response, so the client cannot mistake
// it for a complete one.
func TestRecoverAbortsConnection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{name: "ErrAbortHandler", handler: func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }},
		{name: "panic after a ResponseController flush", handler: func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "partial")
			if err := http.NewResponseController(w).Flush(); err != nil {
				panic(fmt.Sprintf("flush: %v", err))
			}
			panic("boom")
		}},
		{name: "panic after an http.Flusher flush", handler: func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic("boom")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(middleware.Recover(nil)(tt.handler))
			t.Cleanup(srv.Close)
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
			resp, err := srv.Client().Do(req)
			if err == nil {
				body, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr == nil {
					t.Fatalf("client got a complete response %d %q, want a broken one", resp.StatusCode, body)
				}
			}
		})
	}
}

// TestRecoverAfterAFailedHijack: a hijack that failed (HTTP/2 has none)
// sent nothing, but Recover counted it as a started response and broke
// the stream on a later panic instead of answering 500.
func TestRecoverAfterAFailedHijack(t *testing.T) {
	t.Parallel()
	var hijackErr error
	srv := httptest.NewUnstartedServer(middleware.Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _, hijackErr = http.NewResponseController(w).Hijack()
		panic("boom")
	})))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET: %v, want a 500 (Hijack: %v)", err, hijackErr)
	}
	got := readAll(t, resp)
	if resp.ProtoMajor != 2 || !errors.Is(hijackErr, http.ErrNotSupported) {
		t.Fatalf("HTTP/%d, Hijack = %v; want HTTP/2, where Hijack fails", resp.ProtoMajor, hijackErr)
	}
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500 (body %q)", resp.StatusCode, got)
	}
	if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
}

// plainWriter hides every optional interface of the writer it wraps, as a
// middleware in front of Recover may: Flush through it is not supported.
type plainWriter struct{ w http.ResponseWriter }

func (p plainWriter) Header() http.Header         { return p.w.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p plainWriter) WriteHeader(code int)        { p.w.WriteHeader(code) }

// TestRecoverAfterAFailedFlush: a Flush that is not supported sends
// nothing, so a panic after it is still answered 500. It counted as a
// start, and Recover broke the connection.
func TestRecoverAfterAFailedFlush(t *testing.T) {
	t.Parallel()
	var flushErr error
	recovered := middleware.Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		flushErr = http.NewResponseController(w).Flush()
		panic("boom")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		recovered.ServeHTTP(plainWriter{w}, r)
	}))
	t.Cleanup(srv.Close)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("GET: %v, want a 500 (Flush: %v)", err, flushErr)
	}
	got := readAll(t, resp)
	if !errors.Is(flushErr, http.ErrNotSupported) {
		t.Fatalf("Flush = %v, want http.ErrNotSupported", flushErr)
	}
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500 (body %q)", resp.StatusCode, got)
	}
	if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
}

// TestRecoverAfterAnInvalidStatus: WriteHeader with a code net/http
// refuses panics before anything is sent, so the panic is answered 500.
// Recover counted the code as a started response and broke the
// connection.
func TestRecoverAfterAnInvalidStatus(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			t.Parallel()
			srv := serve(t, middleware.Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(1000)
			})), h2)

			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("GET: %v, want a 500", err)
			}
			got := readAll(t, resp)
			if resp.StatusCode != http.StatusInternalServerError {
				t.Fatalf("status = %d, want 500 (body %q)", resp.StatusCode, got)
			}
			if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
				t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
			}
		})
	}
}

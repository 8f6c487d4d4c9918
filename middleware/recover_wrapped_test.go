package middleware_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

// unwrapping is a middleware of the application's between Transaction
// and Recover that wraps the ResponseWriter, as logging and metrics
// middleware do, and lets http.ResponseController reach the one beneath.
func unwrapping(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(wrappedWriter{w}, r)
	})
}

type wrappedWriter struct{ http.ResponseWriter }

func (w wrappedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestRecoverInsideTransactionBehindAWrapper: Transaction(wrapper(Recover(app)))
// with an app that wrote part of its response and panicked: the
// transaction is rolled back and the client gets Recover's 500, as without
// the wrapper. Recover looked for Transaction's held writer only as the
// writer it was given, found the wrapper, took the response for started
// and aborted the connection, though nothing of it had reached the client.
func TestRecoverInsideTransactionBehindAWrapper(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	h := middleware.Transaction(b.store.Begin)(unwrapping(middleware.Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		io.WriteString(w, "partial")
		panic("boom")
	}))))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if n, cerr := countItems(t.Context(), b.db); cerr != nil || n != 0 {
		t.Errorf("committed rows = %d (%v), want 0", n, cerr)
	}
	if err != nil {
		t.Fatalf("POST: %v, want a 500", err)
	}
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500 (body %q)", resp.StatusCode, got)
	}
	if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
}

// TestTransactionFlushThenA500RollsBack: Flush on Transaction's held
// response is a no-op, as documented, and sends no status: a handler
// that flushes before it answers 500 has its transaction rolled back and
// its 500 sent.
func TestTransactionFlushThenA500RollsBack(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		http.Error(w, "failed", http.StatusInternalServerError)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status = %d (body %q), want 500", resp.StatusCode, got)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
		t.Errorf("committed rows = %d (%v), want 0", n, err)
	}
}

// TestRecoverLetsGoexitThrough: a handler that ends its goroutine
// (runtime.Goexit, as t.FailNow does) has not panicked: Recover logs no
// panic and writes no 500 for it. It took the nil recover returns then
// for panic(nil), and logged a *runtime.PanicNilError with a stack.
func TestRecoverLetsGoexitThrough(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	h := middleware.Recover(slog.New(slog.NewTextHandler(&logged, nil)))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		runtime.Goexit()
	}))
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	}()
	<-done
	if logged.Len() != 0 {
		t.Errorf("logged %q for a goroutine that ended, want nothing", logged.String())
	}
	if rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Errorf("wrote %d %s %q for a goroutine that ended, want nothing", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

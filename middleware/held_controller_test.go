package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

// TestTransactionHoldsWhatTheControllerWouldSend: however next reaches
// for the connection (http.Flusher, http.ResponseController, either
// through a wrapper of its own or through Recover), nothing of its answer
// reaches the client before the transaction ends: a 201 flushed, or an
// answer written on a hijacked connection, whose commit then fails is
// answered 503, with nothing committed.
func TestTransactionHoldsWhatTheControllerWouldSend(t *testing.T) {
	t.Parallel()
	reaches := map[string]func(w http.ResponseWriter) error{
		"http.Flusher": func(w http.ResponseWriter) error {
			f, ok := w.(http.Flusher)
			if !ok {
				return errors.New("not an http.Flusher")
			}
			f.Flush()
			return nil
		},
		"ResponseController.Flush": func(w http.ResponseWriter) error {
			return http.NewResponseController(w).Flush()
		},
		"ResponseController.Hijack": func(w http.ResponseWriter) error {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return err
			}
			defer conn.Close()
			_, _ = io.WriteString(rw, "HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return rw.Flush()
		},
	}
	between := map[string]func(http.Handler) http.Handler{
		"directly":         func(h http.Handler) http.Handler { return h },
		"behind a wrapper": unwrapping,
		"behind Recover":   middleware.Recover(nil),
	}
	for how, reach := range reaches {
		for where, wrap := range between {
			if how == "http.Flusher" && where == "behind a wrapper" {
				continue // the wrapper is no http.Flusher: only the controller gets through
			}
			t.Run(how+"/"+where, func(t *testing.T) {
				t.Parallel()
				b := setupTx(t)
				var reachErr error
				h := middleware.Transaction(b.store.Begin)(wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					insertItem(t, r)
					tx, _ := middleware.TxFromContext(r.Context())
					if _, err := tx.ExecContext(r.Context(), `INSERT INTO children (parent_id) VALUES (99)`); err != nil {
						t.Errorf("insert child: %v", err) // fails the commit, not the statement
					}
					w.WriteHeader(http.StatusCreated)
					reachErr = reach(w)
				})))
				srv := httptest.NewServer(h)
				t.Cleanup(srv.Close)

				resp := post(t, srv.Client(), srv.URL, nil, false, nil)
				got := readAll(t, resp)
				if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
					t.Errorf("committed rows = %d (%v), want 0", n, err)
				}
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("client got %d %q (%s: %v), want the failed commit's 503", resp.StatusCode, got, how, reachErr)
				}
				if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
					t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
				}
				if how == "ResponseController.Hijack" {
					if !errors.Is(reachErr, http.ErrNotSupported) {
						t.Errorf("Hijack = %v, want http.ErrNotSupported", reachErr)
					}
				} else if reachErr != nil {
					t.Errorf("%s = %v, want no error: the flush is held back", how, reachErr)
				}
			})
		}
	}
}

// TestTransactionSendsNoInformationalResponse: a 103 Early Hints or a 100
// Continue next writes is not sent (the final response keeps the headers
// they carried); the same handler without Transaction sends both.
func TestTransactionSendsNoInformationalResponse(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusContinue)
		_, _ = io.WriteString(w, "hello")
	})
	for name, start := range heldServers(t, h) {
		t.Run(name, func(t *testing.T) {
			c, url := start()
			var informational []int
			ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
					informational = append(informational, code)
					return nil
				},
			})
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "hello" || resp.Header.Get("Link") == "" {
				t.Errorf("got %d %q, Link %q; want 200 hello with the Link header", resp.StatusCode, body, resp.Header.Get("Link"))
			}
			want := "[103 100]"
			if strings.HasSuffix(name, "/held") {
				want = "[]"
			}
			if fmt.Sprint(informational) != want {
				t.Errorf("informational responses %v, want %s", informational, want)
			}
		})
	}
}

// TestTransactionDeadlinesReachTheConnection: a read deadline next sets
// through http.ResponseController under Transaction is the connection's:
// one in the past ends a body read that would wait for the client.
func TestTransactionDeadlinesReachTheConnection(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	var readErr, setErr error
	h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setErr = http.NewResponseController(w).SetReadDeadline(time.Now().Add(-time.Second))
		_, readErr = r.Body.Read(make([]byte, 1))
		w.WriteHeader(http.StatusRequestTimeout)
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	pr, pw := io.Pipe() // a body the client sends nothing of
	// Bounds the read, should the deadline not reach the connection: the
	// body then ends, and the read with it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	context.AfterFunc(ctx, func() { pw.Close() })
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, pr)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v, want the handler's 408", err)
	}
	resp.Body.Close()
	if setErr != nil || !errors.Is(readErr, os.ErrDeadlineExceeded) {
		t.Errorf("SetReadDeadline = %v, then Read = %v; want nil, then os.ErrDeadlineExceeded", setErr, readErr)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status = %d, want the handler's 408", resp.StatusCode)
	}
}

// TestTransactionUpgradeRefusedRollsBack: a handler that upgrades the
// connection as WebSocket libraries do (101 Switching Protocols, then
// Hijack, then 500 should the hijack fail) cannot switch protocols under
// Transaction: the 101 is not taken for the response's status, so the
// 500 that follows the refused hijack rolls back and reaches the client.
func TestTransactionUpgradeRefusedRollsBack(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	var hijackErr error
	h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		w.WriteHeader(http.StatusSwitchingProtocols)
		conn, _, err := http.NewResponseController(w).Hijack()
		if hijackErr = err; err != nil {
			http.Error(w, "cannot upgrade", http.StatusInternalServerError)
			return
		}
		conn.Close()
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	resp := post(t, srv.Client(), srv.URL, nil, false, nil)
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError || !errors.Is(hijackErr, http.ErrNotSupported) {
		t.Errorf("client got %d %q after Hijack = %v; want 500, after http.ErrNotSupported", resp.StatusCode, got, hijackErr)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
		t.Errorf("committed rows = %d (%v), want 0", n, err)
	}
}

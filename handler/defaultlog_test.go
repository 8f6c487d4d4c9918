package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAReceiverWithoutALoggerIsHeardWhenItFails: a receiver given no
// Logger logs through slog's default logger, from Warn up: a request it
// fails to serve (its store closed: 503, at Error) is heard with no
// setup; one it refuses (a body that does not match its signature, or
// is not JSON: 4xx, at Info), which any client can send, is not. Before,
// both went nowhere.
func TestAReceiverWithoutALoggerIsHeardWhenItFails(t *testing.T) {
	logs := logtest.AsDefault(t)
	for _, target := range anyReceivers() {
		e := target.open(t, anyOptions{})
		before := len(logs.All())

		refused := e.request(t)
		body, err := io.ReadAll(refused.Body)
		if err != nil {
			t.Fatal(err)
		}
		refused.Body = io.NopCloser(bytes.NewReader(append(body, 'x')))
		if rec := serve(e.handler, refused); rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s: a body altered after signing: %d, want a 4xx: %s", target.name, rec.Code, rec.Body)
		}
		if got := logs.All()[before:]; len(got) != 0 {
			t.Errorf("%s: a refused request reached the default logger: %v", target.name, got)
		}

		req := e.request(t)
		if err := e.store.Close(); err != nil {
			t.Fatal(err)
		}
		if rec := serve(e.handler, req); rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: on a closed store: %d, want 503: %s", target.name, rec.Code, rec.Body)
		}
		got := logs.All()[before:]
		if len(got) != 1 || got[0].Level != slog.LevelError {
			t.Errorf("%s: a request failed on a closed store: default logger got %v, want one line at Error", target.name, got)
		}
	}
}

// TestServerBusyIsNotHeardWithoutALogger: a 503 server_busy is a refusal
// any client can have made, signed or not: slow uploads hold the bodies'
// Budget (each reserves its Content-Length, 1 MiB at most, before a byte
// arrives, for up to Body.ReadTimeout: 64 of them the default 64 MiB),
// and then every request that comes, even an unsigned one with a body of
// a few bytes, is answered server_busy. It is logged at Info, as the
// other refusals are, so that a receiver given no Logger writes nothing
// per request for it to slog's default logger. At Warn, a client could
// have had one line written to it per request it sent.
func TestServerBusyIsNotHeardWithoutALogger(t *testing.T) {
	logs := logtest.AsDefault(t)
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	verifier, _ := anyStandardWebhooks(t)
	budget := middleware.NewBudget(1 << 20)
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Body: middleware.BodyLimits{Budget: budget}},
		func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	if !budget.Reserve(budget.Size()) { // what slow uploads in flight hold
		t.Fatal("the Budget is taken already")
	}
	t.Cleanup(func() { budget.Release(budget.Size()) })

	for range 3 {
		resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(`{}`)) // unsigned
		if err != nil {
			t.Fatal(err)
		}
		var p problemBody
		err = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || p.Code != courier.CodeServerBusy {
			t.Fatalf("an unsigned request with the Budget taken: %d %+v (%v), want 503 server_busy", resp.StatusCode, p, err)
		}
	}
	if got := logs.Messages(slog.LevelWarn); len(got) != 0 {
		t.Errorf("default logger got %q from Warn up for 3 requests a client could send at will", got)
	}
}

package handler_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/courier-go/courier/internal/logtest"
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

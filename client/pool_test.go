package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// TestARunOnAPoolOfOneConnectionDeliversByPolling: a Run holds a
// connection of the Store's pool in LISTEN for as long as it runs. On a
// PostgreSQL pool of one connection (db.SetMaxOpenConns(1)) it took that
// one, and every claim then waited for a connection that never came
// back: the worker delivered nothing, and said nothing. Wake-ups never
// take the pool's last connection: the Run says so at Warn and polls.
func TestARunOnAPoolOfOneConnectionDeliversByPolling(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open(postgres.DriverName, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	s, err := store.Open(t.Context(), db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
	}))
	t.Cleanup(srv.Close)
	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	signer, _ := signature.NewStandardWebhooksSigner(key)
	logs := newCapture(t)
	delivered := make(chan string, 1)
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, PollInterval: 10 * time.Millisecond,
		Transport: loopbackGuard(t, srv.URL).Transport(),
		Logger:    slog.New(logs),
		Hook: func(e client.Event) {
			if e.Status == courier.StatusSucceeded {
				delivered <- e.NotificationID
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	enqueueAll(t, s, store.EnqueueParams{NotificationID: "n-1", Endpoint: srv.URL + "/h", Payload: []byte(`{}`)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-delivered:
	case <-time.After(30 * time.Second):
		t.Error("a Run on a pool of one connection delivered nothing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	const msg = "worker: wake-ups unavailable, polling"
	lines := logs.lines(msg)
	if len(lines) == 0 || lines[0].Level != slog.LevelWarn || !strings.Contains(lines[0].Attrs[logkey.Error], string(courier.CodeConfigInvalid)) {
		t.Errorf("logged %+v; want a Warn %q with a config_invalid error", lines, msg)
	}
}

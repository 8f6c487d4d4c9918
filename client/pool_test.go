package client_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/store"
)

// TestARunOnAPoolOfOneConnectionDeliversByPolling: a Run holds a
// connection of the Store's pool in LISTEN for as long as it runs. On a
// PostgreSQL pool of one connection (db.SetMaxOpenConns(1)) it took that
// one, and every claim then waited for a connection that never came
// back: the worker delivered nothing, and said nothing. Wake-ups never
// take the pool's last connection: the Run says so at Warn and polls.
func TestARunOnAPoolOfOneConnectionDeliversByPolling(t *testing.T) {
	t.Parallel()
	b := setupPGWorker(t, func(db *sqlx.DB, cfg *client.Config) {
		db.SetMaxOpenConns(1)
		cfg.PollInterval = 10 * time.Millisecond
	})
	enqueueAll(t, b.store, store.EnqueueParams{NotificationID: "n-1", Endpoint: b.endpoint + "/h", Payload: []byte(`{}`)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.worker.Run(ctx) }()
	select {
	case <-b.delivered:
	case <-time.After(30 * time.Second):
		t.Error("a Run on a pool of one connection delivered nothing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	const msg = "worker: wake-ups unavailable, polling"
	lines := b.logs.lines(msg)
	if len(lines) == 0 || lines[0].Level != slog.LevelWarn || !strings.Contains(lines[0].Attrs[logkey.Error], string(courier.CodeConfigInvalid)) {
		t.Errorf("logged %+v; want a Warn %q with a config_invalid error", lines, msg)
	}
}

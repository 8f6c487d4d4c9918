//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The child's http.Server in the "full" configuration, as a production
// receiver sets it. "header" sets ReadHeaderTimeout alone.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 64 << 10
)

// secretEnv carries the receiver's Standard Webhooks secret to the child.
const secretEnv = "COURIER_SECRET"

// newServer returns the child's http.Server in the named configuration.
func newServer(mode string, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
	if mode == "full" {
		srv.ReadTimeout = readTimeout
		srv.WriteTimeout = writeTimeout
		srv.IdleTimeout = idleTimeout
		srv.MaxHeaderBytes = maxHeaderBytes
	}
	return srv
}

// serve runs the receiver of examples/receiver — the terminal receiver at
// /terminal of a plain ServeMux, behind Recover — on a loopback port it
// prints to standard output, until SIGTERM.
func serve(mode, path string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	key, err := signature.ParseStandardWebhooksKey("k1", os.Getenv(secretEnv))
	if err != nil {
		return err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		return err
	}
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS plan_states (
		plan_id TEXT PRIMARY KEY, terminal_status TEXT NOT NULL, notification_id TEXT NOT NULL)`); err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	terminal, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Logger: logger},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO plan_states (plan_id, terminal_status, notification_id) VALUES (?, ?, ?)
				ON CONFLICT (plan_id) DO UPDATE SET terminal_status = excluded.terminal_status, notification_id = excluded.notification_id`,
				n.PlanID, n.TerminalStatus, n.NotificationID)
			return err
		})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/terminal", middleware.Recover(logger)(terminal))
	srv := newServer(mode, mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	down := make(chan struct{})
	go func() {
		defer close(down)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		start := time.Now()
		err := srv.Shutdown(shutdown)
		fmt.Fprintf(os.Stderr, "trickle: receiver shut down in %v (%v)\n", time.Since(start).Round(time.Millisecond), err)
	}()
	fmt.Println(ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-down
	return nil
}

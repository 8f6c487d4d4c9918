// Command receiver is a real server with courier's terminal receiver
// mounted at /terminal in a plain http.ServeMux. Each terminal notification
// is applied once, in the transaction that records it in the inbox.
//
//	COURIER_SECRET=whsec_… go run ./examples/receiver -addr 127.0.0.1:8080 -db receiver.db
//
// The secret comes from $COURIER_SECRET or -secret-file, never from the
// command line, where ps would show it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/serve"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	db := flag.String("db", "receiver.db", "SQLite database file")
	secretFile := flag.String("secret-file", "", "file holding the Standard Webhooks secret (whsec_…); defaults to $COURIER_SECRET")
	sender := flag.String("sender", "sender", "name of the sender the secret belongs to")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	secret, err := serve.Secret(*secretFile)
	if err == nil {
		err = run(*addr, *db, secret, *sender, logger)
	}
	if err != nil {
		logger.Error("receiver: stopped", slog.Any("error", err))
		os.Exit(1)
	}
}

func run(addr, path, secret, sender string, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second ends the process at once.
	unhook := context.AfterFunc(ctx, stop)
	defer unhook()
	key, err := signature.ParseStandardWebhooksKey("k1", secret)
	if err != nil {
		return err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		return err
	}
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		return err
	}
	defer s.Close()
	mux, err := newHandler(ctx, s, verifier, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "receiver: listening on %s, terminal notifications at /terminal\n", ln.Addr())
	return serve.Run(ctx, serve.Server(mux), ln)
}

// newHandler creates the application's table in s and returns its routes:
// the terminal receiver at /terminal.
func newHandler(ctx context.Context, s *store.Store, verifier signature.Verifier, logger *slog.Logger) (http.Handler, error) {
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS plan_states (
		plan_id TEXT PRIMARY KEY, source_sequence TEXT NOT NULL, terminal_status TEXT NOT NULL, notification_id TEXT NOT NULL)`); err != nil {
		return nil, err
	}
	// Deliveries arrive in any order (the worker sends several at once
	// and retries), so a plan's state moves forward only: an older
	// notification is recorded in the Inbox and acknowledged, and leaves
	// a newer state as it is. A source_sequence is any positive integer,
	// beyond 64 bits too, in digits without leading zeros: the longer is
	// the greater, and of two as long the one that sorts after.
	terminal, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Logger: logger},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO plan_states (plan_id, source_sequence, terminal_status, notification_id) VALUES (?, ?, ?, ?)
				ON CONFLICT (plan_id) DO UPDATE SET source_sequence = excluded.source_sequence,
					terminal_status = excluded.terminal_status, notification_id = excluded.notification_id
				WHERE length(excluded.source_sequence) > length(plan_states.source_sequence)
					OR (length(excluded.source_sequence) = length(plan_states.source_sequence) AND excluded.source_sequence > plan_states.source_sequence)`,
				n.PlanID, n.SourceSequence.String(), n.TerminalStatus, n.NotificationID)
			return err
		})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/terminal", middleware.Recover(logger)(terminal))
	return mux, nil
}

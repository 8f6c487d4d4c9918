// Command sender is an application that writes a business row and
// enqueues its terminal notification in the same transaction, with the
// delivery worker running beside it.
//
//	COURIER_SECRET=whsec_… go run ./examples/sender -addr :8081 -db sender.db -to http://127.0.0.1:8080/terminal
//	curl -X POST 'http://127.0.0.1:8081/plans/plan-1/publish'
//
// -allow-private opens the worker's SSRF guard for loopback and private
// addresses (and plain http), for trying it out on one machine; by default
// it only sends https to public addresses.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address of the application")
	db := flag.String("db", "sender.db", "SQLite database file")
	to := flag.String("to", "http://127.0.0.1:8080/terminal", "the receiver's terminal endpoint")
	secret := flag.String("secret", "", "Standard Webhooks secret (whsec_…); defaults to $COURIER_SECRET")
	allowPrivate := flag.Bool("allow-private", true, "let the worker reach loopback/private addresses over http")
	flag.Parse()
	if *secret == "" {
		*secret = os.Getenv("COURIER_SECRET")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, *db, *to, *secret, *allowPrivate, logger); err != nil {
		logger.Error("sender: stopped", slog.Any("error", err))
		os.Exit(1)
	}
}

func run(addr, path, endpoint, secret string, allowPrivate bool, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if secret == "" {
		return errors.New("no secret: pass -secret or set COURIER_SECRET")
	}
	key, err := signature.ParseStandardWebhooksKey("k1", secret)
	if err != nil {
		return err
	}
	signer, err := signature.NewStandardWebhooksSigner(signature.StandardWebhooksSignerConfig{Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		return err
	}
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS publications (
		plan_id TEXT NOT NULL, sequence INTEGER NOT NULL, published_at INTEGER NOT NULL, PRIMARY KEY (plan_id, sequence))`); err != nil {
		return err
	}

	guard := client.Guard{}
	if allowPrivate {
		u, err := url.Parse(endpoint)
		if err != nil {
			return err
		}
		port, _ := strconv.ParseUint(u.Port(), 10, 16)
		guard = client.Guard{AllowHTTP: true, AllowPorts: []uint16{80, uint16(port)}, AllowPrefixes: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
		}}
	}
	worker, err := client.NewWorker(client.Config{Store: s, Signer: signer, Transport: guard.Transport(), Logger: logger})
	if err != nil {
		return err
	}
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Run(ctx) }()

	mux := http.NewServeMux()
	// The business write and the enqueue share the request's transaction:
	// middleware.Transaction commits both, or neither.
	mux.Handle("POST /plans/{plan}/publish", middleware.Transaction(s.DB())(publish(s, endpoint)))
	srv := &http.Server{Addr: addr, Handler: middleware.Recover(logger)(mux), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	fmt.Fprintf(os.Stderr, "sender: listening on %s, delivering to %s\n", addr, endpoint)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-workerDone
}

// publish records a publication and enqueues its terminal notification.
func publish(s *store.Store, endpoint string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		tx, _ := middleware.TxFromContext(ctx)
		plan := r.PathValue("plan")
		var seq int64
		if err := tx.GetContext(ctx, &seq, "SELECT COALESCE(MAX(sequence), 0) + 1 FROM publications WHERE plan_id = ?", plan); err != nil {
			http.Error(w, "database error", http.StatusInternalServerError)
			return
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO publications (plan_id, sequence, published_at) VALUES (?, ?, ?)", plan, seq, time.Now().UnixMicro()); err != nil {
			http.Error(w, "database error", http.StatusInternalServerError)
			return
		}
		lifecycle := ack.Digest([]byte(plan + "/" + strconv.FormatInt(seq, 10)))
		n, err := ack.NewTerminal(ack.Terminal{
			EventID: plan + "-" + strconv.FormatInt(seq, 10), SiteID: "site-1", PlanID: plan, WebsiteVersion: "v1",
			SourceSequence: json.Number(strconv.FormatInt(seq, 10)), JobCount: 1, ChangeSHA256: ack.Digest([]byte(plan)), LifecycleBindingSHA256: ack.Digest([]byte("binding")),
			TerminalStatus: "published", LifecycleSHA256: &lifecycle,
		})
		if err != nil {
			http.Error(w, "invalid plan id", http.StatusBadRequest)
			return
		}
		payload, _ := n.Payload()
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: n.NotificationID, Endpoint: endpoint, Payload: payload, Profile: ack.ProfileTerminal}); err != nil {
			http.Error(w, "enqueue failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		json.NewEncoder(w).Encode(map[string]any{"plan_id": plan, "sequence": seq, "notification_id": n.NotificationID})
	})
}

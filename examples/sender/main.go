// Command sender is an application that writes a business row and
// enqueues its terminal notification in the same transaction, with the
// delivery worker running beside it.
//
//	COURIER_SECRET=whsec_… go run ./examples/sender -addr 127.0.0.1:8081 -db sender.db \
//		-to http://127.0.0.1:8080/terminal -allow-private
//	curl -X POST 'http://127.0.0.1:8081/plans/plan-1/publish'
//
// By default the worker's SSRF guard sends only https to public
// addresses; -allow-private opens it for loopback and private addresses
// (and plain http) on the endpoint's port, for trying both ends on one
// machine. Without it a plain http -to is refused at start, as the guard
// would refuse every delivery. The secret comes from $COURIER_SECRET or
// -secret-file, never from the command line, where ps would show it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/serve"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// options are the program's flags.
type options struct {
	addr, db, to, secretFile string
	allowPrivate             bool
}

// parseFlags reads the command line. There is no flag for the secret
// itself: a command line is visible to every user of the machine.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("sender", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8081", "listen address of the application")
	fs.StringVar(&o.db, "db", "sender.db", "SQLite database file")
	fs.StringVar(&o.to, "to", "http://127.0.0.1:8080/terminal", "the receiver's terminal endpoint")
	fs.StringVar(&o.secretFile, "secret-file", "", "file holding the Standard Webhooks secret (whsec_…); defaults to $COURIER_SECRET")
	fs.BoolVar(&o.allowPrivate, "allow-private", false, "open the worker's SSRF guard for loopback and private addresses over http, on the endpoint's port")
	return o, fs.Parse(args)
}

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // the usage was asked for, and printed
	}
	if err != nil {
		os.Exit(2)
	}
	secret, err := serve.Secret(o.secretFile)
	if err == nil {
		err = run(o.addr, o.db, o.to, secret, o.allowPrivate, logger)
	}
	if err != nil {
		logger.Error("sender: stopped", slog.Any("error", err))
		os.Exit(1)
	}
}

func run(addr, path, endpoint, secret string, allowPrivate bool, logger *slog.Logger) error {
	// Enqueue refuses any other endpoint, and the closed guard sends https
	// only: every publication, or every delivery, would fail.
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
		return errors.New("-to must be an absolute http or https URL with a host")
	case u.Scheme == "http" && !allowPrivate:
		return errors.New("-to is plain http, which the worker's guard refuses: use https, or pass -allow-private for a receiver on this machine or a private network")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second ends the process at once.
	unhook := context.AfterFunc(ctx, stop)
	defer unhook()
	key, err := signature.ParseStandardWebhooksKey("k1", secret)
	if err != nil {
		return err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return err
	}
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, schema); err != nil {
		return err
	}

	guard, err := guardFor(endpoint, allowPrivate)
	if err != nil {
		return err
	}
	worker, err := client.NewWorker(client.Config{Store: s, Signer: signer, Transport: guard.Transport(), Logger: logger})
	if err != nil {
		return err
	}
	// The address is taken before the worker starts: a program that
	// cannot serve stops with no delivery claimed.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// The worker runs on its own context: at SIGTERM it is stopped
	// softly (below), finishing the attempts in flight, not cut short.
	workerDone := make(chan error, 1)
	go func() { workerDone <- worker.Run(context.WithoutCancel(ctx)) }()

	mux := routes(s, endpoint, logger)
	fmt.Fprintf(os.Stderr, "sender: listening on %s, delivering to %s\n", ln.Addr(), redact(u))
	served := serve.Run(ctx, serve.Server(mux), ln)
	// Stop claims no more, gives back what it has not started and waits
	// up to 10 s for attempts in flight; those still running then are cut
	// short and due again at once.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return errors.Join(served, worker.Stop(stopCtx), <-workerDone)
}

// schema is the application's own table, beside courier's.
const schema = `CREATE TABLE IF NOT EXISTS publications (
	plan_id TEXT NOT NULL, sequence INTEGER NOT NULL, published_at INTEGER NOT NULL, PRIMARY KEY (plan_id, sequence))`

// routes returns the application's API: POST /plans/{plan}/publish.
func routes(s *store.Store, endpoint string, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	// The business write and the enqueue share the request's transaction:
	// middleware.Transaction commits both, or neither.
	// Store.Begin: on SQLite the transaction queues with courier's own
	// writes on one connection instead of contending for the lock.
	mux.Handle("POST /plans/{plan}/publish", middleware.Transaction(s.Begin)(publish(s, endpoint, logger)))
	return middleware.Recover(logger)(mux)
}

// publish records a publication and enqueues its terminal notification.
// A failure is logged, with its code and error (courier's errors carry
// no payload, header or secret), and answered 500: Transaction rolls
// the publication back with it.
func publish(s *store.Store, endpoint string, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		plan := r.PathValue("plan")
		fail := func(msg string, err error) {
			logger.ErrorContext(ctx, "sender: "+msg, slog.String("plan", plan),
				slog.String("code", string(courier.CodeOf(err))), slog.Any("error", err))
			http.Error(w, msg, http.StatusInternalServerError)
		}
		tx, ok := middleware.TxFromContext(ctx)
		if !ok {
			fail("publish failed", errors.New("no transaction: serve publish inside middleware.Transaction"))
			return
		}
		var seq int64
		if err := tx.GetContext(ctx, &seq, "SELECT COALESCE(MAX(sequence), 0) + 1 FROM publications WHERE plan_id = ?", plan); err != nil {
			fail("database error", err)
			return
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO publications (plan_id, sequence, published_at) VALUES (?, ?, ?)", plan, seq, time.Now().UnixMicro()); err != nil {
			fail("database error", err)
			return
		}
		lifecycle := ack.Digest([]byte(plan + "/" + strconv.FormatInt(seq, 10)))
		n, err := ack.NewTerminal(ack.Terminal{
			EventID: plan + "-" + strconv.FormatInt(seq, 10), SiteID: "site-1", PlanID: plan, WebsiteVersion: "v1",
			SourceSequence: json.Number(strconv.FormatInt(seq, 10)), JobCount: "1", ChangeSHA256: ack.Digest([]byte(plan)), LifecycleBindingSHA256: ack.Digest([]byte("binding")),
			TerminalStatus: "published", LifecycleSHA256: &lifecycle,
		})
		if err != nil {
			// The plan id is not a token (1 to 256 of A-Z a-z 0-9 _ . : -),
			// or too long to make an event id with its sequence.
			http.Error(w, "invalid plan id", http.StatusBadRequest)
			return
		}
		payload, err := n.Payload()
		if err != nil {
			fail("enqueue failed", err)
			return
		}
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: n.NotificationID, Endpoint: endpoint, Payload: payload, Profile: ack.ProfileTerminal}); err != nil {
			fail("enqueue failed", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"plan_id": plan, "sequence": seq, "notification_id": n.NotificationID})
	})
}

// redact shows an endpoint as courier's logs do, scheme and host only
// ("/…" for the rest): a webhook URL's path or query may be its secret.
func redact(u *url.URL) string {
	s := u.Scheme + "://" + u.Host
	if u.Path != "" || u.RawQuery != "" {
		s += "/…"
	}
	return s
}

// guardFor returns the worker's SSRF guard: closed (https to public
// addresses only) unless allowPrivate opens it for loopback and private
// addresses over http on the endpoint's port.
func guardFor(endpoint string, allowPrivate bool) (client.Guard, error) {
	if !allowPrivate {
		return client.Guard{}, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return client.Guard{}, err
	}
	var ports []uint16 // https's default port, 443, the guard allows already
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		ports = append(ports, uint16(p))
	} else if u.Port() == "" && u.Scheme == "http" {
		ports = append(ports, 80)
	}
	return client.Guard{AllowHTTP: true, AllowPorts: ports, AllowPrefixes: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	}}, nil
}

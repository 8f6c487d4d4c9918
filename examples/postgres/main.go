// Command postgres runs both ends of courier on one PostgreSQL database. It
// migrates courier's tables, serves a terminal receiver (Standard Webhooks
// signatures, its Inbox in the same database) on -addr, starts a worker
// that delivers to it, enqueues -n terminal notifications in transactions
// of -batch together with the business rows they belong to, waits until
// every one was settled (succeeded, or failed for good) and prints a
// summary:
//
//	go run ./examples/postgres -url 'postgres://user@localhost:5432/scratch?sslmode=disable' [-addr 127.0.0.1:0] [-n 1000] [-batch 100] [-timeout 2m]
//
// The URL may come from $COURIER_PG_URL instead of -url, and must if it
// holds a password: ps shows a command line to every user. Use a scratch
// database: the program adds courier's tables and two of its own there.
// Each run tags its notifications with a run id of its own, so it can run
// again on the same database, one run at a time: a run's worker claims
// every due delivery of the database, and its guard admits only its own
// receiver, so two runs at once fail each other's deliveries with
// destination_forbidden (logged on stderr, with the worker's and the
// receiver's other warnings and errors). Ctrl-C (or SIGTERM) stops a run
// softly: the worker claims nothing more and the attempts in flight
// finish, for up to 10 s; a second Ctrl-C ends the process at once. It
// exits 0 when every notification was delivered and applied exactly
// once, 1 when not, 2 on an error.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/serve"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

func main() {
	var o options
	flag.StringVar(&o.url, "url", "", "PostgreSQL URL (postgres://…), without a password; defaults to $COURIER_PG_URL, which may hold one")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:0", "address the receiver listens on (port 0: any free port)")
	flag.IntVar(&o.n, "n", 1000, "notifications to enqueue")
	flag.IntVar(&o.batch, "batch", 100, "notifications per enqueue transaction")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	var err error
	if o.url, err = databaseURL(o.url, os.Getenv("COURIER_PG_URL")); err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(2)
	}

	// The worker's and the receiver's warnings and errors (a delivery
	// refused or failed, a store failure) go to stderr.
	o.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The first Ctrl-C (or SIGTERM) stops the run softly: the attempts in
	// flight finish, for up to 10 s. A second one ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	ok, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// databaseURL returns the database to use: the -url flag's, else the
// environment's. The flag's may not hold a password, since a command
// line is visible to every user of the machine (ps); the environment's
// may.
func databaseURL(flagURL, envURL string) (string, error) {
	switch {
	case flagURL == "" && envURL == "":
		return "", errors.New("no database: pass -url or set COURIER_PG_URL")
	case flagURL == "":
		return envURL, nil
	case hasPassword(flagURL):
		return "", errors.New("-url holds a password, which ps shows to every user: set COURIER_PG_URL instead")
	}
	return flagURL, nil
}

// hasPassword reports whether a PostgreSQL connection string carries a
// password: a URL's in its user information or query, a key=value
// string's as a parameter.
func hasPassword(conn string) bool {
	u, err := url.Parse(conn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return strings.Contains(conn, "password")
	}
	_, set := u.User.Password()
	return set || u.Query().Has("password")
}

type options struct {
	url     string
	addr    string
	n       int
	batch   int
	timeout time.Duration
	logger  *slog.Logger // the worker's and the receiver's
	// onReceive, when set, runs in the receiving function before it
	// writes, and its error fails the notification: tests hold an
	// attempt in flight with it.
	onReceive func(ctx context.Context) error
}

// The example's own tables: the sender's business rows, written in the
// transactions that enqueue their notifications, and the receiver's
// effects, written in the transactions that record them in the Inbox.
const schema = `
CREATE TABLE IF NOT EXISTS example_events (
    run             TEXT   NOT NULL,
    event_id        TEXT   NOT NULL,
    notification_id TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (run, event_id)
);
CREATE TABLE IF NOT EXISTS example_received (
    run             TEXT   NOT NULL,
    notification_id TEXT   NOT NULL,
    received_at     BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS example_received_run ON example_received (run, notification_id);`

func run(ctx context.Context, o options, out io.Writer) (ok bool, err error) {
	if o.n < 1 || o.batch < 1 {
		return false, errors.New("-n and -batch must be at least 1")
	}
	if o.timeout <= 0 {
		return false, errors.New("-timeout must be positive")
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, errors.New("the time ran out (-timeout)"))
	defer cancel()

	s, closeStore, err := openStore(ctx, o.url)
	if err != nil {
		return false, err
	}
	defer func() { err = errors.Join(err, closeStore()) }()
	db := s.DB()

	// Both ends share a fresh Standard Webhooks secret. A real deployment
	// keeps it in its secret store.
	key, err := signature.ParseStandardWebhooksKey("example", signature.NewStandardWebhooksSecret())
	if err != nil {
		return false, err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "example-sender", Keys: []signature.StandardWebhooksKey{key},
	})
	if err != nil {
		return false, err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return false, err
	}

	runID := newRunID()
	notes, err := notifications(runID, o.n)
	if err != nil {
		return false, err
	}

	// The receiving application: one row per notification, in the
	// transaction that records it in the Inbox.
	receiver, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Logger: o.logger}, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
		if o.onReceive != nil {
			if err := o.onReceive(ctx); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO example_received (run, notification_id, received_at) VALUES ($1, $2, $3)",
			n.SiteID, n.NotificationID, time.Now().UnixMicro())
		return err
	})
	if err != nil {
		return false, err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return false, err
	}
	mux := http.NewServeMux()
	mux.Handle("/terminal", receiver)
	srv := serve.Server(mux)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, srv.Shutdown(shutdownCtx))
		if served := <-served; !errors.Is(served, http.ErrServerClosed) {
			err = errors.Join(err, served)
		}
	}()
	endpoint, guard, err := endpointOf(ln.Addr())
	if err != nil {
		return false, err
	}

	// The sending side's worker. Its Hook tells the tracker how each of
	// this run's deliveries ended.
	tr := newTracker(notes)
	worker, err := client.NewWorker(client.Config{
		Store:     s,
		Owner:     "example-" + runID,
		Signer:    signer,
		Transport: guard.Transport(),
		Hook:      tr.observe,
		Logger:    o.logger,
	})
	if err != nil {
		return false, err
	}
	// The worker runs on a context of its own and is stopped softly when
	// run returns, at the end, on a signal or when the time runs out:
	// it claims nothing more and gives back what it has not started, and
	// the attempts in flight finish and are settled, for up to 10 s
	// (cut short then, and due again at once). Cancelling its context
	// instead would cut them short at once, each counted as an attempt.
	// The receiver's server is shut down after it (deferred before), so
	// those attempts are answered.
	worked := make(chan error, 1)
	go func() { worked <- worker.Run(context.WithoutCancel(ctx)) }()
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err = errors.Join(err, worker.Stop(stopCtx), <-worked)
	}()

	started := time.Now()
	if err := enqueue(ctx, s, endpoint, runID, notes, o.batch); err != nil {
		return false, err
	}
	enqueued := time.Since(started)

	select {
	case <-tr.done:
	case <-ctx.Done():
		return false, fmt.Errorf("%d of %d deliveries settled: %w", tr.settled(), o.n, context.Cause(ctx)) // the time ran out, or a signal came
	}
	delivered := time.Since(started)

	sum := summary{run: runID, n: o.n, batch: o.batch, endpoint: endpoint, enqueued: enqueued, delivered: delivered}
	sum.succeeded, sum.failed, sum.attempts = tr.counts()
	if err := db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT notification_id), COUNT(*) - COUNT(DISTINCT notification_id)
		FROM example_received WHERE run = $1`, runID).Scan(&sum.receivedOnce, &sum.extra); err != nil {
		return false, err
	}
	sum.print(out)
	return sum.ok(), nil
}

// openStore migrates the database at url, creates the example's own
// tables there and opens courier's Store on it. One Store serves both
// ends here: the sender's Outbox and the receiver's Inbox. In a real
// deployment each side has its own.
//
// The function it returns closes the Store, then the database, which
// store.Open leaves to its caller. Close the Store, not only the
// database: Store.Close is what makes every later call on it fail at
// once, and tells a worker's Run still going that it must stop (closing
// the database alone leaves such a Run claiming, and failing, for ever).
// Stop the workers and receivers using the Store first.
func openStore(ctx context.Context, url string) (*store.Store, func() error, error) {
	db, err := sqlx.Open(postgres.DriverName, url) // importing store/postgres registers pgx's driver
	if err != nil {
		return nil, nil, err
	}
	// Enough connections for the worker's attempts settling at once, the
	// receiver's transactions and the enqueuer, kept open between uses.
	db.SetMaxOpenConns(48)
	db.SetMaxIdleConns(48)
	if err := store.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("creating the example's tables: %w", err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return s, func() error { return errors.Join(s.Close(), db.Close()) }, nil
}

// newRunID names one run of the program: its notifications' site_id.
func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "run-" + hex.EncodeToString(b[:])
}

// note is one notification of this run.
type note struct {
	eventID string
	id      string
	payload []byte
}

// notifications returns the run's n terminal notifications.
func notifications(runID string, n int) ([]note, error) {
	notes := make([]note, n)
	for i := range notes {
		event := runID + "-" + strconv.Itoa(i)
		lifecycle := ack.Digest([]byte("lifecycle-" + event))
		t, err := ack.NewTerminal(ack.Terminal{
			EventID: event, SiteID: runID, PlanID: "plan-" + strconv.Itoa(i%10), WebsiteVersion: "v1",
			SourceSequence: json.Number(strconv.Itoa(i + 1)), JobCount: "1", ChangeSHA256: ack.Digest([]byte("change-" + event)),
			LifecycleBindingSHA256: ack.Digest([]byte("binding-" + runID)), TerminalStatus: "published",
			LifecycleSHA256: &lifecycle,
		})
		if err != nil {
			return nil, err
		}
		payload, err := t.Payload()
		if err != nil {
			return nil, err
		}
		notes[i] = note{eventID: event, id: t.NotificationID, payload: payload}
	}
	return notes, nil
}

// enqueue writes the run's business rows and enqueues their notifications,
// batch by batch, each batch in one transaction: a notification exists
// exactly when its row does.
func enqueue(ctx context.Context, s *store.Store, endpoint, runID string, notes []note, batch int) error {
	for start := 0; start < len(notes); start += batch {
		if err := enqueueBatch(ctx, s, endpoint, runID, notes[start:min(start+batch, len(notes))]); err != nil {
			return err
		}
	}
	return nil
}

func enqueueBatch(ctx context.Context, s *store.Store, endpoint, runID string, notes []note) error {
	tx, err := s.DB().BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	now := time.Now().UnixMicro()
	for _, n := range notes {
		if _, err := tx.ExecContext(ctx, "INSERT INTO example_events (run, event_id, notification_id, created_at) VALUES ($1, $2, $3, $4)",
			runID, n.eventID, n.id, now); err != nil {
			return err
		}
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: n.id, Endpoint: endpoint, Payload: n.payload, Profile: ack.ProfileTerminal,
		}); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// endpointOf returns the receiver's URL for a listener on addr, and the SSRF
// guard that admits exactly that address and port: the worker refuses
// every other private destination. A listener on all interfaces is reached
// over loopback.
func endpointOf(addr net.Addr) (string, client.Guard, error) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return "", client.Guard{}, fmt.Errorf("listener address %s: %w", addr, err)
	}
	ip := ap.Addr().Unmap()
	if ip.IsUnspecified() {
		ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	guard := client.Guard{
		AllowHTTP:     true,
		AllowPorts:    []uint16{ap.Port()},
		AllowPrefixes: []netip.Prefix{netip.PrefixFrom(ip, ip.BitLen())},
	}
	return "http://" + netip.AddrPortFrom(ip, ap.Port()).String() + "/terminal", guard, nil
}

// tracker follows this run's deliveries through the worker's Hook and
// closes done once each has reached a final status.
type tracker struct {
	mu        sync.Mutex
	pending   map[string]bool // notification id -> not yet final
	succeeded int
	failed    int
	attempts  int
	done      chan struct{}
}

func newTracker(notes []note) *tracker {
	t := &tracker{pending: make(map[string]bool, len(notes)), done: make(chan struct{})}
	for _, n := range notes {
		t.pending[n.id] = true
	}
	return t
}

// observe is the worker's Hook.
func (t *tracker) observe(e client.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ours := t.pending[e.NotificationID]; !ours {
		return // a delivery left over from an earlier run
	}
	t.attempts++
	if !e.Status.Final() || !t.pending[e.NotificationID] {
		return
	}
	t.pending[e.NotificationID] = false
	if e.Status == courier.StatusSucceeded {
		t.succeeded++
	} else {
		t.failed++
	}
	if t.succeeded+t.failed == len(t.pending) {
		close(t.done)
	}
}

func (t *tracker) settled() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.succeeded + t.failed
}

func (t *tracker) counts() (succeeded, failed, attempts int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.succeeded, t.failed, t.attempts
}

// summary is the run's outcome.
type summary struct {
	run, endpoint               string
	n, batch                    int
	enqueued, delivered         time.Duration
	succeeded, failed, attempts int
	receivedOnce, extra         int
}

func (s summary) ok() bool {
	return s.succeeded == s.n && s.failed == 0 && s.receivedOnce == s.n && s.extra == 0
}

func (s summary) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	row := func(label string, format string, args ...any) {
		fmt.Fprintf(w, "%s\t"+format+"\n", append([]any{label}, args...)...)
	}
	fmt.Fprintf(out, "courier on PostgreSQL, %s, receiver at %s\n", s.run, s.endpoint)
	row("enqueued", "%d notifications in transactions of up to %d, %v", s.n, s.batch, s.enqueued.Round(time.Millisecond))
	row("delivered", "%d succeeded, %d failed, %d attempts, all settled after %v (%.0f/s)",
		s.succeeded, s.failed, s.attempts, s.delivered.Round(time.Millisecond), float64(s.succeeded)/s.delivered.Seconds())
	row("received", "%d applied once, %d applied again", s.receivedOnce, s.extra)
	w.Flush()
	if s.ok() {
		fmt.Fprintln(out, "verdict: OK, every notification delivered and applied exactly once")
	} else {
		fmt.Fprintln(out, "verdict: FAILED")
	}
}

// Command quickstart runs both ends of courier in one process, on SQLite
// files: an application enqueues terminal notifications inside its own
// business transactions (some roll back), a worker delivers them over
// loopback HTTP to a receiver that injects faults, and the run ends with a
// summary. It exits 0 only if every committed notification was processed
// exactly once and no rolled-back one arrived.
//
//	go run ./examples/quickstart [-n 1000] [-faults=true] [-dir path] [-seed 1] [-timeout 2m]
//
// With -dir the databases are kept there, so a run that was killed can be
// started again with the same -dir (and -n and -seed): it finishes the same
// notifications and reaches the same verdict. Ctrl-C (or SIGTERM) stops a
// run softly: the attempts in flight finish first; a second Ctrl-C ends
// it at once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/testserver"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

func main() {
	var o options
	flag.IntVar(&o.n, "n", 1000, "notifications to attempt (a fifth of the business transactions roll back)")
	flag.BoolVar(&o.faults, "faults", true, "inject receiver faults (503s, 429s, drops after commit, slow answers)")
	flag.StringVar(&o.dir, "dir", "", "keep the databases in this folder (resume a killed run with the same -dir, -n and -seed)")
	flag.Int64Var(&o.seed, "seed", 1, "seed of the rollbacks and the fault script")
	flag.DurationVar(&o.limit, "timeout", 2*time.Minute, "give up after this long")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop) // a second signal ends the process at once
	s, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(2)
	}
	s.print(os.Stdout)
	if !s.ok() {
		os.Exit(1)
	}
}

type options struct {
	n      int
	faults bool
	dir    string
	seed   int64
	limit  time.Duration
	// logger is the worker's. Nil discards its lines, on purpose: the run
	// speaks through its summary. (A worker given no Logger at all would
	// pass its Warn and Error lines to slog.Default().)
	logger *slog.Logger
	// process, when set, is extra work of the receiving application,
	// run in its transaction: tests hold an attempt in flight with it.
	process func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error
}

// The secret both ends share. A real deployment keeps it out of the code.
const secret = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func run(ctx context.Context, o options) (summary, error) {
	if o.n < 1 {
		return summary{}, errors.New("-n must be at least 1")
	}
	if o.limit <= 0 {
		return summary{}, errors.New("-timeout must be positive")
	}
	dir := o.dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "courier-quickstart-")
		if err != nil {
			return summary{}, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return summary{}, err
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.limit, errors.New("the time ran out (-timeout)"))
	defer cancel()

	// Both stores run in this process, on its clock: the receiver's
	// recorded_at and the sender's enqueue time are comparable.
	sender, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{
		// The fault script fails every first attempt on purpose; a breaker
		// would rightly pause this endpoint. Here it stays out of the way.
		Breaker: store.BreakerConfig{Threshold: 1 << 30},
	})
	if err != nil {
		return summary{}, err
	}
	defer sender.Close()
	receiverStore, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		return summary{}, err
	}
	defer receiverStore.Close()

	key, err := signature.ParseStandardWebhooksKey("quickstart", secret)
	if err != nil {
		return summary{}, err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "quickstart-sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		return summary{}, err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return summary{}, err
	}

	// The receiving application.
	var script couriertest.Script
	if o.faults {
		script = couriertest.SeededScript(o.seed, couriertest.ScriptSpec{
			FirstAttempt503: true, RateLimited: 0.1, DropAfterCommit: 0.1, Delay: 0.05, DelayBy: 400 * time.Millisecond,
		})
	}
	srv, err := startReceiver(dir, testserver.Config{Store: receiverStore, Verifier: verifier, Script: script, Process: o.process}) //nolint:contextcheck // the test server, like httptest, takes no context
	if err != nil {
		return summary{}, err
	}
	defer srv.Close()

	// The sending application: business rows and notifications, committed
	// or rolled back together.
	app := &application{store: sender, outbox: sender.Outbox, endpoint: srv.URL + "/terminal", seed: o.seed}
	if err := app.migrate(ctx); err != nil {
		return summary{}, err
	}
	committed, rolledBack, err := app.placeOrders(ctx, o.n)
	if err != nil {
		return summary{}, err
	}

	worker, err := client.NewWorker(client.Config{
		Store:        sender,
		Signer:       signer,
		Transport:    loopback(srv.URL).Transport(),
		Concurrency:  16,
		Timeout:      250 * time.Millisecond, // the slow answers arrive after it
		Lease:        2 * time.Second,
		PollInterval: 50 * time.Millisecond,
		Backoff:      client.ExponentialBackoff(20*time.Millisecond, 500*time.Millisecond, 0.2),
		Logger:       o.logger,
	})
	if err != nil {
		return summary{}, err
	}
	// The worker runs on a context of its own and is stopped softly, once
	// every delivery is settled, or on a signal or the time limit: it
	// claims nothing more, and the attempts in flight finish (cut short
	// after 10 s). Cancelling its context instead would cut them short at
	// once, each counted against its delivery's attempts.
	done := make(chan error, 1)
	go func() { done <- worker.Run(context.WithoutCancel(ctx)) }()
	waitErr := waitSettled(ctx, sender)
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelStop()
	if err := errors.Join(worker.Stop(stopCtx), <-done); err != nil {
		return summary{}, err
	}
	if waitErr != nil {
		return summary{}, waitErr
	}

	return summarize(ctx, sender, receiverStore, srv, committed, rolledBack)
}

// startReceiver starts the receiving application. Its address is kept in
// dir, because the outbox holds the endpoint URLs: a resumed run must
// listen where the first one did.
func startReceiver(dir string, cfg testserver.Config) (*testserver.Server, error) {
	srv, err := testserver.NewUnstarted(cfg)
	if err != nil {
		return nil, err
	}
	addrFile := filepath.Join(dir, "receiver.addr")
	switch addr, err := os.ReadFile(addrFile); {
	case err == nil:
		l, err := net.Listen("tcp", string(addr))
		if err != nil {
			srv.Listener.Close()
			return nil, fmt.Errorf("the earlier run's receiver address %s is taken: %w", addr, err)
		}
		srv.Listener.Close()
		srv.Listener = l
	case !errors.Is(err, fs.ErrNotExist):
		srv.Listener.Close()
		return nil, err // a new address would not be the one the outbox holds
	}
	srv.Start()
	if err := os.WriteFile(addrFile, []byte(srv.Listener.Addr().String()), 0o644); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// loopback opens the SSRF guard for exactly the receiver's address: the
// worker refuses every other private destination.
func loopback(rawURL string) client.Guard {
	u, _ := url.Parse(rawURL)
	port, _ := strconv.Atoi(u.Port())
	return client.Guard{
		AllowHTTP:     true,
		AllowPorts:    []uint16{uint16(port)},
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix(u.Hostname() + "/32")},
	}
}

// waitSettled returns once no delivery is pending, leased or waiting.
func waitSettled(ctx context.Context, s *store.Store) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		h, err := s.Outbox.Health(ctx)
		if err != nil {
			return err
		}
		if h.Counts[courier.StatusPending]+h.Counts[courier.StatusLeased]+h.Counts[courier.StatusRetryWait] == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deliveries still unsettled: %w", context.Cause(ctx)) // the time ran out, or a signal came
		case <-tick.C:
		}
	}
}

// application is the sending side's business logic.
type application struct {
	store    *store.Store
	outbox   *store.Outbox
	endpoint string
	seed     int64
}

func (a *application) migrate(ctx context.Context) error {
	_, err := a.store.DB().ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		number INTEGER PRIMARY KEY, notification_id TEXT NOT NULL, enqueued_at INTEGER NOT NULL)`)
	return err
}

// placeOrders runs n business transactions. Each writes an order and
// enqueues its terminal notification; a fifth (chosen by the seed) roll
// back. Orders already placed by an earlier run are left as they are, so a
// resumed run enqueues nothing twice.
func (a *application) placeOrders(ctx context.Context, n int) (committed, rolledBack []string, err error) {
	for i := range n {
		note, payload, err := notification(i)
		if err != nil {
			return nil, nil, err
		}
		if a.rollsBack(i) {
			rolledBack = append(rolledBack, note.NotificationID)
		} else {
			committed = append(committed, note.NotificationID)
		}
		if err := a.placeOrder(ctx, i, note.NotificationID, payload); err != nil {
			return nil, nil, err
		}
	}
	return committed, rolledBack, nil
}

func (a *application) placeOrder(ctx context.Context, i int, id string, payload []byte) error {
	// Begin: the order and its notification go through the connection
	// courier writes through, queueing with the worker's own writes.
	tx, err := a.store.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, "INSERT OR IGNORE INTO orders (number, notification_id, enqueued_at) VALUES (?, ?, ?)", i, id, time.Now().UnixMicro())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return nil // placed by an earlier run
	}
	if _, err := a.outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: id, Endpoint: a.endpoint, Payload: payload, Profile: ack.ProfileTerminal, MaxAttempts: 25,
	}); err != nil {
		return err
	}
	if a.rollsBack(i) {
		return tx.Rollback() // the business decided otherwise: nothing is sent
	}
	return tx.Commit()
}

func (a *application) rollsBack(i int) bool {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d", a.seed, i)
	return h.Sum64()%5 == 0
}

// notification returns the i-th order's terminal notification.
func notification(i int) (ack.Terminal, []byte, error) {
	status, lifecycle := "published", ptr(ack.Digest([]byte("lifecycle-"+strconv.Itoa(i))))
	if i%7 == 0 {
		status, lifecycle = "cancelled", nil
	}
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: "order-" + strconv.Itoa(i), SiteID: "site-1", PlanID: "plan-" + strconv.Itoa(i%13),
		WebsiteVersion: "v1", SourceSequence: json.Number(strconv.Itoa(i + 1)), JobCount: json.Number(strconv.Itoa(1 + i%4)),
		ChangeSHA256: ack.Digest([]byte("change-" + strconv.Itoa(i))), LifecycleBindingSHA256: ack.Digest([]byte("binding")),
		TerminalStatus: status, LifecycleSHA256: lifecycle,
	})
	if err != nil {
		return ack.Terminal{}, nil, err
	}
	payload, err := n.Payload()
	return n, payload, err
}

func ptr[T any](v T) *T { return &v }

// summary is the run's outcome, read from both databases.
type summary struct {
	committed, rolledBack                                int
	delivered, failed, unsent                            int
	processedOnce, processedTwiceOrMore, missing, leaked int
	requests, duplicates, retries, faults                int
	p50, p99                                             time.Duration
}

func summarize(ctx context.Context, sender, receiver *store.Store, srv *testserver.Server, committed, rolledBack []string) (summary, error) {
	s := summary{committed: len(committed), rolledBack: len(rolledBack)}
	h, err := sender.Outbox.Health(ctx)
	if err != nil {
		return s, err
	}
	s.delivered, s.failed = h.Counts[courier.StatusSucceeded], h.Counts[courier.StatusFailed]+h.Counts[courier.StatusQuarantined]
	s.unsent = h.Counts[courier.StatusPending] + h.Counts[courier.StatusLeased] + h.Counts[courier.StatusRetryWait]
	if err := sender.DB().GetContext(ctx, &s.retries, "SELECT COUNT(*) FROM courier_attempts WHERE outcome IN ('retry', 'lease_expired')"); err != nil {
		return s, err
	}
	effects, err := srv.Effects(ctx)
	if err != nil {
		return s, err
	}
	for _, id := range committed {
		switch effects[id] {
		case 0:
			s.missing++
		case 1:
			s.processedOnce++
		default:
			s.processedTwiceOrMore++
		}
	}
	for _, id := range rolledBack {
		if effects[id] > 0 {
			s.leaked++
		}
	}
	st := srv.Stats()
	s.requests, s.duplicates, s.faults = st.Requests, st.Replayed, st.Faulted+st.Dropped+st.Delayed
	s.p50, s.p99, err = latency(ctx, sender, receiver)
	return s, err
}

// latency is enqueue-commit to processed, per notification, across both
// databases (one process, one clock).
func latency(ctx context.Context, sender, receiver *store.Store) (p50, p99 time.Duration, err error) {
	enqueued := map[string]int64{}
	rows, err := sender.DB().QueryContext(ctx, "SELECT notification_id, enqueued_at FROM orders")
	if err != nil {
		return 0, 0, err
	}
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			rows.Close()
			return 0, 0, err
		}
		enqueued[id] = at
	}
	if err := rows.Close(); err != nil {
		return 0, 0, err
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	rows, err = receiver.DB().QueryContext(ctx, "SELECT effect_key, MIN(recorded_at) FROM couriertest_effects GROUP BY effect_key")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	var ds []time.Duration
	for rows.Next() {
		var id string
		var at int64
		if err := rows.Scan(&id, &at); err != nil {
			return 0, 0, err
		}
		if e, ok := enqueued[id]; ok {
			ds = append(ds, time.Duration(at-e)*time.Microsecond)
		}
	}
	if len(ds) == 0 {
		return 0, 0, rows.Err()
	}
	slices.Sort(ds)
	return ds[len(ds)*50/100], ds[min(len(ds)-1, len(ds)*99/100)], rows.Err()
}

func (s summary) ok() bool {
	return s.processedOnce == s.committed && s.processedTwiceOrMore == 0 && s.missing == 0 &&
		s.leaked == 0 && s.failed == 0 && s.unsent == 0 && s.delivered == s.committed
}

func (s summary) print(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(label string, v any) { fmt.Fprintf(w, "%s\t%v\t\n", label, v) }
	fmt.Fprintln(out, "courier quickstart")
	row("enqueued (committed)", s.committed)
	row("rolled back", s.rolledBack)
	row("delivered", s.delivered)
	row("failed", s.failed)
	row("receiver requests", s.requests)
	row("faults injected", s.faults)
	row("retries", s.retries)
	row("duplicates absorbed by the receiver", s.duplicates)
	row("processed exactly once", s.processedOnce)
	row("processed more than once", s.processedTwiceOrMore)
	row("never processed", s.missing)
	row("rolled back but received", s.leaked)
	row("enqueue-to-processed p50", s.p50.Round(100*time.Microsecond))
	row("enqueue-to-processed p99", s.p99.Round(100*time.Microsecond))
	w.Flush()
	if s.ok() {
		fmt.Fprintln(out, "verdict: OK — every committed notification processed exactly once, none rolled back arrived")
	} else {
		fmt.Fprintln(out, "verdict: FAILED")
	}
}

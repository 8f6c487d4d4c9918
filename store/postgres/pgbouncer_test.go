package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/admin"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// bouncedOrder is the notification the test's receiver takes.
type bouncedOrder struct {
	ID string `json:"id" validate:"required,courier_token"`
}

func (o bouncedOrder) DedupeKey() string { return o.ID }

// withExecMode returns dbURL with pgx's default_query_exec_mode set, as
// the package doc tells an application behind a transaction-mode pooler.
func withExecMode(t *testing.T, dbURL, mode string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("default_query_exec_mode", mode)
	u.RawQuery = q.Encode()
	return u.String()
}

// openBounced opens a pool of its own on dbURL, sized as the README says
// for a worker of concurrency workers, and a Store on it.
func openBounced(t *testing.T, dbURL string, concurrency int) *store.Store {
	t.Helper()
	db, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(concurrency + 3)
	db.SetMaxIdleConns(concurrency + 3)
	s, err := store.Open(t.Context(), db, store.Config{})
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); db.Close() })
	return s
}

// TestSenderAndReceiverThroughPgBouncer: an application set up as the
// package doc says for a transaction-mode pooler (a URL with
// default_query_exec_mode=simple_protocol, nothing else) runs whole
// through a real PgBouncer in transaction mode holding fewer server
// connections than one worker's Concurrency: it migrates through it,
// enqueues in its own transactions, two worker processes deliver every
// notification at once, a receiver on the same database applies each
// exactly once, the outbox ends with every delivery succeeded, and the
// admin shows it.
func TestSenderAndReceiverThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const (
		notifications = 40
		concurrency   = 8
		serverConns   = 2 // PgBouncer's default_pool_size, below concurrency
	)
	dbURL := withExecMode(t, pgtest.PgBouncer(t, pgtest.URL(t), serverConns), "simple_protocol")

	migrateDB, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer migrateDB.Close()
	if err := store.Migrate(ctx, migrateDB); err != nil {
		t.Fatalf("Migrate through PgBouncer: %v", err)
	}
	senders := []*store.Store{openBounced(t, dbURL, concurrency), openBounced(t, dbURL, concurrency)}
	inbox := openBounced(t, dbURL, concurrency)

	keys := couriertest.StandardWebhooksKeys("orders")
	effects, err := couriertest.NewEffects(ctx, inbox)
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan string, 4*notifications)
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o bouncedOrder) error {
			if err := effects.Record(ctx, tx, o.ID); err != nil {
				return err
			}
			select {
			case applied <- o.ID:
			default: // a redelivery once the test stopped reading: it is counted by effects
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()

	// Two worker processes at once, each with its own Store and pool.
	// Through the pooler they poll: each says so once, as its Run begins.
	// The notifications are enqueued once both have: a Run whose first
	// query through the pooler waits for one of its few server
	// connections could otherwise be stopped before it asked.
	workers := make([]*client.Worker, len(senders))
	logs := make([]*logtest.Records, len(senders))
	ran := make(chan error, len(senders))
	polling := make([]chan struct{}, len(senders)) // closed as each says it polls
	for i, s := range senders {
		logs[i], polling[i] = &logtest.Records{}, make(chan struct{})
		var once sync.Once
		said := logtest.OnMessage{Msg: "worker: wake-ups unavailable, polling", Do: func() { once.Do(func() { close(polling[i]) }) }}
		w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, Transport: srv.Guard().Transport(), Concurrency: concurrency,
			Logger: slog.New(slog.NewMultiHandler(logs[i], said))})
		if err != nil {
			t.Fatal(err)
		}
		workers[i] = w
		go func() { ran <- w.Run(ctx) }()
	}
	for i := range senders {
		select {
		case <-polling[i]:
		case <-ctx.Done():
			t.Fatal("a worker never said it polls behind the pooler")
		}
	}

	// The application enqueues in its own transactions, four at a time.
	var wg sync.WaitGroup
	errs := make(chan error, notifications)
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < notifications; i += 4 {
				id := fmt.Sprintf("o-%d", i)
				tx, err := senders[0].Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				_, err = senders[0].Outbox.Enqueue(ctx, tx, store.EnqueueParams{
					NotificationID: id, Endpoint: srv.URL + "/orders", Payload: fmt.Appendf(nil, `{"id":%q}`, id),
				})
				if err != nil {
					tx.Rollback()
					errs <- err
					return
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue through PgBouncer: %v", err)
	}

	// Each notification reaches the receiver's function; then the workers
	// stop, settling what they have in flight.
	seen := map[string]bool{}
	for len(seen) < notifications {
		select {
		case id := <-applied:
			seen[id] = true
		case <-ctx.Done():
			t.Fatalf("%d of %d notifications applied before the test's end", len(seen), notifications)
		}
	}
	for _, w := range workers {
		if err := w.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range workers {
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	for i, l := range logs {
		var polling []string
		for _, r := range l.All() {
			if r.Level == slog.LevelWarn && strings.Contains(r.Message, "wake-ups") {
				r.Attrs(func(a slog.Attr) bool { polling = append(polling, r.Message+": "+a.Value.String()); return true })
			}
		}
		if len(polling) != 1 || !strings.Contains(polling[0], "connection pooler") {
			t.Errorf("worker %d logged %q about its wake-ups, want one warning that it polls behind the pooler", i, polling)
		}
	}

	h, err := senders[1].Outbox.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Counts[courier.StatusSucceeded] != notifications || h.Status != store.HealthOK {
		t.Fatalf("outbox after the workers stopped: %s %v, want all %d succeeded", h.Status, h.Counts, notifications)
	}
	// The admin reads the outbox through PgBouncer too.
	ops, err := admin.NewHandler(admin.Config{Store: senders[1]})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/health", "/api/deliveries", "/api/endpoints", "/"} {
		rec := httptest.NewRecorder()
		ops.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("admin GET %s = %d %s, want 200", path, rec.Code, rec.Body)
		}
	}
	counts, err := effects.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id := range seen {
		if counts[id] != 1 {
			t.Errorf("%s applied %d times, want once", id, counts[id])
		}
	}
}

// TestPreparedStatementsBehindPgBouncerFailSayingWhatToChoose: pgx's
// default query exec mode prepares each statement by name on its
// connection, and a transaction-mode PgBouncer hands that server
// connection to the next client, whose pgx prepares the same name again.
// The store's error is database_unavailable, as the package doc says, and
// says what to do about it: which setting of the URL prepares nothing.
func TestPreparedStatementsBehindPgBouncerFailSayingWhatToChoose(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.PgBouncer(t, pgtest.URL(t), 1) // one server connection: the second pool gets the first's
	migrateDB, err := sqlx.Open(postgres.DriverName, withExecMode(t, dbURL, "simple_protocol"))
	if err != nil {
		t.Fatal(err)
	}
	defer migrateDB.Close()
	if err := store.Migrate(ctx, migrateDB); err != nil {
		t.Fatal(err)
	}
	var last error
	for range 2 { // the first pool prepares, the second finds the names taken
		db, err := sqlx.Open(postgres.DriverName, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s, err := store.Open(ctx, db, store.Config{})
		if err != nil {
			last = err
			break
		}
		defer s.Close()
		if _, err := s.Outbox.Health(ctx); err != nil {
			last = err
			break
		}
	}
	if last == nil {
		t.Fatal("two pools preparing statements through one PgBouncer server connection both worked; want the second refused")
	}
	if !errors.Is(last, courier.CodeDatabaseUnavailable) || !strings.Contains(last.Error(), "default_query_exec_mode=simple_protocol") {
		t.Fatalf("error = %v; want database_unavailable naming default_query_exec_mode=simple_protocol", last)
	}
}

// TestAWorkerOnADirectConnectionIsWokenByEnqueuesThroughPgBouncer: the
// setup the package doc gives for wake-ups behind a transaction-mode
// pooler. The application enqueues through PgBouncer; the worker's Store,
// on a direct connection, listens, and is woken when the enqueue commits.
func TestAWorkerOnADirectConnectionIsWokenByEnqueuesThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct := migrated.URL(t)
	app := openBounced(t, withExecMode(t, pgtest.PgBouncer(t, direct, 1), "simple_protocol"), 1)
	worker := openBounced(t, direct, 1)

	wake, stop, err := protocol.For(worker).Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "o-1", Endpoint: "https://receiver.example/orders", Payload: []byte(`{"id":"o-1"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the worker on a direct connection was not woken by an enqueue committed through PgBouncer")
	}
}

// TestAWorkerBehindPgBouncerPollsAndLeavesNoListen: a worker whose Store
// goes through a transaction-mode pooler cannot be woken (its LISTEN runs
// on whichever server connection the pooler lends, and its client waits on
// none), and the LISTEN it left on the server connection made every
// enqueue's notification land in the connections of other clients, where
// pgx keeps it unread for as long as the connection lives. Listen refuses
// through a pooler, saying so and what to do (config_invalid, which a Run
// logs once before it polls), and leaves no LISTEN behind on the one
// server connection the pooler holds.
func TestAWorkerBehindPgBouncerPollsAndLeavesNoListen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openBounced(t, withExecMode(t, pgtest.PgBouncer(t, migrated.URL(t), 1), "simple_protocol"), 1)

	_, stop, err := protocol.For(s).Listen(ctx)
	if err == nil {
		defer stop()
	}
	if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), "pooler") {
		t.Errorf("Listen through PgBouncer: %v, want config_invalid naming the pooler", err)
	}
	var channels []string
	if err := s.DB().SelectContext(ctx, &channels, "SELECT pg_listening_channels()"); err != nil {
		t.Fatal(err)
	}
	if len(channels) != 0 {
		t.Fatalf("the pooler's one server connection listens on %q after a worker's Listen through it, want nothing", channels)
	}
}

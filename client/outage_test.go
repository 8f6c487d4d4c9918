package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

// note is what the outage tests' receiver accepts.
type note struct {
	NotificationID string `json:"notification_id" validate:"required"`
}

func (n note) DedupeKey() string { return n.NotificationID }

// outage is a worker and a deduping receiver sharing a PostgreSQL server
// of their own, which the test stops and starts again.
type outage struct {
	pg        *pgtest.Restartable
	db        *sqlx.DB
	store     *store.Store
	worker    *client.Worker
	logs      *capture
	claims    atomic.Int64 // claims started
	delivered chan string  // the notification ids delivered
	signer    signature.Signer
	endpoint  string
	hold      atomic.Pointer[chan struct{}] // when set, the receiver's answers wait for it to close before they are sent
	answered  chan string                   // an answer held by hold is ready
	exited    <-chan struct{}               // closed when Run returns
}

// setupOutage starts the server, the receiver and the worker, tuned by
// tune when it is not nil. When clock is not nil it is the store's clock
// and the worker's, which then measure leases by it alone.
func setupOutage(t *testing.T, clock *workerClock, tune func(*client.Config)) *outage {
	t.Helper()
	o := &outage{pg: pgtest.StartRestartable(t), logs: newCapture(t), delivered: make(chan string, 100),
		answered: make(chan string, 100)}
	dbURL, err := o.pg.NewDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(32)
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), `CREATE TABLE applied (id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	scfg := store.Config{Tracer: countingTracer{&o.claims}}
	if clock != nil {
		scfg.Now = clock.Now
	}
	s, err := store.Open(t.Context(), db, scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	o.signer, _ = signature.NewStandardWebhooksSigner(key)
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n note) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO applied (id) VALUES ($1)`, n.NotificationID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		rcv.ServeHTTP(rec, r)
		if hold := o.hold.Load(); hold != nil {
			o.answered <- r.Header.Get("webhook-id")
			<-*hold
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	o.endpoint = srv.URL

	cfg := client.Config{Store: s, Signer: o.signer, PollInterval: time.Hour,
		Transport: loopbackGuard(t, srv.URL).Transport(),
		Logger:    slog.New(o.logs),
		Hook: func(e client.Event) {
			if e.Status == courier.StatusSucceeded {
				o.delivered <- e.NotificationID
			}
		}}
	if clock != nil {
		cfg.Now = clock.Now
	}
	if tune != nil {
		tune(&cfg)
	}
	if o.worker, err = client.NewWorker(cfg); err != nil {
		t.Fatal(err)
	}
	o.db, o.store = db, s
	return o
}

// countingTracer counts the courier.claim spans started.
type countingTracer struct{ claims *atomic.Int64 }

func (c countingTracer) Start(ctx context.Context, name string, _ courier.SpanKind, _ ...slog.Attr) (context.Context, courier.Span) {
	if name == "courier.claim" {
		c.claims.Add(1)
	}
	return ctx, nopSpan{}
}
func (countingTracer) Inject(context.Context) courier.TraceContext { return courier.TraceContext{} }
func (countingTracer) Extract(ctx context.Context, _ courier.TraceContext) context.Context {
	return ctx
}

// run runs the worker until the test ends; Run must not return before.
func (o *outage) run(t *testing.T) {
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- o.worker.Run(context.Background())
		close(exited)
	}()
	o.exited = exited
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := o.worker.Stop(ctx); err != nil {
			t.Errorf("Stop = %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func (o *outage) enqueue(t *testing.T, id string) {
	t.Helper()
	tx, err := o.store.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := o.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: o.endpoint + "/hooks",
		Payload: fmt.Appendf(nil, `{"notification_id":%q}`, id)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func (o *outage) awaitDelivered(t *testing.T, id, what string) {
	t.Helper()
	select {
	case got := <-o.delivered:
		if got != id {
			t.Fatalf("delivered %s, want %s", got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s was not delivered within 20s; logged: %+v", what, o.logs.lines(""))
	}
}

func (o *outage) awaitLogged(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-o.logs.logged(msg):
	case <-time.After(20 * time.Second):
		t.Fatalf("%q was not logged within 20s; logged: %+v", msg, o.logs.lines(""))
	}
}

// post sends a signed notification straight to the receiver and returns
// its answer.
func (o *outage) post(t *testing.T, id string) *http.Response {
	t.Helper()
	body := fmt.Appendf(nil, `{"notification_id":%q}`, id)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, o.endpoint+"/hooks", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := o.signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// applied returns how many times the receiver applied each notification.
func (o *outage) applied(t *testing.T) map[string]int {
	return appliedCounts(t, o.db)
}

// serverStops are the ways a test stops the PostgreSQL server before it
// starts it again on the same data directory and port.
var serverStops = []struct {
	name string
	how  pgtest.Stop
}{{"fast", pgtest.Fast}, {"immediate", pgtest.Immediate}, {"kill", pgtest.Kill}}

// TestWorkerAndReceiverOutliveARestart: the database server goes away
// (a fast or an immediate shutdown, or its main process killed) and comes
// back on the same data directory and port. Meanwhile the receiver answers
// 503 with Retry-After and records nothing, and the worker's Run keeps
// going without claiming in a loop; once the server is back, a delivery
// enqueued before the Run listens again is sent without another enqueue
// to wake it (PollInterval is an hour), and the receiver has applied each
// notification once.
func TestWorkerAndReceiverOutliveARestart(t *testing.T) {
	for _, tc := range serverStops {
		t.Run(tc.name, func(t *testing.T) {
			o := setupOutage(t, nil, nil)
			o.run(t)
			o.enqueue(t, "before")
			o.awaitDelivered(t, "before", "a delivery enqueued before the outage")

			if err := o.pg.Stop(tc.how); err != nil {
				t.Fatal(err)
			}
			o.awaitLogged(t, "worker: wake-ups lost, listening again")
			claims := o.claims.Load()
			resp := o.post(t, "during")
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("during the outage the receiver answered %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			// Two seconds of outage, during which the worker listens and
			// claims again on timers that back off (100ms, 200ms,
			// 400ms...): a loop would claim thousands of times.
			time.Sleep(2 * time.Second) // the outage's length, not a synchronisation
			if n := o.claims.Load() - claims; n > 10 {
				t.Errorf("the worker made %d claims in 2s of outage (PollInterval 1h)", n)
			} else {
				t.Logf("%d claims in 2s of outage", n)
			}
			select {
			case <-o.exited:
				t.Fatal("Run returned during the outage")
			default:
			}

			if err := o.pg.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			o.enqueue(t, "after")
			o.awaitDelivered(t, "after", "a delivery enqueued as the server came back")
			o.awaitLogged(t, "worker: wake-ups back")
			o.enqueue(t, "listening")
			o.awaitDelivered(t, "listening", "a delivery enqueued once the worker listens again")
			if resp := o.post(t, "during"); resp.StatusCode != http.StatusOK {
				t.Errorf("after the outage the receiver answered %d", resp.StatusCode)
			}
			want := map[string]int{"before": 1, "after": 1, "listening": 1, "during": 1}
			if got := o.applied(t); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("applied %v, want %v", got, want)
			}
		})
	}
}

// TestAClaimCutByTheDatabaseIsMadeAgain: a claim whose connection the
// database ends (pg_terminate_backend, a failover) fails, and the Run
// logs it; the wake-up that made it is spent, so the Run must claim again
// on a timer of its own rather than at the next poll, an hour away: the
// delivery that woke it is sent within seconds, with the LISTEN
// connection untouched and nothing else enqueued.
func TestAClaimCutByTheDatabaseIsMadeAgain(t *testing.T) {
	o := setupOutage(t, nil, nil)
	awaiting := make(chan struct{}, 1)
	client.SetAwaiting(o.worker, func() {
		select {
		case awaiting <- struct{}{}:
		default:
		}
	})
	o.run(t)
	<-awaiting // it listens, made its first claim, found nothing and waits

	terminate, release := o.lockTable(t, "courier_endpoint_limits")
	o.enqueue(t, "cut") // wakes the Run, whose claim waits for the lock
	terminate()
	<-awaiting // the claim failed, and the Run waits again
	if got := o.logs.lines("worker: claim failed"); len(got) != 1 {
		t.Fatalf("claim failures logged: %+v", got)
	}
	release()
	o.awaitDelivered(t, "cut", "the delivery whose claim was cut")
	if got, want := o.applied(t), map[string]int{"cut": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// TestALeaseHeldAcrossAnOutageIsReclaimed: the database goes away while an
// attempt is in flight, after the receiver applied it and before the
// worker settles it, and its lease runs out during the outage. The worker
// cannot record the outcome and logs it; the lease expires and is
// reclaimed, and the delivery is sent again: the receiver answers it from
// its Inbox without applying it twice, and the delivery succeeds.
//
// The lease runs out on a clock the store and the worker share, which the
// test moves once the server has stopped: the attempt is still in flight
// then however long the stop took. On the real clock, with a Timeout of a
// second, an attempt whose answer was held through a slow stop (a loaded
// machine) ran out of time and was settled before the outage.
func TestALeaseHeldAcrossAnOutageIsReclaimed(t *testing.T) {
	for _, tc := range []struct {
		name string
		how  pgtest.Stop
	}{{"fast", pgtest.Fast}, {"kill", pgtest.Kill}} {
		t.Run(tc.name, func(t *testing.T) {
			const lease = 2 * time.Minute
			clock := newWorkerClock()
			o := setupOutage(t, clock, func(c *client.Config) {
				// The Timeout only bounds a failure: the attempt ends
				// when the test lets the receiver answer.
				c.Timeout, c.Lease, c.PollInterval = time.Minute, lease, 200*time.Millisecond
			})
			hold := make(chan struct{})
			o.hold.Store(&hold)
			o.run(t)
			o.enqueue(t, "held")
			<-o.answered // the receiver applied it and committed; the answer waits
			if err := o.pg.Stop(tc.how); err != nil {
				t.Fatal(err)
			}
			clock.Advance(lease) // the outage outlasts the lease
			o.hold.Store(nil)
			close(hold)
			o.awaitLogged(t, "worker: settle failed")
			if err := o.pg.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			o.awaitDelivered(t, "held", "the delivery whose lease outlived the outage")
			if got, want := o.applied(t), map[string]int{"held": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("applied %v, want %v", got, want)
			}
			var outcomes []string
			if err := o.db.SelectContext(t.Context(), &outcomes, `SELECT outcome FROM courier_attempts ORDER BY id`); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(outcomes) != "[lease_expired succeeded]" {
				t.Errorf("attempts log %v, want [lease_expired succeeded]", outcomes)
			}
		})
	}
}

// lockTable takes table in a transaction of its own: a statement that
// reads or writes it meanwhile waits for it. A claim's first statement
// (outbox_claim_look) reads courier_endpoint_limits, which an enqueue does
// not; a settle logs its attempt in courier_attempts. terminate ends the
// backend of the first statement found waiting, and release ends the lock.
func (o *outage) lockTable(t *testing.T, table string) (terminate func(), release func()) {
	t.Helper()
	lock, err := o.db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback() })
	if _, err := lock.ExecContext(t.Context(), `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	terminate = func() {
		t.Helper()
		var pid int
		for pid == 0 { // until the statement blocks on the lock
			if err := lock.GetContext(t.Context(), &pid, `SELECT COALESCE(max(l.pid), 0) FROM pg_locks l
				WHERE NOT l.granted AND l.relation = $1::regclass`, table); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := lock.ExecContext(t.Context(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	release = func() {
		t.Helper()
		if err := lock.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	return terminate, release
}

// TestASettleCutByTheDatabaseIsMadeAgain: the database ends the connection
// of a settle in progress; the worker writes the outcome again, within
// its lease, and the delivery is settled once, sent once.
func TestASettleCutByTheDatabaseIsMadeAgain(t *testing.T) {
	o := setupOutage(t, nil, nil)
	hold := make(chan struct{})
	o.hold.Store(&hold)
	o.run(t)
	o.enqueue(t, "settled")
	<-o.answered
	terminate, release := o.lockTable(t, "courier_attempts")
	o.hold.Store(nil)
	close(hold)
	terminate()
	release()
	o.awaitDelivered(t, "settled", "the delivery whose settle was cut")
	if got, want := o.applied(t), map[string]int{"settled": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("applied %v, want %v", got, want)
	}
	var outcomes []string
	if err := o.db.SelectContext(t.Context(), &outcomes, `SELECT outcome FROM courier_attempts ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(outcomes) != "[succeeded]" {
		t.Errorf("attempts log %v, want [succeeded]", outcomes)
	}
	if got := o.logs.lines("worker: settle failed"); len(got) != 0 {
		t.Errorf("settle failed: %+v", got)
	}
}

// appliedCounts returns how many times a test receiver applied each
// notification, from the applied table its function writes in db.
func appliedCounts(t *testing.T, db sqlx.QueryerContext) map[string]int {
	t.Helper()
	var rows []struct {
		ID string `db:"id"`
		N  int    `db:"n"`
	}
	if err := sqlx.SelectContext(t.Context(), db, &rows, `SELECT id, count(*) AS n FROM applied GROUP BY id`); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.ID] = r.N
	}
	return out
}

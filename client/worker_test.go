package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/testmain"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
	"github.com/jmoiron/sqlx"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// workerBundle is what the worker tests need: a SQLite outbox on a
// settable clock, a receiver on loopback, and a worker allowed to reach it.
type workerBundle struct {
	store    *store.Store
	clock    *fakeclock.Clock
	server   *httptest.Server
	worker   *client.Worker
	verifier signature.Verifier
	key      signature.StandardWebhooksKey
	events   chan client.Event
}

// setupWorker starts receiver and returns a worker that delivers to it.
func setupWorker(t *testing.T, receiver http.HandlerFunc, edit func(*client.Config)) *workerBundle {
	t.Helper()
	clock := fakeclock.New()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{
		Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(receiver)
	t.Cleanup(srv.Close)

	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan client.Event, 100)
	cfg := client.Config{
		Store:     s,
		Owner:     "test-worker",
		Signer:    signer,
		Transport: loopbackGuard(t, srv.URL).Transport(),
		Timeout:   2 * time.Second,
		Lease:     time.Minute,
		Backoff:   client.ExponentialBackoff(time.Second, time.Minute, 0),
		Hook:      func(e client.Event) { events <- e },
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := client.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &workerBundle{store: s, clock: clock, server: srv, worker: w, verifier: verifier, key: key, events: events}
}

// loopbackGuard opens the guard for exactly the test server's address.
func loopbackGuard(t testing.TB, rawURL string) client.Guard {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return client.Guard{
		AllowHTTP:     true,
		AllowPorts:    []uint16{uint16(port)},
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix(u.Hostname() + "/32")},
	}
}

func (b *workerBundle) enqueue(t *testing.T, id string, payload string) int64 {
	t.Helper()
	tx, err := b.store.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: b.server.URL + "/hooks", Payload: []byte(payload)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// work runs one claim-and-deliver round and returns the one event it made.
func (b *workerBundle) work(t *testing.T) client.Event {
	t.Helper()
	n, err := b.worker.Work(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("Work = %d, %v; want one delivery", n, err)
	}
	return <-b.events
}

func (b *workerBundle) get(t *testing.T, id int64) store.Delivery {
	t.Helper()
	d, err := b.store.Outbox.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ackReceiver verifies the signature and answers edit(the exact Ack).
func ackReceiver(t *testing.T, b **workerBundle, edit func(a *ack.Ack) []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := (*b).verifier.Verify(r.Context(), r, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		a := ack.New(r.Header.Get("webhook-id"), body)
		w.Header().Set("Content-Type", "application/json")
		w.Write(edit(&a))
	}
}

func TestWorkerVerifiesAckExactly(t *testing.T) {
	t.Parallel()
	digestOf := func(s string) string { return ack.Digest([]byte(s)) }
	tests := []struct {
		name string
		edit func(a *ack.Ack) []byte
		want courier.Status
	}{
		{"exact", func(a *ack.Ack) []byte { return a.Marshal() }, courier.StatusSucceeded},
		{"wrong digest", func(a *ack.Ack) []byte { a.NotificationSHA256 = digestOf("other"); return a.Marshal() }, courier.StatusFailed},
		{"wrong id", func(a *ack.Ack) []byte { a.NotificationID = "n-other"; return a.Marshal() }, courier.StatusFailed},
		{"extra field", func(a *ack.Ack) []byte { a.Extra = map[string]string{"x": "1"}; return a.Marshal() }, courier.StatusFailed},
		{"wrong schema", func(a *ack.Ack) []byte { a.Schema = "courier.ack.v2"; return a.Marshal() }, courier.StatusFailed},
		{"empty body", func(a *ack.Ack) []byte { return nil }, courier.StatusFailed},
		{"not json", func(a *ack.Ack) []byte { return []byte("ok") }, courier.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b *workerBundle
			b = setupWorker(t, ackReceiver(t, &b, tt.edit), nil)
			id := b.enqueue(t, "n-1", `{"n":1}`)
			e := b.work(t)
			d := b.get(t, id)
			if d.Status != tt.want || e.Status != tt.want {
				t.Fatalf("status %s (event %s), want %s", d.Status, e.Status, tt.want)
			}
			if tt.want == courier.StatusFailed && (d.LastErrorCode != courier.CodeAckInvalid || d.Attempts != 1) {
				t.Fatalf("failed with %s after %d attempts, want ack_invalid after 1", d.LastErrorCode, d.Attempts)
			}
			if tt.want == courier.StatusSucceeded && d.AckSHA256 == "" {
				t.Fatal("succeeded without the Ack digest")
			}
			// Not retried: nothing is due, even much later.
			b.clock.Advance(24 * time.Hour)
			if n, err := b.worker.Work(t.Context()); n != 0 || err != nil {
				t.Fatalf("Work after settling = %d, %v", n, err)
			}
		})
	}
}

func TestWorkerClassifiesResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		respond    http.HandlerFunc
		status     courier.Status
		code       courier.Code
		retryAfter time.Duration // expected delay, when retried
	}{
		{"503", statusHandler(503, ""), courier.StatusRetryWait, courier.CodeReceiverUnavailable, time.Second},
		{"500 with Retry-After", statusHandler(500, "7"), courier.StatusRetryWait, courier.CodeReceiverUnavailable, 7 * time.Second},
		{"429 with Retry-After", statusHandler(429, "30"), courier.StatusRetryWait, courier.CodeRateLimited, 30 * time.Second},
		{"429 Retry-After above the cap", statusHandler(429, "86400"), courier.StatusRetryWait, courier.CodeRateLimited, time.Minute},
		{"429 Retry-After beyond int64", statusHandler(429, "99999999999999999999"), courier.StatusRetryWait, courier.CodeRateLimited, time.Minute},
		{"429 Retry-After with a plus sign", statusHandler(429, "+30"), courier.StatusRetryWait, courier.CodeRateLimited, time.Second},
		{"429 Retry-After negative", statusHandler(429, "-30"), courier.StatusRetryWait, courier.CodeRateLimited, time.Second},
		{"408", statusHandler(408, ""), courier.StatusRetryWait, courier.CodeRequestTimeout, time.Second},
		{"400", statusHandler(400, ""), courier.StatusFailed, courier.CodeReceiverRejected, 0},
		{"401", statusHandler(401, ""), courier.StatusFailed, courier.CodeSignatureRejected, 0},
		{"410", statusHandler(410, ""), courier.StatusFailed, courier.CodeEndpointGone, 0},
		{"302 to an allowed place", redirectHandler("/elsewhere"), courier.StatusFailed, courier.CodeRedirect, 0},
		{"302 to a private address", redirectHandler("https://10.0.0.1/metadata"), courier.StatusFailed, courier.CodeDestinationForbidden, 0},
		{"connection dropped", dropHandler, courier.StatusRetryWait, courier.CodeNetwork, time.Second},
		{"past the timeout", stallHandler, courier.StatusRetryWait, courier.CodeTimeout, time.Second},
	}
	// Only the stalled receiver's attempt lasts until its Timeout; every
	// other answer ends the attempt by itself, under a Timeout that only
	// bounds a stuck attempt. A short Timeout could run out first on a
	// loaded machine, before the answer came, and make the attempt a
	// timeout, not what the answer gives.
	const stalled, guard = 300 * time.Millisecond, 30 * time.Second
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			timeout := guard
			if tt.code == courier.CodeTimeout {
				timeout = stalled
			}
			b := setupWorker(t, tt.respond, func(c *client.Config) { c.Timeout = timeout })
			id := b.enqueue(t, "n-1", `{"n":1}`)
			b.work(t)
			d := b.get(t, id)
			if d.Status != tt.status || d.LastErrorCode != tt.code {
				t.Fatalf("got %s/%s, want %s/%s", d.Status, d.LastErrorCode, tt.status, tt.code)
			}
			if tt.status == courier.StatusRetryWait {
				if got := d.NextAttemptAt.Sub(b.clock.Now()); got != tt.retryAfter {
					t.Fatalf("retry in %v, want %v", got, tt.retryAfter)
				}
			}
		})
	}
}

// TestRetryAfterDateIsReadOnTheWorkersClock: a Retry-After date is read
// on the worker's clock (Config.Now), here one standing days before the
// machine's, on which the date is long past.
func TestRetryAfterDateIsReadOnTheWorkersClock(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	b := setupWorker(t, statusHandler(429, clock.Now().Add(20*time.Second).Format(http.TimeFormat)),
		func(c *client.Config) { c.Now = clock.Now })
	id := b.enqueue(t, "n-1", `{"n":1}`)
	b.work(t)
	d := b.get(t, id)
	if got := d.NextAttemptAt.Sub(b.clock.Now()); d.Status != courier.StatusRetryWait || got != 20*time.Second {
		t.Fatalf("got %s/%s, retry in %v; want retry_wait in 20s", d.Status, d.LastErrorCode, got)
	}
}

func statusHandler(status int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
	}
}

func redirectHandler(to string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
}

// stallHandler answers nothing until the client gives up. It reads the
// body first: only then does the server notice the client hanging up.
func stallHandler(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

func dropHandler(w http.ResponseWriter, r *http.Request) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestWorkerRefusesForbiddenDestinations(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }, func(c *client.Config) { c.Transport = nil })
	tx, _ := b.store.DB().BeginTxx(t.Context(), nil)
	var ids []int64
	for i, endpoint := range []string{b.server.URL + "/hooks", "https://10.0.0.1/hooks", "https://169.254.169.254/latest", "https://[::1]/x"} {
		e, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: endpoint, Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.worker.Work(t.Context()); n != len(ids) || err != nil {
		t.Fatalf("Work = %d, %v", n, err)
	}
	for _, id := range ids {
		if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeDestinationForbidden {
			t.Fatalf("%s: %s/%s, want failed/destination_forbidden", d.Endpoint, d.Status, d.LastErrorCode)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("the default guard let %d requests through", hits.Load())
	}
}

func TestWorkerSignsEachAttemptAfresh(t *testing.T) {
	t.Parallel()
	stamps := make(chan string, 4)
	var b *workerBundle
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if _, err := b.verifier.Verify(r.Context(), r, body); err != nil {
			t.Errorf("attempt not verifiable: %v", err)
		}
		stamps <- r.Header.Get("webhook-timestamp")
		w.WriteHeader(503)
	}, nil)
	clock := newWorkerClock() // the worker's: it signs with it
	b.worker, _ = client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Transport: loopbackGuard(t, b.server.URL).Transport(),
		Now: clock.Now})
	b.enqueue(t, "n-1", `{}`)
	b.worker.Work(t.Context())
	b.clock.Advance(time.Hour)
	clock.Advance(time.Minute)
	b.worker.Work(t.Context())
	first, second := <-stamps, <-stamps
	if first == second {
		t.Fatalf("both attempts carry timestamp %s", first)
	}
}

// signerFor returns a signer with the key the bundle's verifier accepts.
func signerFor(t *testing.T, b *workerBundle) signature.Signer {
	t.Helper()
	s, err := signature.NewStandardWebhooksSigner(b.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWorkerRunWakesAndShutsDown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan string, 10)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		arrived <- id
		if id == "slow" {
			select { // hold the attempt until the worker gives up on it
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		a := ack.New(id, body)
		w.Write(a.Marshal())
	}, func(c *client.Config) {
		c.PollInterval = time.Hour // only a wake-up can bring the second delivery
		c.Timeout = 30 * time.Second
	})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- b.worker.Run(ctx) }()

	fast := b.enqueue(t, "fast", `{"n":1}`)
	if got := <-arrived; got != "fast" {
		t.Fatalf("first arrival %s", got)
	}
	if e := <-b.events; e.DeliveryID != fast || e.Status != courier.StatusSucceeded {
		t.Fatalf("event %+v", e)
	}
	slow := b.enqueue(t, "slow", `{"n":2}`)
	if got := <-arrived; got != "slow" {
		t.Fatalf("second arrival %s", got)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run = %v", err)
	}
	// Run has returned: nothing of the worker runs any more (goleak checks
	// the whole package at exit), and the slow delivery, cut short, is due
	// again at once rather than leased: its attempt counts, as it reached
	// the receiver.
	if d := b.get(t, slow); d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeWorkerStopped || d.LeaseOwner != "" {
		t.Fatalf("slow delivery is %s/%s leased by %q, want retry_wait/worker_stopped and no lease", d.Status, d.LastErrorCode, d.LeaseOwner)
	}
	w2, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Transport: loopbackGuard(t, b.server.URL).Transport()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { release <- struct{}{} }()
	if n, err := w2.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("redelivery Work = %d, %v", n, err)
	}
	if got := <-arrived; got != "slow" {
		t.Fatalf("redelivered %s", got)
	}
	if d := b.get(t, slow); d.Attempts != 2 {
		t.Fatalf("slow delivery has %d attempts, want 2", d.Attempts)
	}
	attempts, _ := b.store.Outbox.Attempts(t.Context(), slow)
	if len(attempts) == 0 || attempts[0].Outcome != store.AttemptRetry || attempts[0].ErrorCode != courier.CodeWorkerStopped {
		t.Fatalf("attempts log %+v", attempts)
	}
}

// pgWorker is a worker that relies on PostgreSQL's wake-ups alone
// (PollInterval 1h) to deliver to an acknowledging receiver.
type pgWorker struct {
	db        *sqlx.DB
	store     *store.Store
	worker    *client.Worker
	logs      *capture
	claims    chan struct{} // a claim of the worker's started
	delivered chan string   // the notification ids delivered
	dbURL     string
	endpoint  string
}

func setupPGWorker(t *testing.T, tune ...func(db *sqlx.DB, cfg *client.Config)) *pgWorker {
	t.Helper()
	b := &pgWorker{dbURL: pgtest.URL(t), logs: newCapture(t), claims: make(chan struct{}, 1), delivered: make(chan string, 10)}
	db, err := sqlx.Open(postgres.DriverName, b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
	}))
	t.Cleanup(srv.Close)
	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	signer, _ := signature.NewStandardWebhooksSigner(key)
	cfg := client.Config{Signer: signer, PollInterval: time.Hour,
		Transport: loopbackGuard(t, srv.URL).Transport(),
		Logger:    slog.New(b.logs),
		Hook: func(e client.Event) {
			if e.Status == courier.StatusSucceeded {
				b.delivered <- e.NotificationID
			}
		}}
	for _, f := range tune { // before the Store opens: a pool's size, say
		f(db, &cfg)
	}
	s, err := store.Open(t.Context(), db, store.Config{Tracer: claimTracer{claims: b.claims}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg.Store = s
	w, err := client.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.db, b.store, b.worker, b.endpoint = db, s, w, srv.URL
	return b
}

// run runs the worker until the test ends, and checks that it stops at
// once when asked to.
func (b *pgWorker) run(t *testing.T) {
	done := make(chan error, 1)
	go func() { done <- b.worker.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.worker.Stop(ctx); err != nil {
			t.Errorf("Stop = %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func (b *pgWorker) enqueue(t *testing.T, id string) {
	t.Helper()
	tx, err := b.store.DB().BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: b.endpoint, Payload: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// awaitDelivered waits for id's delivery; the bound is far below the
// poll interval (1h), so only a wake-up, or a claim made on listening
// again, delivers it in time.
func (b *pgWorker) awaitDelivered(t *testing.T, id, what string) {
	t.Helper()
	select {
	case got := <-b.delivered:
		if got != id {
			t.Fatalf("delivered %s, want %s", got, id)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("%s was not delivered within 15s (PollInterval 1h)", what)
	}
}

// awaitLogged waits for a log line with msg.
func (b *pgWorker) awaitLogged(t *testing.T, msg string) {
	t.Helper()
	select {
	case <-b.logs.logged(msg):
	case <-time.After(15 * time.Second):
		t.Fatalf("%q was not logged within 15s; logged: %+v", msg, b.logs.lines(""))
	}
}

// checkLogs checks that msg was logged once, at Warn, and that no line
// holds the database's URL or its password.
func (b *pgWorker) checkLogs(t *testing.T, msg string) {
	t.Helper()
	if got := b.logs.lines(msg); len(got) != 1 || got[0].Level != slog.LevelWarn {
		t.Errorf("%q logged %+v, want once at Warn", msg, got)
	}
	u, err := url.Parse(b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{b.dbURL}
	if p, ok := u.User.Password(); ok && p != "" {
		secrets = append(secrets, p)
	}
	for _, r := range b.logs.lines("") {
		for k, v := range r.Attrs {
			for _, s := range secrets {
				if strings.Contains(v, s) {
					t.Errorf("%q logged the database's URL or password in %s: %s", r.Message, k, v)
				}
			}
		}
	}
}

// TestWakeUpsComeBackAfterTheListenerDrops: when the connection a Run
// holds in LISTEN drops (a PostgreSQL restart, a proxy closing an idle
// connection), the Run logs it and listens again on a short timer of its
// own. It listened again only at the next poll tick, silently: with
// PollInterval 1h, a delivery enqueued after the drop waited up to an
// hour.
func TestWakeUpsComeBackAfterTheListenerDrops(t *testing.T) {
	t.Parallel()
	b := setupPGWorker(t)
	b.run(t)
	<-b.claims // Run's first claim: it listens
	b.enqueue(t, "before")
	b.awaitDelivered(t, "before", "a delivery enqueued while listening")

	var pids []int
	if err := b.db.SelectContext(t.Context(), &pids, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`); err != nil || len(pids) != 1 {
		t.Fatalf("listener pids = %v, %v", pids, err)
	}
	if _, err := b.db.ExecContext(t.Context(), `SELECT pg_terminate_backend($1)`, pids[0]); err != nil {
		t.Fatal(err)
	}
	b.enqueue(t, "after-the-drop") // whether the Run listens again before or after it
	b.awaitDelivered(t, "after-the-drop", "a delivery enqueued after the listener dropped")
	b.awaitLogged(t, "worker: wake-ups lost, listening again")
	b.awaitLogged(t, "worker: wake-ups back")
	b.enqueue(t, "listening-again")
	b.awaitDelivered(t, "listening-again", "a delivery enqueued once the Run listens again")
	b.checkLogs(t, "worker: wake-ups lost, listening again")
}

// TestWakeUpsComeBackWhenTheFirstListenFails: a Run that cannot listen as
// it starts (the database refusing connections) logs it once and listens
// again on its own timer, not only at the next poll tick.
func TestWakeUpsComeBackWhenTheFirstListenFails(t *testing.T) {
	t.Parallel()
	b := setupPGWorker(t)
	// Every connection the store's pool takes is a new one, and the
	// database refuses them (as told from the server's maintenance
	// database).
	b.db.SetMaxIdleConns(0)
	var name string
	if err := b.db.GetContext(t.Context(), &name, `SELECT quote_ident(current_database())`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(b.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/postgres"
	admin, err := sqlx.Open(postgres.DriverName, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	allow := func(yes bool) {
		if _, err := admin.ExecContext(context.Background(), fmt.Sprintf(`ALTER DATABASE %s ALLOW_CONNECTIONS %t`, name, yes)); err != nil {
			t.Fatal(err)
		}
	}
	allow(false)
	t.Cleanup(func() { allow(true) })

	b.run(t)
	b.awaitLogged(t, "worker: wake-ups unavailable, polling")
	allow(true)
	b.enqueue(t, "n")
	b.awaitDelivered(t, "n", "a delivery enqueued once the database took connections again")
	b.awaitLogged(t, "worker: wake-ups back")
	b.enqueue(t, "listening")
	b.awaitDelivered(t, "listening", "a delivery enqueued once the Run listens")
	b.checkLogs(t, "worker: wake-ups unavailable, polling")
}

func TestWorkerConfig(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, statusHandler(200, ""), nil)
	bad := map[string]client.Config{
		"no store":          {Signer: signerFor(t, b)},
		"no signer":         {Store: b.store},
		"lease <= timeout":  {Store: b.store, Signer: signerFor(t, b), Lease: time.Second, Timeout: time.Second},
		"batch too large":   {Store: b.store, Signer: signerFor(t, b), BatchSize: 5000},
		"negative parallel": {Store: b.store, Signer: signerFor(t, b), Concurrency: -1},
	}
	for name, cfg := range bad {
		if _, err := client.NewWorker(cfg); !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("%s: NewWorker = %v, want CodeConfigInvalid", name, err)
		}
	}
}

// TestWorkerConfigLeaseErrorSaysWhatToSet: a Lease too short for the
// Timeout is refused with both values and the least Lease that would do.
func TestWorkerConfigLeaseErrorSaysWhatToSet(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, statusHandler(200, ""), nil)
	_, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Timeout: 2 * time.Minute, Lease: time.Minute})
	if !errors.Is(err, courier.CodeConfigInvalid) {
		t.Fatalf("NewWorker = %v, want CodeConfigInvalid", err)
	}
	for _, want := range []string{"Config.Lease (1m0s)", "Config.Timeout (2m0s)", "2m12s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewWorker = %v, want it to say %q", err, want)
		}
	}
	if _, err := client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Timeout: 2 * time.Minute, Lease: 132 * time.Second}); err != nil {
		t.Errorf("NewWorker with the Lease the error asked for = %v", err)
	}
}

// TestDefaultLeaseSpansTheTimeout: a Timeout set alone gets a Lease of
// four Timeouts when that is longer than the default minute, and its
// deliveries are leased for it. NewWorker refused a Timeout over about
// 54 seconds, naming a Lease the caller never set.
func TestDefaultLeaseSpansTheTimeout(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}, func(c *client.Config) { c.Timeout, c.Lease = 2*time.Minute, 0 })
	id := b.enqueue(t, "n-1", `{}`)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.worker.Work(t.Context())
	}()
	<-arrived
	d := b.get(t, id)
	close(release)
	<-done
	if got := d.LeaseExpiresAt.Sub(d.LeasedAt); got != 8*time.Minute {
		t.Fatalf("the delivery was leased for %v, want 8m0s (four Timeouts of 2m)", got)
	}
}

// TestWorkerConfigBoundsNameTheField: a lease over 24 hours, a timeout or
// poll interval out of its bounds, and an owner that is not a token are
// refused, each naming its field.
func TestWorkerConfigBoundsNameTheField(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, statusHandler(200, ""), nil)
	ok := func(edit func(*client.Config)) client.Config {
		c := client.Config{Store: b.store, Signer: signerFor(t, b)}
		edit(&c)
		return c
	}
	bad := map[string]struct {
		cfg   client.Config
		field string
	}{
		"lease over a day":     {ok(func(c *client.Config) { c.Lease = 24*time.Hour + time.Second }), "Config.Lease"},
		"timeout too short":    {ok(func(c *client.Config) { c.Timeout = time.Millisecond }), "Config.Timeout"},
		"timeout negative":     {ok(func(c *client.Config) { c.Timeout = -time.Second }), "Config.Timeout"},
		"timeout over an hour": {ok(func(c *client.Config) { c.Timeout = 2 * time.Hour; c.Lease = 3 * time.Hour }), "Config.Timeout"},
		"poll too often":       {ok(func(c *client.Config) { c.PollInterval = time.Millisecond }), "Config.PollInterval"},
		"poll over an hour":    {ok(func(c *client.Config) { c.PollInterval = 2 * time.Hour }), "Config.PollInterval"},
		"owner with a space":   {ok(func(c *client.Config) { c.Owner = "worker one" }), "Config.Owner"},
		"owner with a newline": {ok(func(c *client.Config) { c.Owner = "w1\nforged log line" }), "Config.Owner"},
		"owner not ASCII":      {ok(func(c *client.Config) { c.Owner = "wörker" }), "Config.Owner"},
		"owner with a NUL":     {ok(func(c *client.Config) { c.Owner = "w1\x00" }), "Config.Owner"}, // PostgreSQL stores no NUL
		"owner not UTF-8":      {ok(func(c *client.Config) { c.Owner = "w1\xff" }), "Config.Owner"},
		"owner too long":       {ok(func(c *client.Config) { c.Owner = strings.Repeat("w", 257) }), "Config.Owner"},
		// A typed nil would panic at every attempt, spending each
		// delivery's budget.
		"nil pointer signer":    {ok(func(c *client.Config) { c.Signer = (*pointerSigner)(nil) }), "Config.Signer"},
		"nil pointer transport": {ok(func(c *client.Config) { c.Transport = (*http.Transport)(nil) }), "Config.Transport"},

		// The store keeps leases in microseconds and the claim takes its
		// time out of them: a lease barely over the timeout would give
		// back every delivery it claimed.
		"lease a hair over the timeout":   {ok(func(c *client.Config) { c.Timeout = time.Second; c.Lease = time.Second + 500*time.Nanosecond }), "Config.Lease"},
		"lease 99ms over a short timeout": {ok(func(c *client.Config) { c.Timeout = 300 * time.Millisecond; c.Lease = 399 * time.Millisecond }), "Config.Lease"},
		"lease under a tenth over":        {ok(func(c *client.Config) { c.Timeout = 10 * time.Second; c.Lease = 11*time.Second - time.Millisecond }), "Config.Lease"},
		"default timeout, lease at it":    {ok(func(c *client.Config) { c.Lease = 15 * time.Second }), "Config.Lease"},
	}
	for name, tc := range bad {
		_, err := client.NewWorker(tc.cfg)
		if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewWorker = %v, want CodeConfigInvalid naming %s", name, err, tc.field)
		}
	}
	good := map[string]client.Config{
		"lease of a day": ok(func(c *client.Config) { c.Lease = 24 * time.Hour }),
		"owner token":    ok(func(c *client.Config) { c.Owner = "host-1.example:4242/w~1" }),
		"bounds":         ok(func(c *client.Config) { c.Timeout = 10 * time.Millisecond; c.PollInterval = time.Hour }),
		"defaults":       ok(func(c *client.Config) {}),
		// BatchSize defaults to Concurrency, at most a claim's 1000.
		"concurrency over a claim": ok(func(c *client.Config) { c.Concurrency = 2000 }),

		"lease 100ms over a short timeout": ok(func(c *client.Config) { c.Timeout = 300 * time.Millisecond; c.Lease = 400 * time.Millisecond }),
		"lease a tenth over the timeout":   ok(func(c *client.Config) { c.Timeout = 10 * time.Second; c.Lease = 11 * time.Second }),
	}
	for name, cfg := range good {
		if _, err := client.NewWorker(cfg); err != nil {
			t.Errorf("%s: NewWorker = %v", name, err)
		}
	}
}

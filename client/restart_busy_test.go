package client_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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

// busyRestart is a worker and a deduping receiver sharing a PostgreSQL
// server of their own, restarted while both are in the middle of their
// work: the receiver's function holds the notifications named "stuck-…"
// in their transactions until the test lets them go on.
type busyRestart struct {
	pg       *pgtest.Restartable
	db       *sqlx.DB
	store    *store.Store
	worker   *client.Worker
	logs     *capture
	signer   signature.Signer
	endpoint string
	events   chan client.Event
	entered  chan string   // a stuck notification's function is running
	gate     chan struct{} // closed: stuck functions go on
}

func setupBusyRestart(t *testing.T) *busyRestart {
	t.Helper()
	b := &busyRestart{pg: pgtest.StartRestartable(t), logs: newCapture(t), events: make(chan client.Event, 1000),
		entered: make(chan string, 100), gate: make(chan struct{})}
	dbURL, err := b.pg.NewDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if b.db, err = sqlx.Open(postgres.DriverName, dbURL); err != nil {
		t.Fatal(err)
	}
	b.db.SetMaxOpenConns(32)
	t.Cleanup(func() { b.db.Close() })
	if err := store.Migrate(t.Context(), b.db); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.ExecContext(t.Context(), `CREATE TABLE applied (id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if b.store, err = store.Open(t.Context(), b.db, store.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.store.Close() })

	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	b.signer, _ = signature.NewStandardWebhooksSigner(key)
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "sender", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: b.store, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n note) error {
		if strings.HasPrefix(n.NotificationID, "stuck-") {
			b.entered <- n.NotificationID
			<-b.gate
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO applied (id) VALUES ($1)`, n.NotificationID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	b.endpoint = srv.URL + "/hooks"

	b.worker, err = client.NewWorker(client.Config{Store: b.store, Signer: b.signer,
		PollInterval: time.Hour, // what is delivered within the test was woken, or claimed as attempts ended
		Transport:    loopbackGuard(t, srv.URL).Transport(),
		Backoff:      func(int, time.Duration) time.Duration { return 0 },
		Logger:       slog.New(b.logs),
		Hook:         func(e client.Event) { b.events <- e },
	})
	if err != nil {
		t.Fatal(err)
	}
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
	return b
}

func (b *busyRestart) enqueue(t *testing.T, ids ...string) {
	t.Helper()
	tx, err := b.store.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, id := range ids {
		if _, err := b.store.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: b.endpoint,
			Payload: fmt.Appendf(nil, `{"notification_id":%q}`, id)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// post sends a signed notification straight to the receiver and returns
// its status and Retry-After.
func (b *busyRestart) post(ctx context.Context, id string) (int, string, error) {
	body := fmt.Appendf(nil, `{"notification_id":%q}`, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := b.signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// awaitSucceeded waits until each of ids has succeeded, and fails on any
// delivery that fails for good.
func (b *busyRestart) awaitSucceeded(t *testing.T, what string, within time.Duration, ids ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.After(within)
	for len(want) > 0 {
		select {
		case e := <-b.events:
			switch e.Status {
			case courier.StatusSucceeded:
				delete(want, e.NotificationID)
			case courier.StatusFailed:
				t.Fatalf("%s: %s failed: %+v", what, e.NotificationID, e)
			}
		case <-deadline:
			t.Fatalf("%s: %d not delivered within %v: %v; logged: %+v", what, len(want), within, slices.Sorted(maps.Keys(want)), lastLines(b.logs.lines(""), 10))
		}
	}
}

// applied returns how many times the receiver applied each notification.
func (b *busyRestart) applied(t *testing.T) map[string]int {
	return appliedCounts(t, b.db)
}

// TestABusyWorkerAndReceiverOutliveARestart: the database server is
// restarted (stopped and started again at once, as pg_ctl restart does)
// while the worker has an attempt in flight and the receiver has requests
// in their transactions, one from the worker and one from another
// sender. The requests cut short are answered 503 with Retry-After; the
// worker recovers by itself, listens again (an enqueue after the restart
// is delivered at its wake-up, the poll being an hour away), and every
// notification is applied exactly once, redeliveries deduped. The pool
// serves again: concurrent requests right after the restart are answered
// 200 or, for a connection the restart ended, 503.
func TestABusyWorkerAndReceiverOutliveARestart(t *testing.T) {
	for _, tc := range serverStops {
		t.Run(tc.name, func(t *testing.T) {
			b := setupBusyRestart(t)
			var before []string
			for i := range 20 {
				before = append(before, fmt.Sprintf("before-%02d", i))
			}
			b.enqueue(t, before...)
			b.awaitSucceeded(t, "before the restart", 20*time.Second, before...)

			// Busy: the worker's attempt of stuck-w and another sender's
			// request for stuck-d are in the receiver's transactions.
			b.enqueue(t, "stuck-w")
			type answer struct {
				status     int
				retryAfter string
				err        error
			}
			direct := make(chan answer, 1)
			go func() {
				status, retryAfter, err := b.post(context.Background(), "stuck-d")
				direct <- answer{status, retryAfter, err}
			}()
			for range 2 {
				select {
				case <-b.entered:
				case <-time.After(20 * time.Second):
					t.Fatal("the stuck notifications did not reach the receiver's function")
				}
			}

			if err := b.pg.Stop(tc.how); err != nil {
				t.Fatal(err)
			}
			close(b.gate)
			a := <-direct
			if a.err != nil || a.status != http.StatusServiceUnavailable || a.retryAfter == "" {
				t.Errorf("a request whose transaction the restart ended was answered %d, Retry-After %q (%v); want 503 with Retry-After", a.status, a.retryAfter, a.err)
			}
			if err := b.pg.Start(t.Context()); err != nil {
				t.Fatal(err)
			}

			// Right after the restart, requests in parallel: each is
			// applied once, whatever the pool's connections the restart
			// ended.
			var wg sync.WaitGroup
			var mu sync.Mutex
			statuses := map[int]int{}
			for i := range 16 {
				wg.Go(func() {
					id := fmt.Sprintf("parallel-%02d", i)
					for {
						status, retryAfter, err := b.post(t.Context(), id)
						mu.Lock()
						statuses[status]++
						mu.Unlock()
						if err != nil || status == http.StatusOK {
							return
						}
						if status != http.StatusServiceUnavailable || retryAfter == "" {
							t.Errorf("%s answered %d, Retry-After %q after the restart", id, status, retryAfter)
							return
						}
					}
				})
			}
			wg.Wait()
			t.Logf("answers right after the restart: %v", statuses)

			b.awaitSucceeded(t, "the attempt the restart cut short", 20*time.Second, "stuck-w")
			select {
			case <-b.logs.logged("worker: wake-ups back"):
			case <-time.After(20 * time.Second):
				t.Fatalf("the worker did not listen again within 20s; logged: %+v", lastLines(b.logs.lines(""), 10))
			}
			var after []string
			for i := range 10 {
				after = append(after, fmt.Sprintf("after-%02d", i))
			}
			b.enqueue(t, after...) // the worker waits for a wake-up: nothing is in flight, the poll is an hour away
			b.awaitSucceeded(t, "after the restart", 20*time.Second, after...)
			if status, _, err := b.post(t.Context(), "stuck-d"); err != nil || status != http.StatusOK {
				t.Errorf("stuck-d sent again after the restart: %d (%v), want 200", status, err)
			}
			want := map[string]int{"stuck-w": 1, "stuck-d": 1}
			for _, id := range before {
				want[id] = 1
			}
			for _, id := range after {
				want[id] = 1
			}
			for i := range 16 {
				want[fmt.Sprintf("parallel-%02d", i)] = 1
			}
			if got := b.applied(t); !maps.Equal(got, want) {
				t.Errorf("applied %v, want each once: %v", got, want)
			}
		})
	}
}

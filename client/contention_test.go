package client_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// contentionDuration is how long the application's writers hammer the
// database in TestSettlesLandUnderContention. The long run:
//
//	go test -race -count=1 -run TestSettlesLandUnderContention ./client -contention.duration=30s -v
var contentionDuration = flag.Duration("contention.duration", 2*time.Second, "how long the contention test's writers hammer the database")

// contentionWriters is how many application goroutines write at once.
const contentionWriters = 32

// contention counts what the application's writers met.
type contention struct {
	commits, enqueued, lockErrors, otherErrors atomic.Int64
	firstOther                                 atomic.Value // string
}

// hammer writes a business row per transaction, and every fourth
// transaction enqueues a notification with it, as an application does,
// until ctx ends.
func (c *contention) hammer(ctx context.Context, s *store.Store, begin func(context.Context) (*sqlx.Tx, error), endpoint string, writer int) {
	for i := 0; ctx.Err() == nil; i++ {
		err := func() error {
			tx, err := begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback()
			if _, err := tx.ExecContext(ctx, "INSERT INTO app_orders (writer, n) VALUES (?, ?)", writer, i); err != nil {
				return err
			}
			enqueue := i%4 == 0
			if enqueue {
				id := fmt.Sprintf("w%d-%d", writer, i)
				if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: endpoint, Payload: []byte(`{"id":"` + id + `"}`)}); err != nil {
					return err
				}
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			c.commits.Add(1)
			if enqueue {
				c.enqueued.Add(1)
			}
			return nil
		}()
		switch {
		case err == nil, ctx.Err() != nil:
		case strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy"):
			c.lockErrors.Add(1)
		default:
			c.otherErrors.Add(1)
			c.firstOther.CompareAndSwap(nil, err.Error())
		}
	}
}

// delivered counts succeeded attempts and signals when a target is met.
type delivered struct {
	mu      sync.Mutex
	n       int
	target  int
	reached chan struct{}
}

func (d *delivered) add() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n++
	if d.target > 0 && d.n == d.target {
		close(d.reached)
	}
}

// count returns how many succeeded.
func (d *delivered) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// await returns a channel closed once target deliveries succeeded.
func (d *delivered) await(target int) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.target, d.reached = target, make(chan struct{})
	if d.n >= target {
		close(d.reached)
	}
	return d.reached
}

// TestSettlesLandUnderContention is the finding "settles that fail
// transiently are lost, so a sent delivery is sent again": 32 application
// writers hammer the SQLite database while a worker delivers what they
// enqueue. Every settle must land (no "settle failed" line in the
// worker's log, every delivery succeeded at its first attempt). Writers
// that go through Store.Begin queue for courier's one writer connection
// and meet no lock error; writers on DB() pools of their own contend in
// SQLite's busy handler and may see "database is locked", which the test
// reports.
func TestSettlesLandUnderContention(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"Begin", "DB"} {
		t.Run(mode, func(t *testing.T) {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "app.db"), store.Config{Breaker: store.BreakerConfig{Threshold: 1000}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if _, err := s.DB().Exec("CREATE TABLE app_orders (id INTEGER PRIMARY KEY, writer INTEGER NOT NULL, n INTEGER NOT NULL)"); err != nil {
				t.Fatal(err)
			}
			begin := s.Begin
			if mode == "DB" {
				begin = func(ctx context.Context) (*sqlx.Tx, error) { return s.DB().BeginTxx(ctx, nil) }
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				a := ack.New(r.Header.Get("webhook-id"), body)
				w.Write(a.Marshal())
			}))
			t.Cleanup(srv.Close)
			logs := newCapture(t)
			var ok delivered
			var bad atomic.Int64 // attempts that did not succeed, or whose lease was lost
			signer := newSigner(t)
			w, err := client.NewWorker(client.Config{
				Store: s, Signer: signer, Transport: loopbackGuard(t, srv.URL).Transport(), Logger: slog.New(logs),
				Hook: func(e client.Event) {
					if e.Status == courier.StatusSucceeded && !e.LeaseLost {
						ok.add()
					} else {
						bad.Add(1)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			runErr := make(chan error, 1)
			go func() { runErr <- w.Run(context.Background()) }()

			var c contention
			ctx, cancel := context.WithTimeout(t.Context(), *contentionDuration)
			defer cancel()
			var writers sync.WaitGroup
			for i := range contentionWriters {
				writers.Go(func() { c.hammer(ctx, s, begin, srv.URL+"/hooks", i) })
			}
			writers.Wait()

			enqueued := int(c.enqueued.Load())
			select {
			case <-ok.await(enqueued):
			case <-time.After(2 * time.Minute): // a bound for a failure, not a wait for success
				t.Errorf("only %d of %d deliveries succeeded", ok.count(), enqueued)
			}
			if err := w.Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := <-runErr; err != nil {
				t.Fatal(err)
			}

			failed := len(logs.lines("worker: settle failed")) + len(logs.lines("worker: release failed"))
			retried := len(logs.lines("worker: store write failed, trying again"))
			t.Logf("%s writers for %v: %d commits, %d enqueued, %d delivered; application lock errors %d, other errors %d; worker store writes retried %d, failed %d",
				mode, *contentionDuration, c.commits.Load(), enqueued, ok.count(), c.lockErrors.Load(), c.otherErrors.Load(), retried, failed)
			if failed != 0 || bad.Load() != 0 {
				t.Errorf("%d store writes failed for the worker, %d attempts did not succeed; want 0", failed, bad.Load())
			}
			if other := c.otherErrors.Load(); other != 0 {
				t.Errorf("%d other application errors, the first: %v", other, c.firstOther.Load())
			}
			if mode == "Begin" && c.lockErrors.Load() != 0 {
				t.Errorf("%d lock errors reached the application writing through Store.Begin, want 0", c.lockErrors.Load())
			}
			if enqueued == 0 {
				t.Fatal("the writers enqueued nothing")
			}
			var unfinished, most int
			if err := s.DB().Get(&unfinished, "SELECT COUNT(*) FROM courier_outbox WHERE status <> 'succeeded'"); err != nil {
				t.Fatal(err)
			}
			if err := s.DB().Get(&most, "SELECT COALESCE(MAX(attempts), 0) FROM courier_outbox"); err != nil {
				t.Fatal(err)
			}
			if unfinished != 0 || most != 1 {
				t.Errorf("%d deliveries not succeeded; most attempts of one %d; want none, and one attempt each (none sent twice)", unfinished, most)
			}
		})
	}
}

// newSigner returns a Standard Webhooks signer with a fresh key.
func newSigner(t *testing.T) signature.Signer {
	t.Helper()
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	s, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

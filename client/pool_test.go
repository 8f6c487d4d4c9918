package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/store"
)

// TestARunOnAPoolOfOneConnectionDeliversByPolling: a Run holds a
// connection of the Store's pool in LISTEN for as long as it runs. On a
// PostgreSQL pool of one connection (db.SetMaxOpenConns(1)) it took that
// one, and every claim then waited for a connection that never came
// back: the worker delivered nothing, and said nothing. Wake-ups never
// take the pool's last connection: the Run says so at Warn and polls.
func TestARunOnAPoolOfOneConnectionDeliversByPolling(t *testing.T) {
	t.Parallel()
	b := setupPGWorker(t, func(db *sqlx.DB, cfg *client.Config) {
		db.SetMaxOpenConns(1)
		cfg.PollInterval = 10 * time.Millisecond
	})
	enqueueAll(t, b.store, store.EnqueueParams{NotificationID: "n-1", Endpoint: b.endpoint + "/h", Payload: []byte(`{}`)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.worker.Run(ctx) }()
	select {
	case <-b.delivered:
	case <-time.After(30 * time.Second):
		t.Error("a Run on a pool of one connection delivered nothing")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	const msg = "worker: wake-ups unavailable, polling"
	lines := b.logs.lines(msg)
	if len(lines) == 0 || lines[0].Level != slog.LevelWarn || !strings.Contains(lines[0].Attrs[logkey.Error], string(courier.CodeConfigInvalid)) {
		t.Errorf("logged %+v; want a Warn %q with a config_invalid error", lines, msg)
	}
}

// TestWorkersOfTwoStoresOnOnePoolLeaveItAConnection: wake-ups never take
// a pool's last connection, but each Store counted only its own
// listeners. Two Stores opened over one PostgreSQL pool of two connections
// (a Store per component of an application, say), each with a Run, held
// both in LISTEN: every claim, and every enqueue of the application,
// waited for a connection that never came back. The listeners are counted
// per pool: the second Run polls.
func TestWorkersOfTwoStoresOnOnePoolLeaveItAConnection(t *testing.T) {
	t.Parallel()
	var cfg client.Config
	b := setupPGWorker(t, func(db *sqlx.DB, c *client.Config) {
		db.SetMaxOpenConns(2)
		c.PollInterval = 10 * time.Millisecond
		cfg = *c
	})
	other, err := store.Open(t.Context(), b.db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	cfg.Store = other
	w2, err := client.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for _, w := range []*client.Worker{b.worker, w2} {
		go func() { done <- w.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}()
	for i, s := range []*store.Store{b.store, other} {
		ectx, ecancel := context.WithTimeout(t.Context(), 20*time.Second)
		tx, err := s.Begin(ectx)
		if err != nil {
			ecancel()
			t.Fatalf("Begin with two Runs listening on a pool of two: %v", err)
		}
		_, err = s.Outbox.Enqueue(ectx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: b.endpoint + "/h", Payload: []byte(`{}`)})
		if err == nil {
			err = tx.Commit()
		}
		tx.Rollback()
		ecancel()
		if err != nil {
			t.Fatalf("enqueue with two Runs listening on a pool of two: %v", err)
		}
	}
	for range 2 {
		select {
		case <-b.delivered:
		case <-time.After(30 * time.Second):
			t.Fatal("two Runs of two Stores on a pool of two delivered nothing")
		}
	}
}

// TestAWorkerOfSixteenOnASmallPoolLeavesTheApplicationRoom: a Run of
// Concurrency 16 on a PostgreSQL pool of two connections, one of them
// held in LISTEN, claims and settles through the one left; on a pool of
// one it polls, through that one. It delivers everything, and the
// application's enqueues, each bounded by a deadline, all get their turn
// meanwhile: no step of the worker holds a connection while it waits for
// another.
func TestAWorkerOfSixteenOnASmallPoolLeavesTheApplicationRoom(t *testing.T) {
	t.Parallel()
	for _, pool := range []int{1, 2} {
		t.Run(fmt.Sprintf("pool of %d", pool), func(t *testing.T) {
			t.Parallel()
			const n = 120
			delivered := make(chan string, n)
			b := setupPGWorker(t, func(db *sqlx.DB, c *client.Config) {
				db.SetMaxOpenConns(pool)
				c.Concurrency = 16
				if pool == 1 {
					c.PollInterval = 10 * time.Millisecond // no wake-ups on a pool of one
				}
				c.Hook = func(e client.Event) {
					if e.Status == courier.StatusSucceeded {
						delivered <- e.NotificationID
					}
				}
			})
			b.run(t)
			errs := make(chan error, n)
			for i := range n {
				go func() {
					ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
					defer cancel()
					tx, err := b.store.Begin(ctx)
					if err != nil {
						errs <- err
						return
					}
					defer tx.Rollback()
					if _, err := b.store.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: fmt.Sprintf("n-%d", i), Endpoint: b.endpoint + "/h", Payload: []byte(`{}`)}); err != nil {
						errs <- err
						return
					}
					errs <- tx.Commit()
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Fatalf("an enqueue beside the worker: %v", err)
				}
			}
			timeout := time.After(60 * time.Second)
			for i := range n {
				select {
				case <-delivered:
				case <-timeout:
					t.Fatalf("%d of %d delivered", i, n)
				}
			}
		})
	}
}

// TestARunStopsAtOnceOnAPoolTheApplicationHolds: on a PostgreSQL pool of
// one connection that the application's transaction holds, a Run's claim
// waits for it. Ending the Run's context ends that wait: Run returns at
// once, not when the application lets the connection go.
func TestARunStopsAtOnceOnAPoolTheApplicationHolds(t *testing.T) {
	t.Parallel()
	b := setupPGWorker(t, func(db *sqlx.DB, c *client.Config) {
		db.SetMaxOpenConns(1)
		c.PollInterval = 10 * time.Millisecond
	})
	tx, err := b.store.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.worker.Run(ctx) }()
	select { // a claim started, and waits for the connection tx holds
	case <-b.claims:
	case <-time.After(20 * time.Second):
		t.Fatal("the Run made no claim")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return with its claim waiting for a connection the application holds")
	}
}

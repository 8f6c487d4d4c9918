package client_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
)

// TestASettleOnAClosedStoreIsNotTriedAgain: the Store is closed while an
// attempt is in flight. The settle can never land, so the worker does not
// try it again for the rest of the lease (which held Run and Stop up to a
// minute): Work returns at once.
func TestASettleOnAClosedStoreIsNotTriedAgain(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.WriteHeader(http.StatusServiceUnavailable)
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	b.enqueue(t, "n-1", `{}`)

	done := make(chan error, 1)
	go func() {
		_, err := b.worker.Work(t.Context())
		done <- err
	}()
	<-arrived
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Work = %v", err)
	}
	if n := len(logs.lines("worker: store write failed, trying again")); n != 0 {
		t.Errorf("the settle was tried again %d times on a closed Store", n)
	}
}

// TestRunEndsOnAClosedStore: no claim on a closed Store can succeed, so a
// Run over one returns the Store's error (database_unavailable) at its
// next claim, whether the Store was closed before the Run began or while
// it waited. It logged a failed claim on its timer, forever.
func TestRunEndsOnAClosedStore(t *testing.T) {
	t.Parallel()
	for _, while := range []bool{false, true} {
		t.Run("while="+strconv.FormatBool(while), func(t *testing.T) {
			t.Parallel()
			logs := newCapture(t)
			b := setupWorker(t, statusHandler(200, ""), func(c *client.Config) {
				c.Logger, c.PollInterval = slog.New(logs), 10*time.Millisecond
			})
			waiting := make(chan struct{}, 1)
			client.SetAwaiting(b.worker, func() {
				select {
				case waiting <- struct{}{}:
				default:
				}
			})
			if !while {
				if err := b.store.Close(); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- b.worker.Run(ctx) }()
			if while {
				<-waiting // the Run claimed, found nothing, and waits
				if err := b.store.Close(); err != nil {
					t.Fatal(err)
				}
			}
			err := <-done
			if !errors.Is(err, courier.CodeDatabaseUnavailable) {
				t.Errorf("Run = %v, want the closed Store's database_unavailable", err)
			}
			if n := len(logs.lines("worker: claim failed")); n > 1 {
				t.Errorf("the claim on the closed Store failed %d times", n)
			}
		})
	}
}

// TestRunEndsOnAClosedPostgresStore: as TestRunEndsOnAClosedStore, on
// PostgreSQL, whose Run holds a connection of the pool (passed to Open,
// so it stays open) for its wake-ups.
func TestRunEndsOnAClosedPostgresStore(t *testing.T) {
	t.Parallel()
	s := couriertest.PostgresStore(t, store.Config{})
	keys := couriertest.StandardWebhooksKeys("sender")
	w, err := client.NewWorker(client.Config{Store: s, Signer: keys.Signer, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan struct{}, 1)
	client.SetAwaiting(w, func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-waiting
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, courier.CodeDatabaseUnavailable) {
		t.Errorf("Run = %v, want the closed Store's database_unavailable", err)
	}
}

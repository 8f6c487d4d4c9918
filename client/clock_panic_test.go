package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
)

// brokenClock is a Config.Now that panics while broken, from its
// (from+1)-th reading on.
type brokenClock struct {
	broken atomic.Bool
	from   int64
	reads  atomic.Int64
}

func (c *brokenClock) Now() time.Time {
	if c.reads.Add(1) > c.from && c.broken.Load() {
		panic("a bug in the application's clock")
	}
	return time.Now()
}

// workUnpanicked is Work, with a panic it lets through reported.
func workUnpanicked(ctx context.Context, w *client.Worker) (n int, panicked any, err error) {
	defer func() { panicked = recover() }()
	n, err = w.Work(ctx)
	return n, nil, err
}

// TestAClockThatPanicsNeverEndsTheProcess: a Config.Now that panics, as a
// Classify or a Signer might, is logged and never ends the process. Read
// before a claim, it panicked out of Work (and Run) with the worker's
// claim turn held, so every later claim of the worker waited forever; read
// to measure a claimed delivery's lease, it panicked on the attempt's
// goroutine, which nothing recovers: the process ended. No claim is made
// instead (Work fails with internal_error), and a delivery claimed is given
// back unsent, its attempt not counted; once the clock tells time again,
// the worker delivers.
func TestAClockThatPanicsNeverEndsTheProcess(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		from  int64 // readings the clock tells before it panics
		claim int   // what the Work with the broken clock claims
	}{
		{"before the claim", 0, 0},
		{"after the claim", 1, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &brokenClock{from: tt.from}
			clock.broken.Store(true)
			logs := newCapture(t)
			var sent atomic.Int64
			var b *workerBundle
			b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { sent.Add(1); return a.Marshal() }), func(c *client.Config) {
				c.Now, c.Logger = clock.Now, slog.New(logs)
			})
			id := b.enqueue(t, "n-1", `{}`)

			ctx, cancel := context.WithTimeout(t.Context(), guardTimeout)
			defer cancel()
			n, panicked, err := workUnpanicked(ctx, b.worker)
			if panicked != nil {
				t.Errorf("Work panicked: %v", panicked)
			}
			if tt.claim == 0 && !errors.Is(err, courier.CodeInternal) || tt.claim > 0 && err != nil || n != tt.claim {
				t.Errorf("Work with the clock broken = %d, %v; want %d, %s", n, err, tt.claim, map[bool]string{true: "internal_error", false: "no error"}[tt.claim == 0])
			}
			if len(logs.lines("worker: Now panicked")) == 0 {
				t.Error("the clock's panic was not logged")
			}
			if d := b.get(t, id); d.Status != courier.StatusPending || d.Attempts != 0 || sent.Load() != 0 {
				t.Errorf("with the clock broken: delivery %s after %d attempts, %d sent; want pending, none", d.Status, d.Attempts, sent.Load())
			}

			clock.broken.Store(false)
			if n, err := b.worker.Work(ctx); n != 1 || err != nil {
				t.Fatalf("Work with the clock mended = %d, %v; want 1 delivery", n, err)
			}
			if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 1 {
				t.Errorf("delivery %s/%s after %d attempts, want succeeded after 1", d.Status, d.LastErrorCode, d.Attempts)
			}
		})
	}
}

// TestRunGoesOnPastAClockThatPanics: a Run whose clock panics as it is
// about to claim logs it and claims again on its timer, as after a claim
// that failed; it delivers once the clock tells time again. It panicked
// out of Run.
func TestRunGoesOnPastAClockThatPanics(t *testing.T) {
	t.Parallel()
	clock := &brokenClock{}
	clock.broken.Store(true)
	logs := newCapture(t)
	var b *workerBundle
	b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) {
		c.Now, c.Logger = clock.Now, slog.New(logs)
	})
	panicked := logs.logged("worker: Now panicked")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("Run panicked: %v", p)
			}
		}()
		done <- b.worker.Run(ctx)
	}()
	select {
	case <-panicked:
	case err := <-done:
		t.Fatalf("Run ended with the clock broken: %v", err)
	}
	clock.broken.Store(false)
	b.enqueue(t, "n-1", `{}`)
	select {
	case e := <-b.events:
		if e.Status != courier.StatusSucceeded {
			t.Errorf("delivery %s/%s, want succeeded", e.Status, e.Code)
		}
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(guardTimeout):
		t.Fatal("nothing delivered once the clock was mended")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

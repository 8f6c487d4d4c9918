package client_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
)

// stallingTransport holds the worker up, once, between its last lease
// check and the writing of the request: it moves the worker's clock by
// stall before handing the first request on, as a process paused there
// (a stopped VM, a long pause of the runtime) finds the time gone when it
// resumes.
type stallingTransport struct {
	next  http.RoundTripper
	clock *workerClock
	stall time.Duration
	done  atomic.Bool
}

func (s *stallingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.done.CompareAndSwap(false, true) {
		s.clock.Advance(s.stall)
	}
	return s.next.RoundTrip(r)
}

// TestAStalledWorkerDoesNotWriteARequestPastItsTimeout: the lease is
// checked once the request is signed, but a worker held up after that
// check (before the request's bytes are written) would write them when
// it resumes, though its Timeout, and the lease that covered it, may have
// run out meanwhile: another worker may have claimed the delivery again
// and be sending its next attempt, and the receiver then has two requests
// of one delivery (or of one ordering key) at once. A request is written
// only while the attempt's Timeout has not run out on the worker's clock;
// held up longer, nothing reaches the receiver and the delivery is given
// back, its attempt not counted. Held up for less, it is sent.
func TestAStalledWorkerDoesNotWriteARequestPastItsTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name  string
		stall time.Duration
		sent  bool
	}{
		{"a whole timeout", timeout, false},
		{"most of the timeout", timeout - 100*time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newWorkerClock()
			logs := newCapture(t)
			b, sent := setupCountedWorker(t, func(c *client.Config) {
				st := &stallingTransport{next: c.Transport, clock: clock, stall: tc.stall}
				c.Transport, c.Now, c.Timeout, c.Logger = st, clock.Now, timeout, slog.New(logs)
			})
			id := b.enqueue(t, "n-1", `{}`)
			n, err := b.worker.Work(t.Context())
			if n != 1 || err != nil {
				t.Fatalf("Work = %d, %v; want one delivery", n, err)
			}
			if !tc.sent {
				if got := sent.Load(); got != 0 {
					t.Fatalf("%d requests reached the receiver though the worker resumed %v after its lease check, its %v Timeout over", got, tc.stall, timeout)
				}
				d := b.get(t, id)
				if d.Status != courier.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" {
					t.Fatalf("delivery is %s after %d attempts, leased by %q; want pending, 0, none (given back)", d.Status, d.Attempts, d.LeaseOwner)
				}
				lines := logs.lines("worker: request not written within its Timeout, released")
				if len(lines) != 1 || lines[0].Level != slog.LevelWarn || lines[0].Attrs["delivery"] == "" {
					t.Fatalf("lines saying the request was not written: %+v, want one at Warn naming the delivery (Config.Logger)", lines)
				}
				select {
				case e := <-b.events:
					t.Fatalf("an event for the delivery given back: %+v", e)
				default:
				}
			}
			// Sent now, or (given back) by the next round, as attempt 1.
			if !tc.sent {
				if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
					t.Fatalf("next round: Work = %d, %v; want one delivery", n, err)
				}
			}
			e := <-b.events
			if got := sent.Load(); got != 1 || e.Attempt != 1 || e.Status != courier.StatusSucceeded {
				t.Fatalf("%d requests sent, attempt %d %s/%s; want one, attempt 1 succeeded", got, e.Attempt, e.Status, e.Code)
			}
		})
	}
}

// TestAStalledWorkerDoesNotWriteARequestPastItsTimeoutOverHTTP2: over
// HTTP/2 the headers go out before the body, so the receiver may see the
// stream begin, but no body reaches it whole: the stream is reset, and
// the delivery is given back uncounted, as over HTTP/1.
func TestAStalledWorkerDoesNotWriteARequestPastItsTimeoutOverHTTP2(t *testing.T) {
	t.Parallel()
	const timeout = 2 * time.Second
	var whole atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || int64(len(body)) != r.ContentLength {
			http.Error(w, "cut short", http.StatusBadRequest)
			return
		}
		whole.Add(1)
		w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	clock := newWorkerClock()
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, func(c *client.Config) {
		c.Transport = &stallingTransport{next: srv.Client().Transport, clock: clock, stall: timeout}
		c.Now, c.Timeout = clock.Now, timeout
	})
	b.server.URL = srv.URL
	id := b.enqueue(t, "n-1", `{"n":1}`)
	if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v; want one delivery", n, err)
	}
	if n := whole.Load(); n != 0 {
		t.Fatalf("%d requests reached the receiver whole though the worker resumed after its Timeout", n)
	}
	if d := b.get(t, id); d.Status != courier.StatusPending || d.Attempts != 0 || d.LeaseOwner != "" {
		t.Fatalf("delivery is %s/%s after %d attempts, leased by %q; want pending, 0, none (given back)", d.Status, d.LastErrorCode, d.Attempts, d.LeaseOwner)
	}
	if e := b.work(t); whole.Load() != 1 || e.Attempt != 1 || e.Status != courier.StatusSucceeded {
		t.Fatalf("next round: %d whole requests, attempt %d %s/%s; want one, attempt 1 succeeded", whole.Load(), e.Attempt, e.Status, e.Code)
	}
}

// panickingTransport makes the worker's clock panic from the moment the
// request reaches the transport, whose goroutine hears the late-write
// check (see TestAStalledWorkerDoesNotWriteARequestPastItsTimeout).
type panickingTransport struct {
	next  http.RoundTripper
	panic *atomic.Bool
}

func (p *panickingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	p.panic.Store(true)
	return p.next.RoundTrip(r)
}

// TestAClockThatPanicsAsTheRequestIsWrittenSendsIt: the late-write check
// reads Config.Now on the transport's goroutine, where a panic would end
// the process; one there is taken as on time, and the request is written
// as it would be without the check.
func TestAClockThatPanicsAsTheRequestIsWrittenSendsIt(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	b, sent := setupCountedWorker(t, func(c *client.Config) {
		c.Transport = &panickingTransport{next: c.Transport, panic: &broken}
		c.Now = func() time.Time {
			if broken.Load() {
				panic("a bug in the application's clock")
			}
			return time.Now()
		}
	})
	b.enqueue(t, "n-1", `{"n":1}`)
	if _, err := b.worker.Work(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load(); got != 1 {
		t.Fatalf("the receiver got %d requests, want 1: the check took the clock's panic as late", got)
	}
}

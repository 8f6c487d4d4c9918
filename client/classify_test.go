package client_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// TestWorkerFailsStatusesOf600AndAbove: a real server answering with a
// status of 600 or more (not an HTTP status) fails the delivery for good
// with receiver_rejected, after one attempt.
func TestWorkerFailsStatusesOf600AndAbove(t *testing.T) {
	t.Parallel()
	for _, status := range []int{600, 701, 999} {
		b := setupWorker(t, statusHandler(status, "1"), nil)
		id := b.enqueue(t, "n-1", `{}`)
		if e := b.work(t); e.HTTPStatus != status || e.Outcome != "failed" {
			t.Fatalf("%d: event %+v, want a failed attempt with that status", status, e)
		}
		d := b.get(t, id)
		if d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeReceiverRejected || d.LastHTTPStatus != status || d.Attempts != 1 {
			t.Fatalf("%d: %s/%s (HTTP %d) after %d attempts, want failed/receiver_rejected after 1", status, d.Status, d.LastErrorCode, d.LastHTTPStatus, d.Attempts)
		}
	}
}

// TestWorkerFailsWhenTheKeyIsGoneForGood: a SignerFor error that wraps
// courier.CodeConfigInvalid (the key id is unknown for good) fails the
// delivery with signing_failed at once, instead of retrying it until its
// budget ends; any other error is transient and retried. Nothing is sent
// either way, and the worker's log line says why (it said only
// signing_failed, which left an operator to guess at the key).
func TestWorkerFailsWhenTheKeyIsGoneForGood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		signer signature.Signer
		err    error
		status courier.Status
		logged string // what the log line's error says
	}{
		{"unknown for good", nil, fmt.Errorf("%w: no key k9: %w", courier.CodeSigningFailed, courier.CodeConfigInvalid), courier.StatusFailed, "no key k9"},
		{"wrapped again", nil, errors.Join(errors.New("key ring"), courier.CodeConfigInvalid), courier.StatusFailed, "key ring"},
		{"key store down", nil, errors.New("key store unavailable"), courier.StatusRetryWait, "key store unavailable"},
		// A lookup that finds nothing and says nothing (a map's zero
		// value) panicked the worker, and the process with it.
		{"no signer, no error", nil, nil, courier.StatusFailed, `no signer for key`},
		{"a nil pointer as the signer", (*pointerSigner)(nil), nil, courier.StatusFailed, `no signer for key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int32
			logs := newCapture(t)
			b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }, func(c *client.Config) {
				c.Signer = nil
				c.SignerFor = func(context.Context, string) (signature.Signer, error) { return tt.signer, tt.err }
				c.Logger = slog.New(logs)
			})
			id := b.enqueue(t, "n-1", `{}`)
			if e := b.work(t); e.Code != courier.CodeSigningFailed || e.Status != tt.status {
				t.Fatalf("event %+v, want %s/signing_failed", e, tt.status)
			}
			d := b.get(t, id)
			if d.Status != tt.status || d.LastErrorCode != courier.CodeSigningFailed || d.Attempts != 1 {
				t.Fatalf("%s/%s after %d attempts, want %s/signing_failed after 1", d.Status, d.LastErrorCode, d.Attempts, tt.status)
			}
			if tt.status == courier.StatusRetryWait && d.NextAttemptAt.Sub(b.clock.Now()) != time.Second {
				t.Fatalf("retry in %v, want the backoff's first step", d.NextAttemptAt.Sub(b.clock.Now()))
			}
			if hits.Load() != 0 {
				t.Fatalf("%d unsigned requests sent", hits.Load())
			}
			msg := map[courier.Status]string{courier.StatusFailed: "worker: delivery failed", courier.StatusRetryWait: "worker: attempt settled"}[tt.status]
			if lines := logs.lines(msg); len(lines) != 1 || !strings.Contains(lines[0].Attrs[logkey.Error], tt.logged) {
				t.Fatalf("%q lines %+v; want one whose error says %q", msg, lines, tt.logged)
			}
		})
	}
}

// pointerSigner is a Signer on a pointer, whose nil panics when used.
type pointerSigner struct{ n int }

func (p *pointerSigner) Sign(*http.Request, signature.Message) error { p.n++; return nil }

// permanentSigner fails every Sign with a configuration error.
type permanentSigner struct{}

func (permanentSigner) Sign(*http.Request, signature.Message) error {
	return fmt.Errorf("%w: signer misconfigured: %w", courier.CodeSigningFailed, courier.CodeConfigInvalid)
}

// TestWorkerFailsWhenSigningFailsForGood: the same rule holds for an error
// of Signer.Sign.
func TestWorkerFailsWhenSigningFailsForGood(t *testing.T) {
	t.Parallel()
	b := setupWorker(t, statusHandler(200, ""), func(c *client.Config) { c.Signer = permanentSigner{} })
	id := b.enqueue(t, "n-1", `{}`)
	b.work(t)
	if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeSigningFailed {
		t.Fatalf("%s/%s, want failed/signing_failed", d.Status, d.LastErrorCode)
	}
}

// TestRedirectLookupEndsWithinTheAttempt is the finding "the host of a
// redirect's Location was resolved with context.Background(), past the
// attempt's timeout and lease, on a name the receiver chooses": a receiver
// answers 302 to a host whose lookup fails; the lookup's context ends as
// the attempt's does, its deadline the attempt's own (set between the
// start of Work and the lookup, a Timeout later), and the attempt ends,
// failed as a redirect. The deadline is read rather than waited for: a
// Timeout short enough to wait out could run out on a loaded machine
// before the 302 came, and no lookup be made.
func TestRedirectLookupEndsWithinTheAttempt(t *testing.T) {
	t.Parallel()
	const timeout = 30 * time.Second
	type lookup struct {
		at, deadline time.Time
		ok           bool // ctx had a deadline
	}
	lookups := make(chan lookup, 1)
	var target string
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) }, nil)
	guard := loopbackGuard(t, b.server.URL)
	guard.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		deadline, ok := ctx.Deadline()
		select {
		case lookups <- lookup{time.Now(), deadline, ok}:
		default: // one lookup is judged
		}
		return nil, errors.New("no such host")
	}
	target = "http://unknown.example:" + strconv.Itoa(int(guard.AllowPorts[0])) + "/elsewhere"
	b.worker, _ = client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Transport: guard.Transport(), Timeout: timeout, Hook: func(e client.Event) { b.events <- e }})
	id := b.enqueue(t, "n-1", `{}`)
	began := time.Now()
	b.work(t)
	var l lookup
	select {
	case l = <-lookups:
	default:
		t.Fatal("the redirect's Location was not looked up")
	}
	if !l.ok || l.deadline.Before(began.Add(timeout)) || l.deadline.After(l.at.Add(timeout)) {
		t.Fatalf("the redirect's lookup had a deadline %v (%v), want the attempt's: within %v..%v, a %v Timeout from the attempt's start",
			l.deadline, l.ok, began.Add(timeout), l.at.Add(timeout), timeout)
	}
	if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeRedirect || d.LastHTTPStatus != http.StatusFound {
		t.Fatalf("%s/%s (HTTP %d), want failed/redirect_refused after a 302", d.Status, d.LastErrorCode, d.LastHTTPStatus)
	}
}

// TestAHeldRefusalBodyDoesNotHideAnInwardRedirect: a receiver answers 302
// to a name that resolves inward, with a problem+json body it never
// finishes. The worker read that body for its code until the attempt's
// Timeout ran out, and only then looked the Location up, with no time
// left: the lookup failed and the redirect was recorded a plain
// redirect_refused, the guard's refusal unseen. The Location is judged
// first, while the attempt has time for its lookup.
func TestAHeldRefusalBodyDoesNotHideAnInwardRedirect(t *testing.T) {
	t.Parallel()
	var target string
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(http.StatusFound)
		w.Write([]byte(`{"code":`))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes: held until the worker hangs up
	}, nil)
	guard := loopbackGuard(t, b.server.URL)
	guard.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if err := ctx.Err(); err != nil {
			return nil, err // as a resolver does once its context has ended
		}
		return []netip.Addr{netip.MustParseAddr("10.0.0.1")}, nil
	}
	target = "http://inward.example:" + strconv.Itoa(int(guard.AllowPorts[0])) + "/metadata"
	// The Timeout only bounds a stuck attempt: the Location is judged as
	// the 302 comes, not once the body has been waited for. A short one
	// could run out on a loaded machine before the 302 came.
	b.worker, _ = client.NewWorker(client.Config{Store: b.store, Signer: signerFor(t, b), Transport: guard.Transport(),
		Timeout: 30 * time.Second, Hook: func(e client.Event) { b.events <- e }})
	id := b.enqueue(t, "n-1", `{}`)
	if e := b.work(t); e.Code != courier.CodeDestinationForbidden || e.HTTPStatus != http.StatusFound {
		t.Errorf("event %s (HTTP %d), want destination_forbidden (HTTP 302)", e.Code, e.HTTPStatus)
	}
	if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeDestinationForbidden || d.LastHTTPStatus != http.StatusFound {
		t.Fatalf("%s/%s (HTTP %d), want failed/destination_forbidden after a 302 inward", d.Status, d.LastErrorCode, d.LastHTTPStatus)
	}
}

// TestSignerRefusingTheURLFailsAtOnce: a worker whose Guard allows plain
// http to a private network (AllowHTTP) and whose Signer is RFC 9421,
// which signs no non-loopback http URL: no retry changes that, so the
// delivery fails at once with signing_failed (it was retried until its
// budget ran out: the signer's error did not wrap CodeConfigInvalid).
func TestSignerRefusingTheURLFailsAtOnce(t *testing.T) {
	t.Parallel()
	key, err := signature.GenerateJWK("k1", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	b := setupWorker(t, func(http.ResponseWriter, *http.Request) {}, func(c *client.Config) {
		c.Signer = signer
		c.Transport = client.Guard{AllowHTTP: true, AllowPorts: []uint16{8080},
			AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}.Transport()
	})
	id := b.enqueueWith(t, "n-1", func(p *store.EnqueueParams) { p.Endpoint = "http://10.1.2.3:8080/hook" })
	b.work(t)
	d := b.get(t, id)
	if d.Status != courier.StatusFailed {
		t.Fatalf("%s/%s after %d attempts; want failed at once (the URL can never be signed)", d.Status, d.LastErrorCode, d.Attempts)
	}
}

// TestPanicsInTheConfigurationNeverEndTheProcess: a Classify that panics
// (as a Backoff, SignerFor, Signer or profile's Verify might) took the
// attempt's goroutine and the whole process down, and after a restart
// every worker that claimed the delivery again: the attempt is retried
// with code internal_error instead. A Hook that panics is dropped; the
// attempt it reports stands.
func TestPanicsInTheConfigurationNeverEndTheProcess(t *testing.T) {
	t.Parallel()
	t.Run("Classify", func(t *testing.T) {
		t.Parallel()
		b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }, func(c *client.Config) {
			c.Classify = func(*http.Response, error) client.Verdict { panic("a bug in the application's policy") }
		})
		id := b.enqueue(t, "n-1", `{}`)
		b.work(t)
		if d := b.get(t, id); d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeInternal || d.Attempts != 1 {
			t.Fatalf("%s/%s after %d attempts, want retry_wait/internal_error after 1", d.Status, d.LastErrorCode, d.Attempts)
		}
	})
	t.Run("SignerFor", func(t *testing.T) {
		t.Parallel()
		var sent atomic.Int32
		b := setupWorker(t, func(http.ResponseWriter, *http.Request) { sent.Add(1) }, func(c *client.Config) {
			c.Signer = nil
			c.SignerFor = func(context.Context, string) (signature.Signer, error) { panic("a bug in the application's key store") }
		})
		id := b.enqueue(t, "n-1", `{}`)
		b.work(t)
		// Poison, with no shutdown to blame: the attempt counts, so that
		// the delivery's budget ends it.
		if d := b.get(t, id); d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeInternal || d.Attempts != 1 || sent.Load() != 0 {
			t.Fatalf("%s/%s after %d attempts, %d requests; want retry_wait/internal_error after 1, none sent", d.Status, d.LastErrorCode, d.Attempts, sent.Load())
		}
	})
	t.Run("Hook", func(t *testing.T) {
		t.Parallel()
		var b *workerBundle
		b = setupWorker(t, ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() }), func(c *client.Config) {
			c.Hook = func(client.Event) { panic("a bug in the application's metrics") }
		})
		id := b.enqueue(t, "n-1", `{}`)
		if n, err := b.worker.Work(t.Context()); err != nil || n != 1 {
			t.Fatalf("Work = %d, %v", n, err)
		}
		if d := b.get(t, id); d.Status != courier.StatusSucceeded {
			t.Fatalf("%s/%s, want succeeded: the Hook's panic changes nothing", d.Status, d.LastErrorCode)
		}
	})
}

// TestAClassifyOfOnesOwnKeepsTheBreakerCounting: a Verdict without a code
// (or with one that is not valid) takes DefaultClassify's code for the same
// answer, not receiver_rejected, and an answer that speaks of the
// endpoint's health (a 503) counts against it whatever code the Verdict
// gave it: five failures in a row open the breaker. A Classify that retried
// a 503 or a reset without naming a code ended the streak of failures at
// each one, as a 4xx does, so the breaker never opened, and logged a reset
// as receiver_rejected.
func TestAClassifyOfOnesOwnKeepsTheBreakerCounting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		respond http.HandlerFunc
		verdict client.Verdict
		code    courier.Code // the deliveries' code
	}{
		{"503 without a code", statusHandler(503, ""), client.Verdict{Retry: true}, courier.CodeReceiverUnavailable},
		{"503 with an invalid code", statusHandler(503, ""), client.Verdict{Retry: true, Code: "Not A Code"}, courier.CodeReceiverUnavailable},
		{"503 with a code of its own", statusHandler(503, ""), client.Verdict{Retry: true, Code: "maintenance"}, "maintenance"},
		{"503 failed with a code of its own", statusHandler(503, ""), client.Verdict{Code: "maintenance"}, "maintenance"},
		{"429 without a code", statusHandler(429, ""), client.Verdict{Retry: true}, courier.CodeRateLimited},
		{"a reset without a code", dropHandler, client.Verdict{Retry: true}, courier.CodeNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupWorker(t, tt.respond, func(c *client.Config) {
				c.Classify = func(*http.Response, error) client.Verdict { return tt.verdict }
			})
			const n = 5 // the breaker's default threshold
			ids := make([]int64, n)
			for i := range n {
				ids[i] = b.enqueue(t, "n-"+strconv.Itoa(i), `{}`)
			}
			if got, err := b.worker.Work(t.Context()); got != n || err != nil {
				t.Fatalf("Work = %d, %v; want %d", got, err, n)
			}
			for _, id := range ids {
				if d := b.get(t, id); d.LastErrorCode != tt.code {
					t.Fatalf("delivery %d settled with code %q, want %q", id, d.LastErrorCode, tt.code)
				}
			}
			h, err := b.store.Endpoints.Get(t.Context(), b.server.URL+"/hooks")
			if err != nil {
				t.Fatal(err)
			}
			if h.State != store.EndpointOpen || h.ConsecutiveFailures != n {
				t.Fatalf("after %d failures in a row the breaker is %s with %d, want open with %d", n, h.State, h.ConsecutiveFailures, n)
			}
		})
	}
}

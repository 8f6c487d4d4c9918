package client_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// slowSigner is a signer backed by a key service that answers only as the
// context of the request it signs ends (it takes its whole bound).
type slowSigner struct{ signature.Signer }

func (s slowSigner) Sign(r *http.Request, m signature.Message) error {
	<-r.Context().Done()
	return s.Signer.Sign(r, m)
}

// setupCountedWorker is setupWorker with a receiver that acks each
// request and counts them in sent.
func setupCountedWorker(t *testing.T, edit func(*client.Config)) (b *workerBundle, sent *atomic.Int32) {
	t.Helper()
	sent = new(atomic.Int32)
	answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
	b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		answer(w, r)
	}, edit)
	return b, sent
}

// TestSigningTakesNothingOfTheAttemptsTimeout: Config.Timeout bounds
// connecting, sending and reading the answer, and a request is sent only
// while the lease covers a whole Timeout once it is signed; the signing
// gets its own bound. The Timeout began before Sign: a signer that took
// it all left the request an ended context, so nothing was sent and the
// attempt was settled as a timeout, counting against the delivery's
// budget and the endpoint's breaker (a slow key service opened the
// breakers of healthy endpoints); one that took most of it left the
// receiver the rest. The signing takes its whole bound, so the test
// lasts a Timeout; the request then has a whole one of its own, in real
// time, which must be long enough for the receiver's answer on a loaded
// machine: 500 ms was not.
func TestSigningTakesNothingOfTheAttemptsTimeout(t *testing.T) {
	t.Parallel()
	b, sent := setupCountedWorker(t, func(c *client.Config) {
		c.Signer = slowSigner{c.Signer}
		c.Timeout = 2 * time.Second
	})
	id := b.enqueue(t, "n-1", `{}`)
	e := b.work(t)
	if n := sent.Load(); n != 1 || e.Status != courier.StatusSucceeded {
		t.Fatalf("%d requests sent, delivery %s/%s; want one, succeeded", n, e.Status, e.Code)
	}
	if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 1 {
		t.Fatalf("delivery %s/%s after %d attempts, want succeeded after 1", d.Status, d.LastErrorCode, d.Attempts)
	}
	h, err := b.store.Endpoints.Get(t.Context(), b.server.URL+"/hooks")
	if err != nil {
		t.Fatal(err)
	}
	if h.State != store.EndpointClosed || h.ConsecutiveFailures != 0 {
		t.Fatalf("endpoint breaker %s with %d failures, want closed with none", h.State, h.ConsecutiveFailures)
	}
}

// TestSlowSignerForNeverSendsPastTheDeadline: a request is never sent at
// or after its delivery's deadline. The deadline was checked as the
// attempt began, and again nowhere: a key store (Config.SignerFor) that
// answered after the deadline, with the lease still long, had the request
// sent late. It ends failed with code expired, unsent, as a delivery whose
// deadline came while it waited in its batch.
func TestSlowSignerForNeverSendsPastTheDeadline(t *testing.T) {
	t.Parallel()
	clock := newWorkerClock()
	b, sent := setupCountedWorker(t, func(c *client.Config) {
		signer := c.Signer
		c.Signer, c.Lease, c.Now = nil, time.Hour, clock.Now
		c.SignerFor = func(context.Context, string) (signature.Signer, error) {
			clock.Advance(20 * time.Minute) // past the deadline; the lease still covers a Timeout
			return signer, nil
		}
	})
	id := b.enqueueWith(t, "n-1", func(p *store.EnqueueParams) { p.Deadline = b.clock.Now().Add(10 * time.Minute) })
	e := b.work(t)
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests sent 20 minutes into a delivery with 10 minutes to its deadline", n)
	}
	d := b.get(t, id)
	if d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired || d.LastHTTPStatus != 0 || e.Code != courier.CodeExpired {
		t.Fatalf("delivery %s/%s (HTTP %d, event code %s), want failed/expired without HTTP", d.Status, d.LastErrorCode, d.LastHTTPStatus, e.Code)
	}
}

// TestSignerForHearsTheSigningsBound: SignerFor, the one callback meant
// to ask a key store, had no context: nothing bounded a lookup that
// hung, and a hard shutdown could not cut it short. It is given the
// signing's context, bounded by a Timeout of its own: a lookup that
// waits on it returns once the Timeout passes, and the delivery is
// retried (signing_failed), unsent.
func TestSignerForHearsTheSigningsBound(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	var bounded atomic.Bool
	b, sent := setupCountedWorker(t, func(c *client.Config) {
		c.Signer, c.Timeout = nil, timeout
		c.SignerFor = func(ctx context.Context, _ string) (signature.Signer, error) {
			deadline, ok := ctx.Deadline()
			bounded.Store(ok && time.Until(deadline) <= timeout)
			<-ctx.Done() // a key store that does not answer
			return nil, ctx.Err()
		}
	})
	id := b.enqueue(t, "n-1", `{}`)
	e := b.work(t)
	if !bounded.Load() {
		t.Fatalf("SignerFor's context had no deadline within the Timeout (%v)", timeout)
	}
	if n := sent.Load(); n != 0 || e.Code != courier.CodeSigningFailed {
		t.Fatalf("%d requests sent, event code %s; want none sent, signing_failed", n, e.Code)
	}
	if d := b.get(t, id); d.Status != courier.StatusRetryWait || d.LastErrorCode != courier.CodeSigningFailed {
		t.Fatalf("delivery %s/%s; want retry_wait, signing_failed", d.Status, d.LastErrorCode)
	}
}

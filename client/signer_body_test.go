package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// bodySigner is an application's signer that reads the request's body to
// sign it, as signers of other libraries do, and then leaves it as it is:
// read to its end, or replaced with other bytes.
type bodySigner struct {
	signature.Signer
	replace bool
}

func (s bodySigner) Sign(r *http.Request, m signature.Message) error {
	if _, err := io.ReadAll(r.Body); err != nil {
		return err
	}
	if s.replace {
		r.Body = io.NopCloser(strings.NewReader(`{"re":"serialized"}`))
	}
	return s.Signer.Sign(r, m)
}

// TestASignerThatReadsTheBodySendsThePayload: whatever a Signer does with
// the request's body, the request sends the delivery's payload, byte for
// byte, and the receiver's Ack of it settles the delivery. A signer that
// read the body left the request with none: every attempt failed in the
// transport as a network_error, counted against a healthy endpoint until
// its breaker opened; one that replaced it sent other bytes than the
// payload.
func TestASignerThatReadsTheBodySendsThePayload(t *testing.T) {
	t.Parallel()
	for _, replace := range []bool{false, true} {
		t.Run("replace="+strconv.FormatBool(replace), func(t *testing.T) {
			t.Parallel()
			b, sent := setupCountedWorker(t, func(c *client.Config) { c.Signer = bodySigner{c.Signer, replace} })
			const n = 5 // the breaker's default threshold
			ids := make([]int64, n)
			for i := range n {
				ids[i] = b.enqueue(t, "n-"+strconv.Itoa(i), `{"i":`+strconv.Itoa(i)+`}`)
			}
			if got, err := b.worker.Work(t.Context()); got != n || err != nil {
				t.Fatalf("Work = %d, %v; want %d", got, err, n)
			}
			if s := sent.Load(); s != n {
				t.Errorf("the receiver got %d requests, want %d", s, n)
			}
			for _, id := range ids {
				if d := b.get(t, id); d.Status != courier.StatusSucceeded {
					t.Errorf("delivery %d %s/%s after %d attempts, want succeeded", id, d.Status, d.LastErrorCode, d.Attempts)
				}
			}
			h, err := b.store.Endpoints.Get(t.Context(), b.server.URL+"/hooks")
			if err != nil && courier.CodeOf(err) != courier.CodeNotFound {
				t.Fatal(err)
			}
			if h.State == store.EndpointOpen {
				t.Errorf("the endpoint's breaker opened after %d failures of the signer's making", h.ConsecutiveFailures)
			}
		})
	}
}

// signalSigner tells signing when it begins to sign, and ends only as
// the context of the request it signs ends: a key service that answers
// late, or not at all, as the worker shuts down. Then it signs, or, as
// end says, answers the context's error ("fails", as a key service does)
// or panics ("panics", a key service's client cut short).
type signalSigner struct {
	signature.Signer
	signing chan struct{}
	end     string
}

func (s signalSigner) Sign(r *http.Request, m signature.Message) error {
	s.signing <- struct{}{}
	<-r.Context().Done()
	switch s.end {
	case "fails":
		return r.Context().Err()
	case "panics":
		panic("a key service's client, cut short")
	}
	return s.Signer.Sign(r, m)
}

// TestAShutdownDuringSigningGivesTheDeliveryBack: the worker is stopped
// hard (Work's context ends, or Stop's) while its attempt is being signed.
// No request is sent, so none can have reached the receiver: the delivery
// is given back as a delivery never started, pending, its attempt not
// counted, rather than settled as an attempt cut short
// (retry_wait/worker_stopped, counted against its budget). So it is too
// when the Signer, or SignerFor, then panics: that was settled as an
// attempt that panicked (retry_wait/internal_error), counted; the panic
// is logged at Error, and the delivery given back.
func TestAShutdownDuringSigningGivesTheDeliveryBack(t *testing.T) {
	t.Parallel()
	signers := map[string]func(c *client.Config, signing chan struct{}){
		"Signer signs":  func(c *client.Config, signing chan struct{}) { c.Signer = signalSigner{c.Signer, signing, "signs"} },
		"Signer fails":  func(c *client.Config, signing chan struct{}) { c.Signer = signalSigner{c.Signer, signing, "fails"} },
		"Signer panics": func(c *client.Config, signing chan struct{}) { c.Signer = signalSigner{c.Signer, signing, "panics"} },
		"SignerFor panics": func(c *client.Config, signing chan struct{}) {
			c.Signer = nil
			c.SignerFor = func(ctx context.Context, _ string) (signature.Signer, error) {
				signing <- struct{}{}
				<-ctx.Done()
				panic("a key store's client, cut short")
			}
		},
	}
	stops := map[string]func(*holdBundle, context.CancelFunc){
		"Work's context cancelled": func(_ *holdBundle, cancel context.CancelFunc) { cancel() },
		"Stop's context over": func(h *holdBundle, _ context.CancelFunc) {
			over, end := context.WithCancel(context.Background())
			end()
			if err := h.worker.Stop(over); !errors.Is(err, context.Canceled) {
				t.Errorf("Stop = %v, want context.Canceled", err)
			}
		},
	}
	for sname, signer := range signers {
		for stop, halt := range stops {
			t.Run(sname+", "+stop, func(t *testing.T) {
				t.Parallel()
				signing := make(chan struct{}, 1)
				h := setupHold(t, func(c *client.Config) { signer(c, signing) })
				ids := h.enqueueN(t, 1)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				workDone := make(chan error, 1)
				go func() {
					_, err := h.worker.Work(ctx)
					workDone <- err
				}()
				<-signing
				halt(h, cancel)
				if err := <-workDone; err != nil {
					t.Fatalf("Work = %v", err)
				}
				select {
				case id := <-h.arrived:
					t.Fatalf("%s was sent after the shutdown", id)
				default:
				}
				h.check(t, ids, nil, "", "")
				const given = "worker: attempt panicked; given back unsent"
				if lines, panics := h.logs.lines(given), strings.HasSuffix(sname, "panics"); panics && (len(lines) != 1 || lines[0].Level != slog.LevelError) || !panics && len(lines) != 0 {
					t.Errorf("logged %+v as %q; want it once, at Error, where the signing panicked", lines, given)
				}
			})
		}
	}
}

// scratchSigner is an application's signer that writes into the
// Message.Body it is given: before signing, using it as scratch space
// (here, to upper-case it), or after, wiping it once signed.
type scratchSigner struct {
	signature.Signer
	after bool
}

func (s scratchSigner) Sign(r *http.Request, m signature.Message) error {
	if s.after {
		err := s.Signer.Sign(r, m)
		clear(m.Body)
		return err
	}
	copy(m.Body, bytes.ToUpper(m.Body))
	return s.Signer.Sign(r, m)
}

// TestASignerThatWritesIntoTheBodySendsThePayload: whatever a Signer
// writes into Message.Body, the request sends the delivery's payload,
// byte for byte, and its Ack is checked against the payload. The Signer
// was handed the very bytes the request sends and the Ack is checked
// against: one that wiped them once signed sent zeros, refused by the
// receiver (signature_rejected, failed for good); one that rewrote them
// before signing sent other bytes than the payload, validly signed, and
// the receiver's Ack of those bytes passed as an Ack of the payload: the
// delivery succeeded with a notification never enqueued. Now the first
// succeeds, and the second's signature, over bytes it does not send, is
// refused.
func TestASignerThatWritesIntoTheBodySendsThePayload(t *testing.T) {
	t.Parallel()
	for _, after := range []bool{false, true} {
		t.Run("after="+strconv.FormatBool(after), func(t *testing.T) {
			t.Parallel()
			bodies := make(chan string, 10)
			var b *workerBundle
			answer := ackReceiver(t, &b, func(a *ack.Ack) []byte { return a.Marshal() })
			b = setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				bodies <- string(body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				answer(w, r)
			}, func(c *client.Config) { c.Signer = scratchSigner{c.Signer, after} })
			const payload = `{"order":"o-1"}`
			id := b.enqueue(t, "n-1", payload)
			b.work(t)
			if got := <-bodies; got != payload {
				t.Errorf("the receiver got %q, want the payload %q", got, payload)
			}
			want, code := courier.StatusSucceeded, courier.Code("")
			if !after {
				want, code = courier.StatusFailed, courier.CodeSignatureRejected
			}
			if d := b.get(t, id); d.Status != want || d.LastErrorCode != code {
				t.Errorf("delivery %s/%s after %d attempts, want %s/%s", d.Status, d.LastErrorCode, d.Attempts, want, code)
			}
		})
	}
}

package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestFanOutSignsPerSubscription publishes one event to three matching
// subscriptions of three receivers, each holding only its own
// subscription's key: every delivery verifies where it lands.
func TestFanOutSignsPerSubscription(t *testing.T) {
	t.Parallel()
	s := openOutbox(t)
	signers := map[string]signature.Signer{}
	var servers []*httptest.Server
	var verified atomic.Int32
	for i := range 3 {
		key, _ := signature.ParseStandardWebhooksKey(fmt.Sprintf("sub-key-%d", i), signature.NewStandardWebhooksSecret())
		signer, _ := signature.NewStandardWebhooksSigner(key)
		verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "s", Keys: []signature.StandardWebhooksKey{key}})
		signers[key.ID()] = signer
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if _, err := verifier.Verify(r.Context(), r, body); err != nil {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			verified.Add(1)
			w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
		}))
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{
			Tenant: "acme", Endpoint: srv.URL + "/hooks", EventTypes: []string{"*"}, KeyID: key.ID(),
		}); err != nil {
			t.Fatal(err)
		}
	}
	tx, _ := s.DB().BeginTxx(t.Context(), nil)
	if _, err := s.Outbox.Publish(t.Context(), tx, store.PublishParams{Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":1}`)}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	var guard client.Guard
	for _, srv := range servers {
		g := loopbackGuard(t, srv.URL)
		guard.AllowHTTP, guard.AllowPorts, guard.AllowPrefixes = true, append(guard.AllowPorts, g.AllowPorts...), g.AllowPrefixes
	}
	w, err := client.NewWorker(client.Config{Store: s, Transport: guard.Transport(),
		SignerFor: func(_ context.Context, keyID string) (signature.Signer, error) {
			if sg, ok := signers[keyID]; ok {
				return sg, nil
			}
			return nil, fmt.Errorf("no key %q", keyID)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Work(t.Context()); n != 3 || err != nil {
		t.Fatalf("Work = %d, %v", n, err)
	}
	h, _ := s.Outbox.Health(t.Context())
	if h.Counts[courier.StatusSucceeded] != 3 || verified.Load() != 3 {
		t.Fatalf("%d succeeded, %d verified; want 3 each", h.Counts[courier.StatusSucceeded], verified.Load())
	}
}

// TestBreakerPausesFailingEndpoint: one endpoint answers 503 to
// everything; after the threshold it is paused while the healthy endpoint's
// deliveries keep completing, probed after the cool-down, and resumes when
// it recovers.
func TestBreakerPausesFailingEndpoint(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{
		Now:     clock.Now,
		Breaker: store.BreakerConfig{Threshold: 3, Cooldown: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var healthy atomic.Bool
	var mu sync.Mutex
	hits := map[string]int{}
	handler := func(name string, ok func() bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			hits[name]++
			mu.Unlock()
			if !ok() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.Write(ack.New(r.Header.Get("webhook-id"), body).Marshal())
		}
	}
	bad := httptest.NewServer(handler("bad", healthy.Load))
	good := httptest.NewServer(handler("good", func() bool { return true }))
	t.Cleanup(bad.Close)
	t.Cleanup(good.Close)
	tx, _ := s.DB().BeginTxx(t.Context(), nil)
	for i := range 10 {
		for name, srv := range map[string]*httptest.Server{"bad": bad, "good": good} {
			if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: fmt.Sprintf("%s-%d", name, i), Endpoint: srv.URL, Payload: []byte(`{}`), Priority: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx.Commit()
	g1, g2 := loopbackGuard(t, bad.URL), loopbackGuard(t, good.URL)
	key, _ := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	signer, _ := signature.NewStandardWebhooksSigner(key)
	// One delivery per claim: a row claimed before the breaker opened
	// would still go out.
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Concurrency: 1, BatchSize: 1,
		Backoff:   client.ExponentialBackoff(time.Second, time.Second, 0),
		Transport: client.Guard{AllowHTTP: true, AllowPorts: append(g1.AllowPorts, g2.AllowPorts...), AllowPrefixes: g1.AllowPrefixes}.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	for range 24 { // rounds of claims, half a second apart: retries come due
		if _, err := w.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second / 2)
	}
	h, _ := s.Outbox.Health(t.Context())
	eh, _ := s.Endpoints.Get(t.Context(), bad.URL)
	mu.Lock()
	badHits, goodHits := hits["bad"], hits["good"]
	mu.Unlock()
	if eh.State != store.EndpointOpen || badHits != 3 {
		t.Fatalf("failing endpoint: %s after %d requests, want open after 3", eh.State, badHits)
	}
	if goodHits != 10 || h.Counts[courier.StatusSucceeded] != 10 {
		t.Fatalf("healthy endpoint: %d requests, %d succeeded; want all 10 while the other is paused", goodHits, h.Counts[courier.StatusSucceeded])
	}
	healthy.Store(true)
	clock.Advance(time.Minute) // cool-down over: one probe, it succeeds, the rest follow
	for range 24 {
		if _, err := w.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	h, _ = s.Outbox.Health(t.Context())
	if eh, _ := s.Endpoints.Get(t.Context(), bad.URL); eh.State != store.EndpointClosed || h.Counts[courier.StatusSucceeded] != 20 {
		t.Fatalf("after recovery: endpoint %s, %d succeeded", eh.State, h.Counts[courier.StatusSucceeded])
	}
}

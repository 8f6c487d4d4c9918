package client_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// fullOnce is a replay cache whose key is at its cap of live nonces for
// the first request, and has room from then on.
type fullOnce struct {
	signature.ReplayCache
	refused atomic.Bool
}

func (c *fullOnce) Remember(ctx context.Context, keyID, nonce string, expires time.Time) (bool, error) {
	if c.refused.CompareAndSwap(false, true) {
		return false, courier.CodeWebhookRateAbuse
	}
	return c.ReplayCache.Remember(ctx, keyID, nonce, expires)
}

// TestSignatureRefusalsForNowAreRetried: a courier receiver whose RFC 9421
// verifier cannot accept for now (its revocation data is stale, or the
// key holds its cap of live nonces) answers 503, or 429 with Retry-After,
// with the code, stores nothing, and the worker retries on its Backoff or
// when the receiver asked; the next attempt, the verifier able to vouch again, is accepted.
// Both refusals were answered 401, which failed the delivery for good
// (signature_rejected).
func TestSignatureRefusalsForNowAreRetried(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		refuse func(*signature.RFC9421VerifierConfig)
		status int
		code   courier.Code // the delivery's, after the first attempt
		remote courier.Code
		wait   time.Duration // the Retry-After honoured, or the Backoff's first step
	}{
		{"revocation data stale", func(c *signature.RFC9421VerifierConfig) {
			var stale atomic.Bool
			stale.Store(true)
			c.Revoked = func(context.Context, string) (bool, error) {
				if stale.CompareAndSwap(true, false) {
					return false, fmt.Errorf("revocation list past its refresh deadline and grace: %w", courier.CodeWebhookRevocationStale)
				}
				return false, nil
			}
		}, http.StatusServiceUnavailable, courier.CodeReceiverUnavailable, courier.CodeWebhookRevocationStale, time.Second},
		{"key at its cap of live nonces", func(c *signature.RFC9421VerifierConfig) {
			c.Replay = &fullOnce{ReplayCache: c.Replay}
		}, http.StatusTooManyRequests, courier.CodeRateLimited, courier.CodeWebhookRateAbuse, 421 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := signature.GenerateJWK("sender-key-1", signature.AlgEd25519)
			if err != nil {
				t.Fatal(err)
			}
			signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			var rcv http.Handler
			b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) { rcv.ServeHTTP(w, r) }, func(c *client.Config) {
				c.Signer = signer
				c.Backoff = client.ExponentialBackoff(time.Second, time.Hour, 0) // Retry-After as it is
			})
			inbox, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { inbox.Close() })
			cfg := signature.RFC9421VerifierConfig{
				Sender: "sender", Keys: []signature.JWK{key.Public()}, Replay: inbox.Replay, Origin: b.server.URL,
			}
			tt.refuse(&cfg)
			verifier, err := signature.NewRFC9421Verifier(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var processed atomic.Int32
			rcv, err = handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: verifier}, func(context.Context, *sqlx.Tx, order) error {
				processed.Add(1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}

			id := b.enqueue(t, "n-1", `{"notification_id":"n-1","plan":"gold"}`)
			if e := b.work(t); e.HTTPStatus != tt.status || e.RemoteCode != tt.remote || e.Status != courier.StatusRetryWait || e.Code != tt.code {
				t.Fatalf("first attempt: event %+v, want HTTP %d remote %s, %s/%s", e, tt.status, tt.remote, courier.StatusRetryWait, tt.code)
			}
			if d := b.get(t, id); d.NextAttemptAt.Sub(b.clock.Now()) != tt.wait || d.LastRemoteCode != tt.remote {
				t.Fatalf("delivery due in %v (remote code %q), want in %v, as the receiver's Retry-After or the worker's Backoff asked", d.NextAttemptAt.Sub(b.clock.Now()), d.LastRemoteCode, tt.wait)
			}
			for _, table := range []string{"courier_inbox", "courier_replay"} {
				var n int
				if err := inbox.DB().GetContext(t.Context(), &n, "SELECT count(*) FROM "+table); err != nil || n != 0 || processed.Load() != 0 {
					t.Fatalf("the refusal left %d rows in %s (%v), %d processed; want nothing", n, table, err, processed.Load())
				}
			}

			b.clock.Advance(tt.wait)
			if e := b.work(t); e.HTTPStatus != http.StatusOK || e.Status != courier.StatusSucceeded {
				t.Fatalf("second attempt: event %+v, want a 200 and the delivery succeeded", e)
			}
			if d := b.get(t, id); d.Status != courier.StatusSucceeded || d.Attempts != 2 || processed.Load() != 1 {
				t.Fatalf("delivery %s after %d attempts, processed %d times; want succeeded after 2, processed once", d.Status, d.Attempts, processed.Load())
			}
		})
	}
}

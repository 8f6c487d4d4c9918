package handler_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/fakeclock"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestPruneLeavesNoReplayWindow: Standard Webhooks and AdCP HMAC requests
// carry no nonce, so a captured request replayed while its timestamp is
// still inside the verifier's tolerance is refused as a duplicate only by
// its Inbox record. Inbox.Prune once took any retention down to a
// microsecond: a prune a few minutes after the request, with the
// signature still good, deleted the record, and the replay ran the
// application's function a second time. Prune now refuses a retention
// under its floor, which outlasts a tolerance either side of a request's
// timestamp, and the replay is answered as the duplicate it is.
func TestPruneLeavesNoReplayWindow(t *testing.T) {
	t.Parallel()
	n, payload := terminal(t, "evt-replayed")
	for _, scheme := range []struct {
		name string
		// receiver returns a receiver counting its function's runs in
		// calls, and signs requests for it.
		receiver func(t *testing.T, s *store.Store, clock *fakeclock.Clock, calls *atomic.Int32) (http.Handler, signature.Signer, []byte, string)
	}{
		{"standard webhooks", func(t *testing.T, s *store.Store, clock *fakeclock.Clock, calls *atomic.Int32) (http.Handler, signature.Signer, []byte, string) {
			key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
			if err != nil {
				t.Fatal(err)
			}
			verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cms-host", Keys: []signature.StandardWebhooksKey{key}, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			signer, err := signature.NewStandardWebhooksSigner(key)
			if err != nil {
				t.Fatal(err)
			}
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(context.Context, *sqlx.Tx, ack.Terminal) error {
				calls.Add(1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return rcv, signer, payload, n.NotificationID
		}},
		{"adcp hmac", func(t *testing.T, s *store.Store, clock *fakeclock.Clock, calls *atomic.Int32) (http.Handler, signature.Signer, []byte, string) {
			secret, err := signature.ParseSecret("s1", "a-shared-secret-of-thirty-two-bytes-or-more")
			if err != nil {
				t.Fatal(err)
			}
			verifier, err := signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{Sender: reportingSender, Secrets: []signature.Secret{secret}, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			signer, err := signature.NewAdCPHMACSigner(secret)
			if err != nil {
				t.Fatal(err)
			}
			rp, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: verifier}, func(context.Context, *sqlx.Tx, ack.Reporting) error {
				calls.Add(1)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return rp, signer, deliveryReport(t), "report-1"
		}},
	} {
		t.Run(scheme.name, func(t *testing.T) {
			t.Parallel()
			clock := fakeclock.New()
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			var calls atomic.Int32
			h, signer, body, id := scheme.receiver(t, s, clock, &calls)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)

			// One request, its headers captured as it is sent.
			signed := http.Header{"Content-Type": {"application/json"}}
			if err := signer.Sign(&http.Request{Header: signed}, signature.Message{ID: id, Body: body, Time: clock.Now()}); err != nil {
				t.Fatal(err)
			}
			send := func(what string) {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header = signed.Clone()
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d, want 200", what, resp.StatusCode)
				}
			}
			send("the request")

			// Minutes later, the signature still good, an operator prunes
			// with a retention shorter than the tolerance, then the
			// capture is replayed.
			clock.Advance(4 * time.Minute)
			for _, retention := range []time.Duration{time.Minute, 10 * time.Minute, 24*time.Hour - time.Microsecond} {
				got, err := s.Inbox.Prune(t.Context(), store.PruneParams{OlderThan: retention})
				if courier.CodeOf(err) != courier.CodeInvalidArgument || got != 0 {
					t.Errorf("Inbox.Prune with OlderThan %v = %d, %v; want invalid_argument, nothing deleted", retention, got, err)
				}
			}
			if got, err := s.Inbox.Prune(t.Context(), store.PruneParams{OlderThan: 24 * time.Hour}); err != nil || got != 0 {
				t.Errorf("Inbox.Prune with OlderThan 24h = %d, %v; want the record kept", got, err)
			}
			send("the replay")
			if got := calls.Load(); got != 1 {
				t.Errorf("the function ran %d times, want once: the replay inside the tolerance ran it again", got)
			}
		})
	}
}

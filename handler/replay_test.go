package handler_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestReplayedSignatureAcrossReceivers sends one RFC 9421-signed request
// twice: to one receiver, then to another process's receiver sharing the
// database. The (keyid, nonce) replay cache lives in the store, so the
// second is refused as replayed wherever it lands.
func TestReplayedSignatureAcrossReceivers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared.db")
	key, err := signature.GenerateJWK("sender-key-1", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	// Two receivers, each with its own Store and connection pool on the
	// one database, as two processes would have: both serve the first
	// one's origin, the name senders address them by.
	servers := []*httptest.Server{httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)}
	origin := "http://" + servers[0].Listener.Addr().String()
	for _, srv := range servers {
		s, err := sqlite.Open(t.Context(), path, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
			Sender: "adcp-agent", Keys: []signature.JWK{key.Public()}, Replay: s.Replay, Origin: origin,
		})
		if err != nil {
			t.Fatal(err)
		}
		rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		srv.Config.Handler = rcv
		srv.Start()
		t.Cleanup(srv.Close)
	}
	n, payload := terminal(t, "evt-replay")

	// The signature covers @authority and @target-uri, so the replay is
	// aimed at a receiver under the same name: both are configured with
	// the first one's origin, and the request carries its Host.
	req, err := http.NewRequest(http.MethodPost, servers[0].URL+"/hooks", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: n.NotificationID, Body: payload, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	send := func(to *httptest.Server) (int, string, string) {
		t.Helper()
		r := req.Clone(t.Context())
		r.Body = io.NopCloser(bytes.NewReader(payload))
		r.URL.Host = strings.TrimPrefix(to.URL, "http://")
		r.Host = req.URL.Host
		resp, err := to.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(body)
	}
	if status, _, body := send(servers[0]); status != http.StatusOK {
		t.Fatalf("first delivery: %d %s", status, body)
	}
	for i, srv := range []*httptest.Server{servers[1], servers[0]} {
		status, authn, body := send(srv)
		if status != http.StatusUnauthorized || authn != `Signature error="webhook_signature_replayed"` || !strings.Contains(body, "webhook_signature_replayed") {
			t.Fatalf("replay %d: %d %q %s", i, status, authn, body)
		}
	}
}

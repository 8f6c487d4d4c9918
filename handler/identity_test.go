package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The tests here hold the receivers to identity as senders mean it.

// engines opens a fresh store on each engine: SQLite, and PostgreSQL
// when one can be started (see openPostgresStore).
var engines = []struct {
	name string
	open func(t *testing.T) *store.Store
}{
	{"sqlite", func(t *testing.T) *store.Store {
		t.Helper()
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"postgres", func(t *testing.T) *store.Store {
		t.Helper()
		return openPostgresStore(t, store.Config{})
	}},
}

// standardWebhooksFor returns a verifier of sender's signatures and the
// sender's signer.
func standardWebhooksFor(t *testing.T, sender string) (signature.Verifier, signature.Signer) {
	t.Helper()
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(signature.StandardWebhooksSignerConfig{Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	return verifier, signer
}

// postSigned sends body to server signed by signer as message id, with
// Svix's header names when svix is set, and returns the answer.
func postSigned(t *testing.T, server *httptest.Server, signer signature.Signer, id string, body []byte, svix bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if svix {
		svixBrand(req)
	}
	resp, err := server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// svixBrand renames r's Standard Webhooks headers to Svix's: the same
// signature under svix-id, svix-timestamp and svix-signature.
func svixBrand(r *http.Request) {
	for _, name := range []string{"id", "timestamp", "signature"} {
		r.Header.Set("svix-"+name, r.Header.Get("webhook-"+name))
		r.Header.Del("webhook-" + name)
	}
}

// wantProblemCode fails t unless the answer is a problem with status and
// code (and, when field is set, a field error on it).
func wantProblemCode(t *testing.T, resp *http.Response, out []byte, status int, code courier.Code, field string) {
	t.Helper()
	var p problemFields
	if err := json.Unmarshal(out, &p); err != nil || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answer %d %q is not a problem: %v", resp.StatusCode, out, err)
	}
	if resp.StatusCode != status || p.Status != status || p.Code != code || field != "" && !p.lists(field) {
		t.Fatalf("got %d %s %s, want %d %s (field %q)", resp.StatusCode, p.Code, out, status, code, field)
	}
}

// TestSvixIDNamingAnotherNotificationIsRefused: the receiver compared the
// body's notification id with the webhook-id header only, so a request
// signed under Svix's svix-id passed with any id. The id now comes from
// the verifier (signature.Principal.MessageID), which reads either brand:
// an svix-id naming another notification is refused, 400
// validation_failed on notification_id, nothing written, and the right
// svix-id is accepted.
func TestSvixIDNamingAnotherNotificationIsRefused(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, false)
	n, payload := terminal(t, "evt-1")
	other, _ := terminal(t, "evt-2")
	for _, svix := range []bool{true, false} {
		resp, out := postSigned(t, b.server, b.signer, other.NotificationID, payload, svix)
		wantProblemCode(t, resp, out, http.StatusBadRequest, courier.CodeValidation, "notification_id")
	}
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 || b.calls.Load() != 0 {
		t.Fatalf("refused requests wrote %d inbox rows, %d effects, %d calls", inbox, effects, b.calls.Load())
	}
	resp, out := postSigned(t, b.server, b.signer, n.NotificationID, payload, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("svix-id naming the notification: %d %s, want 200", resp.StatusCode, out)
	}
}

// TestTerminalSequenceBeyondInt64IsAccepted: the reference takes any
// positive integer as source_sequence; the receiver refused one beyond
// 2^63 with validation_failed. A notification built with NewTerminal and
// a sequence of 2^64+1 is accepted, the function sees its exact digits,
// and the Ack is the one its sender expects.
func TestTerminalSequenceBeyondInt64IsAccepted(t *testing.T) {
	t.Parallel()
	const huge = "18446744073709551617"
	s := engines[0].open(t)
	verifier, signer := standardWebhooksFor(t, "cms-host")
	var got atomic.Value
	rcv, err := handler.NewTerminal(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(_ context.Context, _ *sqlx.Tx, n ack.Terminal) error {
		got.Store(n.SourceSequence)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(rcv)
	t.Cleanup(server.Close)
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: "evt-huge", SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1",
		SourceSequence: huge, JobCount: 1, ChangeSHA256: ack.Digest([]byte("change")),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "cancelled",
	})
	if err != nil {
		t.Fatalf("NewTerminal: %v", err)
	}
	payload, err := n.Payload()
	if err != nil || !strings.Contains(string(payload), `"source_sequence":`+huge+`,`) {
		t.Fatalf("Payload %s (%v) does not carry the sequence as a JSON integer", payload, err)
	}
	resp, out := postSigned(t, server, signer, n.NotificationID, payload, false)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s, want 200", resp.StatusCode, out)
	}
	profile, _ := ack.Builtin(ack.ProfileTerminal)
	if err := profile.Verify(ack.Sent{ID: n.NotificationID, Payload: payload, Attempt: 1}, out); err != nil {
		t.Fatalf("the sender refuses the Ack: %v", err)
	}
	if seq, _ := got.Load().(json.Number); seq != huge {
		t.Fatalf("the function saw source_sequence %q, want %s", seq, huge)
	}
}

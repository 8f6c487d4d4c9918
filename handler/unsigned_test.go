package handler_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestPublishIdempotencyKeyGrantsNothing: a publish signed with Standard
// Webhooks signs its body, not its Idempotency-Key. Whoever holds a copy
// of a signed request and sends it again under another key, or none, gets
// the same notifications and nothing is enqueued twice: the outbox finds
// each delivery by its event. Sent under the key of another publish, it is
// refused 409 idempotency_collision, never taken for that publish's
// duplicate: the publish it collides with is not dropped in silence, and is
// published under a key of its own.
func TestPublishIdempotencyKeyGrantsNothing(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i, types := range [][]string{{"order.paid"}, {"*"}} {
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r" + strconv.Itoa(i) + ".example/h",
			EventTypes: types, KeyID: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "orders-service", Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: verifier, Authorize: allowPublish})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(p)
	t.Cleanup(server.Close)

	// sign returns the headers of body signed once, as a copy holds them.
	sign := func(id, body string) http.Header {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := signer.Sign(req, signature.Message{ID: id, Body: []byte(body), Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return req.Header
	}
	send := func(body string, signed http.Header, idemKey string) (int, []byte) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = signed.Clone()
		req.Header.Set("Content-Type", "application/json")
		if idemKey != "" {
			req.Header.Set("Idempotency-Key", idemKey)
		}
		resp, out := exchange(t, server, req)
		return resp.StatusCode, out
	}
	paid := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"order":1}}`
	paidSigned := sign("pub-1", paid)
	status, first := send(paid, paidSigned, "req-0001")
	if status != http.StatusAccepted || pending(t, s) != 2 {
		t.Fatalf("publish: %d %s, %d pending; want 202 and 2", status, first, pending(t, s))
	}
	for _, idemKey := range []string{"req-9999", ""} {
		status, out := send(paid, paidSigned, idemKey)
		if status != http.StatusAccepted || !bytes.Equal(out, first) || pending(t, s) != 2 {
			t.Fatalf("the signed request again under key %q: %d %s, %d pending; want 202 %s and nothing more enqueued", idemKey, status, out, pending(t, s), first)
		}
	}

	// Another publish, sent first under the key the first one used: a
	// collision, answered as one, and nothing enqueued for it.
	created := `{"tenant":"acme","event_type":"order.created","event_id":"evt-2","payload":{"order":2}}`
	createdSigned := sign("pub-2", created)
	status, out := send(created, createdSigned, "req-0001")
	if status != http.StatusConflict || !strings.Contains(string(out), `"code":"`+string(courier.CodeIdempotencyCollision)+`"`) || pending(t, s) != 2 {
		t.Fatalf("another publish under a used key: %d %s, %d pending; want 409 idempotency_collision and nothing enqueued", status, out, pending(t, s))
	}
	status, out = send(created, createdSigned, "req-0002")
	var resp struct {
		NotificationIDs []string `json:"notification_ids"`
	}
	if status != http.StatusAccepted || json.Unmarshal(out, &resp) != nil || len(resp.NotificationIDs) != 1 || pending(t, s) != 3 {
		t.Fatalf("that publish under its own key: %d %s, %d pending; want 202 and one more delivery", status, out, pending(t, s))
	}
}

// TestSourceAttemptHeaderCanNeitherRefuseNorRepeat: Courier-Attempt is not
// signed. A copy of a signed command sent again with it raised past the
// command's source_max_attempts is refused 422 source_attempts_exhausted
// and records nothing, so the sender's own request is applied after it;
// once the command is applied, a copy at any attempt gets the stored
// response byte for byte and runs nothing.
func TestSourceAttemptHeaderCanNeitherRefuseNorRepeat(t *testing.T) {
	t.Parallel()
	b := setupSource(t)
	body := sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"a":1}`) // source_max_attempts 2
	status, code, out := b.post(t, "change:r1", body, 3)
	if status != http.StatusUnprocessableEntity || code != string(courier.CodeSourceAttemptsExhausted) {
		t.Fatalf("a copy at attempt 3: %d %s %s, want 422 source_attempts_exhausted", status, code, out)
	}
	status, _, applied := b.post(t, "change:r1", body, 1)
	if status != http.StatusOK || b.calls.Load() != 1 {
		t.Fatalf("the sender's attempt 1 after the refused copy: %d %s after %d calls, want 200 and one", status, applied, b.calls.Load())
	}
	for _, attempt := range []int{1, 2, 3, 1000} {
		status, _, again := b.post(t, "change:r1", body, attempt)
		if status != http.StatusOK || !bytes.Equal(again, applied) || b.calls.Load() != 1 {
			t.Fatalf("a copy at attempt %d: %d %s after %d calls, want the stored response and no call", attempt, status, again, b.calls.Load())
		}
	}
}

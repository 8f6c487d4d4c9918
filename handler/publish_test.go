package handler_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

const publishToken = "publisher-token-0123456789abcdefghijklmnop"

func setupPublish(t *testing.T) (*store.Store, *httptest.Server) {
	t.Helper()
	s, err := store.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	token, err := signature.ParseSecret("orders-service", publishToken)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "orders-service", Tokens: []signature.Secret{token}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: verifier})
	if err != nil {
		t.Fatal(err)
	}
	for i, types := range [][]string{{"order.paid"}, {"*"}, {"order.created"}} {
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r" + string(rune('a'+i)) + ".example/h",
			EventTypes: types, AuthMode: signature.SchemeStandardWebhooks, KeyID: "k", Active: true}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return s, srv
}

func publish(t *testing.T, srv *httptest.Server, body, idemKey, token string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idemKey != "" {
		req.Header.Set(handler.HeaderIdempotencyKey, idemKey)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func pending(t *testing.T, s *store.Store) int {
	t.Helper()
	h, err := s.Outbox.Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return h.Counts[courier.StatusPending]
}

func TestPublish(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	event := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"order":1,"total":"12.50"}}`

	status, first := publish(t, srv, event, "req-0001", publishToken)
	var resp handler.PublishResponse
	if status != http.StatusAccepted || json.Unmarshal(first, &resp) != nil || len(resp.NotificationIDs) != 2 {
		t.Fatalf("publish: %d %s", status, first)
	}
	if pending(t, s) != 2 {
		t.Fatalf("%d deliveries, want 2 (two matching subscriptions)", pending(t, s))
	}
	// The same key and body: the same response, nothing enqueued twice.
	status, again := publish(t, srv, event, "req-0001", publishToken)
	if status != http.StatusAccepted || !bytes.Equal(again, first) || pending(t, s) != 2 {
		t.Fatalf("replay: %d %s, %d pending", status, again, pending(t, s))
	}
	// The same key with another body: 409, nothing written.
	status, out := publish(t, srv, strings.Replace(event, "12.50", "13.00", 1), "req-0001", publishToken)
	if status != http.StatusConflict || !strings.Contains(string(out), "idempotency_collision") || pending(t, s) != 2 {
		t.Fatalf("changed body: %d %s", status, out)
	}
	// One notification to one endpoint.
	status, out = publish(t, srv, `{"notification_id":"n-9","endpoint":"https://x.example/h","payload":{"a":1}}`, "", publishToken)
	if status != http.StatusAccepted || !strings.Contains(string(out), `"n-9"`) || pending(t, s) != 3 {
		t.Fatalf("direct: %d %s", status, out)
	}
}

func TestPublishRefusals(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	tests := []struct {
		name, body, token string
		status            int
		code              string
	}{
		{"no token", `{"notification_id":"n","endpoint":"https://x.example","payload":{}}`, "", 401, "signature_missing"},
		{"wrong token", `{"notification_id":"n","endpoint":"https://x.example","payload":{}}`, "another-token-0123456789abcdefghijklmnopq", 401, "signature_mismatch"},
		{"malformed", `{"payload":`, publishToken, 400, "malformed_json"},
		{"duplicate keys", `{"payload":{},"payload":{}}`, publishToken, 400, "duplicate_json_key"},
		{"unknown member", `{"notification_id":"n","endpoint":"https://x.example","payload":{},"x":1}`, publishToken, 400, "validation_failed"},
		{"no payload", `{"notification_id":"n","endpoint":"https://x.example"}`, publishToken, 400, "validation_failed"},
		{"payload not an object", `{"notification_id":"n","endpoint":"https://x.example","payload":[1]}`, publishToken, 400, "validation_failed"},
		{"both targets", `{"tenant":"acme","event_type":"t","event_id":"e","endpoint":"https://x.example","payload":{}}`, publishToken, 400, "validation_failed"},
		{"bad endpoint", `{"notification_id":"n","endpoint":"not a url","payload":{}}`, publishToken, 400, "validation_failed"},
		{"bad event id", `{"tenant":"acme","event_type":"t","event_id":"a b","payload":{}}`, publishToken, 400, "validation_failed"},
	}
	for _, tt := range tests {
		status, out := publish(t, srv, tt.body, "", tt.token)
		if status != tt.status || !strings.Contains(string(out), `"code":"`+tt.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tt.name, status, out, tt.status, tt.code)
		}
	}
	if pending(t, s) != 0 {
		t.Fatalf("refused requests enqueued %d", pending(t, s))
	}
}

// TestPublishRollsBack: a request that fails midway (an idempotency
// collision on its second notification) enqueues nothing at all.
func TestPublishRollsBack(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	if status, out := publish(t, srv, `{"notification_id":"n-1","endpoint":"https://x.example/h","payload":{"v":1}}`, "", publishToken); status != 202 {
		t.Fatalf("%d %s", status, out)
	}
	// The fan-out's deliveries are written, then the request fails on a
	// clash; its transaction rolls back as a whole.
	tx, _ := s.DB().BeginTxx(t.Context(), nil)
	if _, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: "evt-2:2", Endpoint: "https://rb.example/h", Payload: []byte(`{"other":true}`)}); err != nil {
		t.Fatal(err)
	}
	tx.Commit()
	status, out := publish(t, srv, `{"tenant":"acme","event_type":"order.paid","event_id":"evt-2","payload":{"v":2}}`, "req-2", publishToken)
	if status != http.StatusConflict {
		t.Fatalf("clashing fan-out: %d %s", status, out)
	}
	if pending(t, s) != 2 { // n-1 and the clashing row only
		t.Fatalf("%d pending, want 2: the failed request left deliveries", pending(t, s))
	}
	var records int
	s.DB().Get(&records, "SELECT COUNT(*) FROM courier_inbox")
	if records != 0 {
		t.Fatalf("the failed request left %d idempotency records", records)
	}
}

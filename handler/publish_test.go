package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

const publishToken = "publisher-token-0123456789abcdefghijklmnop"

func setupPublish(t *testing.T) (*store.Store, *httptest.Server) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
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
	p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: verifier, Authorize: allowPublish})
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

// allowPublish lets the tests' publisher fan out to tenant acme and
// publish to endpoints under https://x.example/.
func allowPublish(_ context.Context, p signature.Principal, t handler.PublishTarget) error {
	if p.Sender == "orders-service" && (t.Tenant == "acme" || strings.HasPrefix(t.Endpoint, "https://x.example/")) {
		return nil
	}
	return errors.New("not this publisher's target")
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
	var resp struct {
		NotificationIDs []string `json:"notification_ids"`
	}
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

// setupPublishWith is setupPublish's store and verifier (publisher
// orders-service) with cfg's Authorize, Hook and Logger; no subscriptions.
func setupPublishWith(t *testing.T, cfg handler.PublishConfig) (*store.Store, *httptest.Server) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	token, err := signature.ParseSecret("orders-service", publishToken)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = s
	cfg.Verifier, err = signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "orders-service", Tokens: []signature.Secret{token}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := handler.NewPublish(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return s, srv
}

// subscribe adds an active subscription of tenant to every event type.
func subscribe(t *testing.T, s *store.Store, tenant, endpoint string) {
	t.Helper()
	if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: tenant, Endpoint: endpoint,
		EventTypes: []string{"*"}, AuthMode: signature.SchemeStandardWebhooks, KeyID: "k", Active: true}); err != nil {
		t.Fatal(err)
	}
}

// stored counts the outbox's deliveries and the idempotency records.
func stored(t *testing.T, s *store.Store) (outbox, inbox int) {
	t.Helper()
	if err := s.DB().Get(&outbox, "SELECT COUNT(*) FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	if err := s.DB().Get(&inbox, "SELECT COUNT(*) FROM courier_inbox"); err != nil {
		t.Fatal(err)
	}
	return outbox, inbox
}

// TestPublishIsNotASigningOracle: any authenticated publisher could choose
// both the endpoint and the payload of a delivery, and so have the
// sender's key sign any payload for an endpoint it controls, to replay
// anywhere that key is trusted. With no Authorize, a caller-chosen
// endpoint is refused 403 forbidden and nothing is stored; an Authorize
// hook decides per verified principal, and its refusal is the same 403.
func TestPublishIsNotASigningOracle(t *testing.T) {
	t.Parallel()
	direct := `{"notification_id":"n-1","endpoint":"https://attacker.example/capture","payload":{"grant":"admin"}}`

	t.Run("default", func(t *testing.T) {
		t.Parallel()
		var events hookEvents
		var logs logRecords
		s, srv := setupPublishWith(t, handler.PublishConfig{Hook: events.hook, Logger: slog.New(&logs)})
		for _, key := range []string{"", "req-0001"} {
			status, out := publish(t, srv, direct, key, publishToken)
			if status != http.StatusForbidden || !strings.Contains(string(out), `"code":"forbidden"`) {
				t.Fatalf("Idempotency-Key %q: %d %s, want 403 forbidden", key, status, out)
			}
			if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
				t.Fatalf("a refused publish stored %d deliveries and %d idempotency records", outbox, inbox)
			}
		}
		if ev := events.all(); len(ev) != 2 || ev[0] != (handler.Event{Outcome: handler.OutcomeRejected, Status: 403, Code: courier.CodeForbidden}) {
			t.Fatalf("events %+v", ev)
		}
		if recs := logs.all(); len(recs) != 2 || recs[0].Level != slog.LevelInfo || attrs(recs[0])["code"] != "forbidden" {
			t.Fatalf("log records %v", recs)
		}
	})

	t.Run("hook", func(t *testing.T) {
		t.Parallel()
		var seen []handler.PublishTarget
		var principals []signature.Principal
		var mu sync.Mutex
		s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: func(_ context.Context, p signature.Principal, target handler.PublishTarget) error {
			mu.Lock()
			defer mu.Unlock()
			seen, principals = append(seen, target), append(principals, p)
			if target.Endpoint == "https://orders.example/hooks" {
				return nil
			}
			return errors.New("not an endpoint of this publisher")
		}})
		if status, out := publish(t, srv, direct, "", publishToken); status != http.StatusForbidden {
			t.Fatalf("refused by the hook: %d %s", status, out)
		}
		if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
			t.Fatalf("a refused publish stored %d deliveries and %d idempotency records", outbox, inbox)
		}
		allowed := `{"notification_id":"n-2","endpoint":"https://orders.example/hooks","payload":{"a":1}}`
		if status, out := publish(t, srv, allowed, "", publishToken); status != http.StatusAccepted {
			t.Fatalf("allowed by the hook: %d %s", status, out)
		}
		if outbox, _ := stored(t, s); outbox != 1 {
			t.Fatalf("%d deliveries, want 1", outbox)
		}
		mu.Lock()
		defer mu.Unlock()
		want := handler.PublishTarget{Endpoint: "https://attacker.example/capture", NotificationID: "n-1"}
		if len(seen) != 2 || seen[0] != want || principals[0].Sender != "orders-service" || principals[0].Scheme != signature.SchemeBearer {
			t.Fatalf("the hook saw %+v as %+v", seen, principals)
		}
	})
}

// TestPublishCannotFanOutToAnotherTenant: any publisher could fan out to
// any tenant's subscriptions. By default a publisher fans out only to the
// tenant named as it is (its verified sender); another tenant is 403
// forbidden with nothing stored.
func TestPublishCannotFanOutToAnotherTenant(t *testing.T) {
	t.Parallel()
	s, srv := setupPublishWith(t, handler.PublishConfig{})
	subscribe(t, s, "acme", "https://acme.example/hooks")
	subscribe(t, s, "orders-service", "https://orders.example/hooks")

	other := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
	if status, out := publish(t, srv, other, "req-0001", publishToken); status != http.StatusForbidden || !strings.Contains(string(out), `"code":"forbidden"`) {
		t.Fatalf("another tenant: %d %s, want 403 forbidden", status, out)
	}
	if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
		t.Fatalf("a refused fan-out stored %d deliveries and %d idempotency records", outbox, inbox)
	}
	own := `{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
	if status, out := publish(t, srv, own, "req-0002", publishToken); status != http.StatusAccepted {
		t.Fatalf("its own tenant: %d %s", status, out)
	}
	var endpoints []string
	if err := s.DB().Select(&endpoints, "SELECT endpoint FROM courier_outbox"); err != nil {
		t.Fatal(err)
	}
	if len(endpoints) != 1 || endpoints[0] != "https://orders.example/hooks" {
		t.Fatalf("fanned out to %v", endpoints)
	}
}

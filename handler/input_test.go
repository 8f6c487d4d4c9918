package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// The tests here send what PostgreSQL's text refuses and SQLite keeps (a
// NUL, which JSON spells \u0000; a byte that is not UTF-8) in every string
// a request carries to the store, on both engines: each is a 400 with
// nothing written, never the 503 internal_error of a failed statement on
// one engine and a 2xx on the other.

// bearerTo sends body to server with a Bearer token and, when set, an
// Idempotency-Key.
func bearerTo(t *testing.T, server *httptest.Server, token, idemKey string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	return exchange(t, server, req)
}

// bearerVerifier verifies publishToken for sender.
func bearerVerifier(t *testing.T, sender string) signature.Verifier {
	t.Helper()
	token, err := signature.ParseSecret("t1", publishToken)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: sender, Tokens: []signature.Secret{token}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// inboxRows counts the Inbox records on s.
func inboxRows(t *testing.T, s *store.Store) int { t.Helper(); return rows(t, s, "courier_inbox") }

// rows counts the rows of table on s.
func rows(t *testing.T, s *store.Store, table string) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, "SELECT COUNT(*) FROM "+table); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPublishRefusesTextPostgreSQLCannotStore: a publisher its Authorize
// lets fan out to any tenant sends a tenant with a NUL: the store refuses
// it (on PostgreSQL it failed in the database, a 503), and so every other
// string of the request before the store.
func TestPublishRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r.example/h",
			EventTypes: []string{"*"}, KeyID: "k"}); err != nil {
			t.Fatal(err)
		}
		p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: bearerVerifier(t, "orders-service"),
			Authorize: func(context.Context, signature.Principal, handler.PublishTarget) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(p)
		t.Cleanup(srv.Close)
		for _, tc := range []struct {
			name, idemKey, body string
			code                courier.Code
		}{
			{"tenant with NUL", "", `{"tenant":"acme\u0000","event_type":"a","event_id":"e","payload":{}}`, courier.CodeValidation},
			{"event type with NUL", "", `{"tenant":"acme","event_type":"a\u0000","event_id":"e","payload":{}}`, courier.CodeValidation},
			{"event id with NUL", "", `{"tenant":"acme","event_type":"a","event_id":"e\u0000","payload":{}}`, courier.CodeValidation},
			{"notification id with NUL", "", `{"notification_id":"n\u0000","endpoint":"https://x.example/h","payload":{}}`, courier.CodeValidation},
			{"endpoint with NUL", "", `{"notification_id":"n","endpoint":"https://x.example/h\u0000","payload":{}}`, courier.CodeValidation},
			{"tenant not UTF-8", "", "{\"tenant\":\"acme\xff\",\"event_type\":\"a\",\"event_id\":\"e\",\"payload\":{}}", courier.CodeMalformedJSON},
			{"idempotency key not UTF-8", "req-1\xff", `{"tenant":"acme","event_type":"a","event_id":"e","payload":{}}`, courier.CodeValidation},
		} {
			resp, out := bearerTo(t, srv, publishToken, tc.idemKey, []byte(tc.body))
			var p problemFields
			if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Code != tc.code {
				t.Errorf("%s: %d %s, want 400 %s", tc.name, resp.StatusCode, out, tc.code)
			}
		}
		if n := pending(t, s); n != 0 {
			t.Errorf("refused publishes enqueued %d deliveries", n)
		}
		if n := inboxRows(t, s); n != 0 {
			t.Errorf("refused publishes recorded %d idempotency keys", n)
		}
	})
}

// keyedEvent is an application's payload whose own id, which its type
// does not validate, is its dedupe key.
type keyedEvent struct {
	ID   string         `json:"id" validate:"required"`
	Data map[string]any `json:"data"`
}

func (e keyedEvent) DedupeKey() string { return e.ID }

// renamedVerifier is a Verifier of an application's own: v's, with the
// Principal's Sender replaced by sender, which courier's verifiers refuse
// to be configured with.
type renamedVerifier struct {
	v      signature.Verifier
	sender string
}

func (r renamedVerifier) Verify(ctx context.Context, req *http.Request, body []byte) (signature.Principal, error) {
	p, err := r.v.Verify(ctx, req, body)
	p.Sender = r.sender
	return p, err
}

// TestReceiverRefusesTextPostgreSQLCannotStore: a dedupe key the payload
// carries is a token, checked before anything is written, so a NUL in it
// is a 400 on both engines; a sender name that PostgreSQL cannot store (a
// NUL), which courier's verifiers refuse to be configured with but a
// Verifier of the application's own may give, is refused the same on
// both engines, where SQLite recorded it and PostgreSQL failed with a
// 503: 500 internal_error, the receiver's setup being at fault, not the
// request (a 400 would have the sender fail the delivery for good).
func TestReceiverRefusesTextPostgreSQLCannotStore(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		var calls atomic.Int32
		serve := func(sender string) *httptest.Server {
			rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: renamedVerifier{bearerVerifier(t, "partner"), sender}},
				func(context.Context, *sqlx.Tx, keyedEvent) error { calls.Add(1); return nil })
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(rcv)
			t.Cleanup(srv.Close)
			return srv
		}
		good := serve("partner")
		for _, body := range []string{`{"id":"n-1\u0000","data":{}}`, `{"id":"n 1","data":{}}`} {
			resp, out := bearerTo(t, good, publishToken, "", []byte(body))
			var p problemFields
			if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Code != courier.CodeValidation {
				t.Errorf("dedupe key of %s: %d %s, want 400 validation_failed", body, resp.StatusCode, out)
			}
		}
		resp, out := bearerTo(t, serve("part\x00ner"), publishToken, "", []byte(`{"id":"n-1","data":{}}`))
		var p problemFields
		if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != http.StatusInternalServerError || p.Code != courier.CodeInternal {
			t.Errorf("sender with NUL: %d %s, want 500 internal_error", resp.StatusCode, out)
		}
		if n := inboxRows(t, s); n != 0 || calls.Load() != 0 {
			t.Fatalf("refused requests recorded %d keys and ran the function %d times", n, calls.Load())
		}
		if resp, out := bearerTo(t, good, publishToken, "", []byte(`{"id":"n-1","data":{}}`)); resp.StatusCode != http.StatusOK {
			t.Fatalf("a valid request: %d %s", resp.StatusCode, out)
		}
	})
}

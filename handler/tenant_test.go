package handler_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Two tenants' publishers behind one Bearer verifier, as a deployment
// that serves many tenants through one Publish handler configures it:
// each tenant's token has its tenant's name as its id, and Authorize lets
// a token fan out to that tenant only.
const (
	acmeToken   = "acme-publisher-token-0123456789abcdefghij"
	globexToken = "globex-publisher-token-0123456789abcdefgh"
)

// authorizeTokenTenant lets a principal fan out to the tenant its key is
// named after, and never choose an endpoint.
func authorizeTokenTenant(_ context.Context, p signature.Principal, t handler.PublishTarget) error {
	if t.Endpoint != "" || t.Tenant != p.KeyID {
		return errors.New("not this token's tenant")
	}
	return nil
}

// tenantsPublisher serves a Publish over s for the acme and globex tokens
// of one Bearer verifier (sender "publishers"), authorized by
// authorizeTokenTenant.
func tenantsPublisher(t *testing.T, s *store.Store) *httptest.Server {
	t.Helper()
	var tokens []signature.Secret
	for _, tok := range []struct{ id, token string }{{"acme", acmeToken}, {"globex", globexToken}} {
		secret, err := signature.ParseSecret(tok.id, tok.token)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, secret)
	}
	return bearerPublisher(t, s, "publishers", tokens, authorizeTokenTenant)
}

// TestPublishIdempotencyKeysAreEachTenants: a publish's Idempotency-Key
// was recorded under the verified sender alone, so every tenant whose
// publisher a verifier names alike (the tokens of one Bearer verifier,
// each authorized for its own tenant) shared one space of keys. A tenant
// that sent a key another tenant had used was answered 409
// idempotency_collision, which told it the other had used the key; and a
// tenant that used a key first had the other's publish under it refused,
// its event never delivered. A key now names a request within its tenant:
// each tenant's publish under the same key is its own, answered and
// replayed on its own, and a key reused within one tenant is still 409.
func TestPublishIdempotencyKeysAreEachTenants(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		subscribe(t, s, "acme", "https://acme.example/hooks")
		subscribe(t, s, "globex", "https://globex.example/hooks")
		srv := tenantsPublisher(t, s)
		globex := `{"tenant":"globex","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
		acme := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`

		status, globexFirst := publish(t, srv, globex, "order-42", globexToken)
		if status != http.StatusAccepted {
			t.Fatalf("globex's publish: %d %s", status, globexFirst)
		}
		status, acmeFirst := publish(t, srv, acme, "order-42", acmeToken)
		if status != http.StatusAccepted {
			t.Fatalf("acme's publish under the key globex used: %d %s, want 202 (a key is its tenant's)", status, acmeFirst)
		}
		for _, tt := range []struct {
			name, body, token string
			first             []byte
		}{{"globex", globex, globexToken, globexFirst}, {"acme", acme, acmeToken, acmeFirst}} {
			if status, again := publish(t, srv, tt.body, "order-42", tt.token); status != http.StatusAccepted || !bytes.Equal(again, tt.first) {
				t.Fatalf("%s's publish again: %d %s, want its own first answer %s", tt.name, status, again, tt.first)
			}
			other := strings.Replace(tt.body, `"a":1`, `"a":2`, 1)
			if status, out := publish(t, srv, other, "order-42", tt.token); status != http.StatusConflict || !strings.Contains(string(out), "idempotency_collision") {
				t.Fatalf("%s's key for another request: %d %s, want 409 idempotency_collision", tt.name, status, out)
			}
		}
		if outbox, inbox := stored(t, s); outbox != 2 || inbox != 2 {
			t.Fatalf("%d deliveries and %d idempotency records, want one of each per tenant", outbox, inbox)
		}
	})
}

// TestPublishOneDeliveryKeyIsTheSenders: a key of a publish to one
// endpoint names a request of the verified sender, recorded under
// "publish/" and its name as it always was; the same key on a fan-out is
// the fan-out's tenant's, another request's, and neither answers the
// other.
func TestPublishOneDeliveryKeyIsTheSenders(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	direct := `{"notification_id":"n-9","endpoint":"https://x.example/h","payload":{"a":1}}`
	fanOut := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
	for _, body := range []string{direct, fanOut} {
		if status, out := publish(t, srv, body, "req-0001", publishToken); status != http.StatusAccepted {
			t.Fatalf("%s under req-0001: %d %s", body, status, out)
		}
	}
	for _, sender := range []string{"publish/orders-service", "publish-tenant/14:orders-service/acme"} {
		var n int
		if err := s.DB().Get(&n, "SELECT COUNT(*) FROM courier_inbox WHERE sender = ? AND dedupe_key = 'req-0001'", sender); err != nil || n != 1 {
			t.Fatalf("%d records under %q, %v; want 1", n, sender, err)
		}
	}
	if status, out := publish(t, srv, strings.Replace(direct, `"a":1`, `"a":2`, 1), "req-0001", publishToken); status != http.StatusConflict {
		t.Fatalf("another delivery under the sender's key: %d %s, want 409", status, out)
	}
}

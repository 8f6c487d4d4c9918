package handler_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

const publishToken = "publisher-token-0123456789abcdefghijklmnop"

func setupPublish(t *testing.T) (*store.Store, *httptest.Server) {
	t.Helper()
	s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: allowPublish})
	for i, types := range [][]string{{"order.paid"}, {"*"}, {"order.created"}} {
		if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r" + string(rune('a'+i)) + ".example/h",
			EventTypes: types, KeyID: "k"}); err != nil {
			t.Fatal(err)
		}
	}
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
		req.Header.Set("Idempotency-Key", idemKey)
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

// TestPublishNamesANumberNoFloatHolds: a payload with a number no float64
// holds is a valid JSON document that cannot be enqueued: refused with
// validation_failed, its rule finite, as the Reporting and Source
// receivers name it, not object, which says the payload is something
// else than an object. An integer no float64 holds is kept exactly, as
// Python keeps it, for the receivers that read payloads so; a fan-out to
// a reporting subscription refuses it, since a reporting receiver reads
// every number as a double: it refused it at the delivery's first
// attempt, after the publish was accepted (202).
func TestPublishNamesANumberNoFloatHolds(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	refused := func(body string) {
		t.Helper()
		status, out := publish(t, srv, body, "", publishToken)
		if status != 400 || !strings.Contains(string(out), `"code":"validation_failed"`) || !strings.Contains(string(out), `{"field":"payload","rule":"finite"}`) {
			t.Errorf("%.80s…: %d %s, want 400 validation_failed naming payload, rule finite", body, status, out)
		}
	}
	refused(`{"notification_id":"n","endpoint":"https://x.example/h","payload":{"a":1e400}}`)
	huge := "1" + strings.Repeat("0", 400)
	if status, out := publish(t, srv, `{"notification_id":"n","endpoint":"https://x.example/h","payload":{"a":`+huge+`}}`, "", publishToken); status != http.StatusAccepted {
		t.Fatalf("an integer of 401 digits to a courier endpoint: %d %s, want 202", status, out)
	}
	if _, err := s.Subscriptions.Create(t.Context(), nil, store.SubscriptionParams{Tenant: "acme", Endpoint: "https://r.example/h",
		EventTypes: []string{"*"}, KeyID: "k", Profile: ack.ProfileReporting}); err != nil {
		t.Fatal(err)
	}
	for i, number := range []string{huge, "-1" + strings.Repeat("0", 309)} {
		refused(fmt.Sprintf(`{"tenant":"acme","event_type":"report","event_id":"ev%d","payload":{"a":%s}}`, i, number))
	}
	// A digit run as long in a string is no number.
	if status, out := publish(t, srv, `{"tenant":"acme","event_type":"report","event_id":"ev-s","payload":{"a":"`+huge+`"}}`, "", publishToken); status != http.StatusAccepted {
		t.Fatalf("401 digits in a string: %d %s, want 202", status, out)
	}
	// The direct publish, and the string's to acme's "*" subscription and
	// its reporting one; the refused fan-outs wrote nothing, to neither.
	if n := pending(t, s); n != 3 {
		t.Fatalf("%d deliveries pending, want the three accepted", n)
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
	return s, publishServer(t, s, cfg)
}

// publishServer serves a Publish over s for cfg, whose Store and
// Verifier it sets: publisher orders-service, with publishToken.
func publishServer(t *testing.T, s *store.Store, cfg handler.PublishConfig) *httptest.Server {
	t.Helper()
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
	return srv
}

// subscribe adds a subscription of tenant to every event type.
func subscribe(t *testing.T, s *store.Store, tenant, endpoint string) {
	t.Helper()
	if _, err := s.Subscriptions.Create(t.Context(), s.DB(), store.SubscriptionParams{Tenant: tenant, Endpoint: endpoint,
		EventTypes: []string{"*"}, KeyID: "k"}); err != nil {
		t.Fatal(err)
	}
}

// direct is a publish request's body for one delivery, id, to endpoint.
func direct(id, endpoint string) string {
	b, _ := json.Marshal(map[string]any{"notification_id": id, "endpoint": endpoint, "payload": map[string]int{"a": 1}})
	return string(b)
}

// refusesEndpoints publishes one delivery to each of urls through srv and
// fails the test unless each is answered 400 validation_failed naming
// endpoint with rule, before Authorize (which counts itself in asked) is
// asked, and nothing is stored in s.
func refusesEndpoints(t *testing.T, s *store.Store, srv *httptest.Server, asked *atomic.Int32, rule string, urls ...string) {
	t.Helper()
	for _, url := range urls {
		status, out := publish(t, srv, direct("n-1", url), "", publishToken)
		var p problemFields
		if err := json.Unmarshal(out, &p); err != nil || status != http.StatusBadRequest || p.Code != courier.CodeValidation ||
			len(p.Errors) != 1 || p.Errors[0].Field != "endpoint" || p.Errors[0].Rule != rule {
			t.Errorf("%s: %d %s, want 400 validation_failed naming endpoint, rule %s", url, status, out, rule)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("Authorize was asked about %d requests that were refused", n)
	}
	if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
		t.Fatalf("refused publishes stored %d deliveries and %d idempotency records", outbox, inbox)
	}
}

// stored counts the outbox's deliveries and the idempotency records.
func stored(t *testing.T, s *store.Store) (outbox, inbox int) {
	t.Helper()
	return rows(t, s, "courier_outbox"), rows(t, s, "courier_inbox")
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
		var logs logtest.Records
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
		if ev := events.all(); len(ev) != 2 || ev[0] != (handler.Event{Outcome: handler.OutcomeRejected, HTTPStatus: 403, Code: courier.CodeForbidden}) {
			t.Fatalf("events %+v", ev)
		}
		if recs := logs.All(); len(recs) != 2 || recs[0].Level != slog.LevelInfo || attrs(recs[0])["code"] != "forbidden" {
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

// TestPublishAuthorizesTheEndpointItStores: Authorize was given the
// endpoint as the caller spelled it, and the outbox stores and sends to
// its normalized form: a policy refusing https://attacker.example/capture
// let https://ATTACKER.example:443/capture through, one receiver under
// another spelling. It is given the endpoint the delivery is stored under.
func TestPublishAuthorizesTheEndpointItStores(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: func(_ context.Context, _ signature.Principal, target handler.PublishTarget) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, target.Endpoint)
		if target.Endpoint == "https://attacker.example/capture" {
			return errors.New("not this one")
		}
		return nil
	}})
	spelled := `{"notification_id":"n-1","endpoint":"https://ATTACKER.example:443/capture","payload":{"grant":"admin"}}`
	if status, out := publish(t, srv, spelled, "", publishToken); status != http.StatusForbidden {
		t.Fatalf("the refused endpoint spelled another way: %d %s, want 403", status, out)
	}
	allowed := `{"notification_id":"n-2","endpoint":"HTTPS://Orders.example:443/Hooks?K=V","payload":{"a":1}}`
	if status, out := publish(t, srv, allowed, "", publishToken); status != http.StatusAccepted {
		t.Fatalf("allowed: %d %s", status, out)
	}
	if _, err := s.Outbox.Lookup(t.Context(), "n-2", "https://orders.example/Hooks?K=V"); err != nil {
		t.Fatalf("the allowed delivery: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"https://attacker.example/capture", "https://orders.example/Hooks?K=V"}; !slices.Equal(seen, want) {
		t.Fatalf("Authorize saw %q, want %q", seen, want)
	}
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

// publisherFor serves a Publish handler on s for a Bearer verifier of
// sender, with the default Authorize (its own tenant only).
func publisherFor(t *testing.T, s *store.Store, sender string) *httptest.Server {
	t.Helper()
	token, err := signature.ParseSecret("publisher", publishToken)
	if err != nil {
		t.Fatal(err)
	}
	return bearerPublisher(t, s, sender, []signature.Secret{token}, nil)
}

// bearerPublisher serves a Publish handler on s for a Bearer verifier of
// sender over tokens, authorized by authorize (nil: the default).
func bearerPublisher(t *testing.T, s *store.Store, sender string, tokens []signature.Secret, authorize func(context.Context, signature.Principal, handler.PublishTarget) error) *httptest.Server {
	t.Helper()
	verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: sender, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	p, err := handler.NewPublish(handler.PublishConfig{Store: s, Verifier: verifier, Authorize: authorize})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv
}

// TestPublishEventIDLeavesRoomForTheSubscriptionID: PublishParams.EventID
// and the publish API's event_id were checked as tokens of up to 256
// characters, but each delivery's notification id is event id ":"
// subscription id, itself a token of at most 256: a long event id was
// refused only when a subscription matched, as invalid_argument about a
// NotificationID from the store and a 400 validation_failed naming no
// field from the publish API. The bound is now store.MaxEventIDSize,
// checked whether a subscription matches or not and named; an event id of
// that size fans out to the largest subscription id there can be.
func TestPublishEventIDLeavesRoomForTheSubscriptionID(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		// The one subscription gets the largest id there can be: its
		// engine's sequence is set to start there.
		restart := "ALTER TABLE courier_subscriptions ALTER COLUMN id RESTART WITH 9223372036854775807"
		if s.DB().DriverName() == sqlite.DriverName {
			restart = "INSERT INTO sqlite_sequence (name, seq) VALUES ('courier_subscriptions', 9223372036854775806)"
		}
		if _, err := s.DB().ExecContext(ctx, restart); err != nil {
			t.Fatal(err)
		}
		sub, err := s.Subscriptions.Create(ctx, s.DB(), store.SubscriptionParams{Tenant: "publisher", Endpoint: "https://hooks.example/h",
			EventTypes: []string{"order.paid"}, KeyID: "k1"})
		if err != nil || sub.ID != math.MaxInt64 {
			t.Fatalf("Create = %+v, %v; want the id %d", sub, err, int64(math.MaxInt64))
		}
		longest := strings.Repeat("e", store.MaxEventIDSize)

		for _, tenant := range []string{"publisher", "nobody"} { // a subscription matches, none does
			tx, err := s.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: tenant, EventType: "order.paid", EventID: longest + "e", Payload: []byte(`{"a":1}`)})
			tx.Rollback()
			if courier.CodeOf(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "PublishParams.EventID") {
				t.Errorf("Publish to %s of an event id of %d = %v, want invalid_argument naming PublishParams.EventID", tenant, store.MaxEventIDSize+1, err)
			}
		}
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		published, err := s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "publisher", EventType: "order.paid", EventID: longest, Payload: []byte(`{"a":1}`)})
		tx.Rollback()
		if err != nil || len(published) != 1 || published[0].NotificationID != longest+":9223372036854775807" {
			t.Fatalf("Publish of an event id of %d = %+v, %v; want one delivery, its notification id of 256", store.MaxEventIDSize, published, err)
		}

		srv := publisherFor(t, s, "publisher")
		send := func(eventID string) (*http.Response, []byte) {
			body := `{"tenant":"publisher","event_type":"order.paid","event_id":"` + eventID + `","payload":{"a":1}}`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+publishToken)
			return exchange(t, srv, req)
		}
		resp, out := send(longest + "e")
		wantProblemCode(t, resp, out, http.StatusBadRequest, courier.CodeValidation, "event_id")
		if outbox, _ := stored(t, s); outbox != 0 {
			t.Fatalf("refused publishes stored %d deliveries", outbox)
		}
		resp, out = send(longest)
		if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(out), `"`+longest+`:9223372036854775807"`) {
			t.Fatalf("publish of an event id of %d: %d %s", store.MaxEventIDSize, resp.StatusCode, out)
		}
	})
}

// TestPublishIdempotencyKeyWorksForEverySender: the publish API recorded
// an Idempotency-Key under "publish/" + the verified sender, and the Inbox
// records senders of at most 256 bytes, so a sender named with 249 to 256
// bytes (which every verifier accepts) could publish without a key but was
// refused 400 validation_failed, naming nothing, on every request with
// one. Such a sender's keys are now recorded under "publish-sha256/" and
// the digest of its name; a shorter sender's stay where they always were,
// under "publish/" and its name. A fan-out's key is its tenant's (see
// TestPublishIdempotencyKeysAreEachTenants), recorded under
// "publish-tenant/", the sender's length, its name and the tenant's, or,
// where that is longer than a sender the Inbox records, under
// "publish-tenant-sha256/" and the digest of the same.
func TestPublishIdempotencyKeyWorksForEverySender(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		digest := func(sender string) string {
			named := fmt.Sprintf("%d:%s/%s", len(sender), sender, sender) // each publishes to the tenant named as it is
			sum := sha256.Sum256([]byte(named))
			return "publish-tenant-sha256/" + hex.EncodeToString(sum[:])
		}
		tests := []struct {
			sender, recorded string
		}{
			{"orders-service", "publish-tenant/14:orders-service/orders-service"},
			{strings.Repeat("s", 118), "publish-tenant/118:" + strings.Repeat("s", 118) + "/" + strings.Repeat("s", 118)},
			{strings.Repeat("s", 119), digest(strings.Repeat("s", 119))},
			{strings.Repeat("s", 248), digest(strings.Repeat("s", 248))},
			{strings.Repeat("s", 249), digest(strings.Repeat("s", 249))},
			// Two senders alike in the first 255 bytes are kept apart.
			{strings.Repeat("s", 255) + "a", digest(strings.Repeat("s", 255) + "a")},
			{strings.Repeat("s", 255) + "b", digest(strings.Repeat("s", 255) + "b")},
			{strings.Repeat("é", 128), digest(strings.Repeat("é", 128))},
		}
		for _, tt := range tests {
			srv := publisherFor(t, s, tt.sender)
			event := `{"tenant":"` + tt.sender + `","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
			status, first := publish(t, srv, event, "key-1", publishToken)
			if status != http.StatusAccepted {
				t.Fatalf("sender of %d bytes, with a key: %d %s", len(tt.sender), status, first)
			}
			if status, again := publish(t, srv, event, "key-1", publishToken); status != http.StatusAccepted || !bytes.Equal(again, first) {
				t.Fatalf("sender of %d bytes, the same request again: %d %s, want the first answer %s", len(tt.sender), status, again, first)
			}
			other := strings.Replace(event, `"a":1`, `"a":2`, 1)
			if status, out := publish(t, srv, other, "key-1", publishToken); status != http.StatusConflict || !strings.Contains(string(out), "idempotency_collision") {
				t.Fatalf("sender of %d bytes, the same key for another body: %d %s, want 409", len(tt.sender), status, out)
			}
			var n int
			if err := s.DB().Get(&n, s.DB().Rebind("SELECT COUNT(*) FROM courier_inbox WHERE sender = ? AND dedupe_key = ?"), tt.recorded, "key-1"); err != nil || n != 1 {
				t.Fatalf("sender of %d bytes: %d records under %q, %v; want 1", len(tt.sender), n, tt.recorded, err)
			}
		}
		if _, inbox := stored(t, s); inbox != len(tests) {
			t.Fatalf("%d idempotency records, want one per sender (%d)", inbox, len(tests))
		}
	})
}

// TestPublishRefusesWhatItDoesNotDescribe: the publish API checked a
// tenant's and an endpoint's length in characters and an endpoint's form
// as a URL of any scheme, while the outbox holds 256 bytes of tenant and
// 2048 of endpoint and delivers to http and https only: such a request
// reached Authorize and then the outbox, whose refusal was a 400
// validation_failed naming no field. And a request that mixed the two
// shapes (a fan-out with a notification_id, one delivery with an
// event_type or event_id) was accepted, the stray member shown to
// Authorize and then ignored: the caller's notification id was not the
// delivery's. Each is now 400 validation_failed naming the field, before
// Authorize sees it, and nothing is stored.
func TestPublishRefusesWhatItDoesNotDescribe(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: func(context.Context, signature.Principal, handler.PublishTarget) error {
		asked.Add(1)
		return nil
	}})
	subscribe(t, s, "acme", "https://acme.example/hooks")
	direct := func(endpoint string) string {
		b, _ := json.Marshal(map[string]any{"notification_id": "n-1", "endpoint": endpoint, "payload": map[string]int{"a": 1}})
		return string(b)
	}
	for _, tc := range []struct{ name, body, field string }{
		{"tenant of 129 characters, 258 bytes", `{"tenant":"` + strings.Repeat("é", 129) + `","event_type":"t","event_id":"e","payload":{}}`, "tenant"},
		{"tenant with NUL", `{"tenant":"acme\u0000","event_type":"t","event_id":"e","payload":{}}`, "tenant"},
		{"endpoint with NUL", direct("https://x.example/h\x00"), "endpoint"},
		{"endpoint of 1038 characters, 2058 bytes", direct("https://x.example/" + strings.Repeat("é", 1020)), "endpoint"},
		{"ftp endpoint", direct("ftp://x.example/h"), "endpoint"},
		{"file endpoint", direct("file:///etc/passwd"), "endpoint"},
		{"mailto endpoint", direct("mailto:a@x.example"), "endpoint"},
		{"opaque endpoint", direct("https:x.example"), "endpoint"},
		{"one delivery with an event_type", `{"notification_id":"n-1","endpoint":"https://x.example/h","event_type":"t","payload":{}}`, "event_type"},
		{"one delivery with an event_id", `{"notification_id":"n-1","endpoint":"https://x.example/h","event_id":"e","payload":{}}`, "event_id"},
		{"a fan-out with a notification_id", `{"tenant":"acme","event_type":"t","event_id":"e","notification_id":"n-1","payload":{}}`, "notification_id"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+publishToken)
		resp, out := exchange(t, srv, req)
		var p problemFields
		if err := json.Unmarshal(out, &p); err != nil || resp.StatusCode != http.StatusBadRequest || p.Code != courier.CodeValidation || !p.lists(tc.field) {
			t.Errorf("%s: %d %s, want 400 validation_failed naming %s", tc.name, resp.StatusCode, out, tc.field)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("Authorize was asked about %d requests that were refused", n)
	}
	if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
		t.Fatalf("refused publishes stored %d deliveries and %d idempotency records", outbox, inbox)
	}
}

// TestPublishRefusesAnEndpointNoDialReaches: a caller-chosen endpoint on
// port 0, or on one above 65535, was stored and every attempt to it failed
// with network_error until its budget ran out. It is now 400
// validation_failed naming endpoint (rule port), before Authorize sees it,
// and nothing is stored; a leading zero (:0443, port 443) is taken. A
// fan-out to a tenant one of whose subscriptions a database holds on port
// 0 (stored before the rule) still delivers to the others.
func TestPublishRefusesAnEndpointNoDialReaches(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: func(context.Context, signature.Principal, handler.PublishTarget) error {
		asked.Add(1)
		return nil
	}})
	refusesEndpoints(t, s, srv, &asked, "port", "https://x.example:0/h", "https://x.example:65536/h", "https://[2001:db8::1]:99999/h")
	if status, out := publish(t, srv, direct("n-2", "https://x.example:0443/h"), "", publishToken); status != http.StatusAccepted {
		t.Fatalf("an endpoint at :0443: %d %s, want 202", status, out)
	}

	subscribe(t, s, "orders-service", "https://a.example/h")
	subscribe(t, s, "orders-service", "https://b.example/h")
	if _, err := s.DB().Exec(s.DB().Rebind("UPDATE courier_subscriptions SET endpoint = ? WHERE endpoint = ?"), "https://b.example:0/h", "https://b.example/h"); err != nil {
		t.Fatal(err)
	}
	event := `{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
	status, out := publish(t, srv, event, "", publishToken)
	var got struct {
		NotificationIDs []string `json:"notification_ids"`
	}
	if err := json.Unmarshal(out, &got); err != nil || status != http.StatusAccepted || len(got.NotificationIDs) != 2 {
		t.Fatalf("a fan-out with a subscription stored at :0: %d %s, want 202 and a delivery to each", status, out)
	}
}

// TestPublishAnswersAnIdempotencyKeyInProgress: the publish API took any
// Idempotency-Key record that was not fresh for a completed one, so a
// record found still processing (a two-phase claim under the publisher's
// Inbox sender, committed before its answer) was answered 202 with an
// empty body, marked a duplicate, and nothing enqueued: the publisher
// took its event for published. It is now 503 in_progress with
// Retry-After, as every other handler answers it, and nothing is stored.
func TestPublishAnswersAnIdempotencyKeyInProgress(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	event := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
	key := protocol.InboxKey{Sender: "publish/orders-service", Key: "req-0001", PayloadSHA256: ack.Digest([]byte(event))}
	if r, _, err := protocol.InboxFor(s).Claim(t.Context(), key, time.Hour); err != nil || !r.Fresh {
		t.Fatalf("Claim = %+v, %v", r, err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(event))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+publishToken)
	req.Header.Set("Idempotency-Key", "req-0001")
	resp, out := exchange(t, srv, req)
	wantProblemCode(t, resp, out, http.StatusServiceUnavailable, courier.CodeInProgress, "")
	if resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 in_progress without Retry-After")
	}
	if outbox, _ := stored(t, s); outbox != 0 {
		t.Fatalf("a publish whose key is in progress enqueued %d deliveries", outbox)
	}
}

// TestPublishRefusalIsForbiddenWhateverTheError: PublishConfig.Authorize
// refuses with 403 forbidden whatever its error, but the answer was
// chosen by what the error wrapped: a policy refusing with Reject was
// answered 422 with the policy's code (a refusal of the notification for
// good, as a receiver's function makes), and one whose error wrapped an
// idempotency collision (a lookup in the outbox, say) 409
// idempotency_collision (published before with another payload). Each is
// now 403 forbidden, nothing stored.
func TestPublishRefusalIsForbiddenWhateverTheError(t *testing.T) {
	t.Parallel()
	for name, refusal := range map[string]error{
		"Reject":                handler.Reject("not_your_tenant", "publish to your own tenant"),
		"Reject without a code": handler.Reject("", "no"),
		"a wrapped collision":   fmt.Errorf("policy lookup: %w", courier.CodeIdempotencyCollision),
		"an invalid argument":   fmt.Errorf("%w: policy: no such tenant", courier.CodeInvalidArgument),
		"a plain error":         errors.New("not this publisher's tenant"),
		"a validation error":    &ack.ValidationError{Fields: []ack.FieldError{{Field: "tenant", Rule: "policy"}}},
		"a context deadline":    context.DeadlineExceeded,
		"a code with a message": fmt.Errorf("%w: policy busy", courier.CodeInProgress),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, srv := setupPublishWith(t, handler.PublishConfig{Authorize: func(context.Context, signature.Principal, handler.PublishTarget) error { return refusal }})
			subscribe(t, s, "acme", "https://acme.example/hooks")
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL,
				strings.NewReader(`{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+publishToken)
			resp, out := exchange(t, srv, req)
			wantProblemCode(t, resp, out, http.StatusForbidden, courier.CodeForbidden, "")
			if outbox, inbox := stored(t, s); outbox != 0 || inbox != 0 {
				t.Fatalf("a refused publish stored %d deliveries and %d idempotency records", outbox, inbox)
			}
		})
	}
}

// TestPublishTwoIdempotencyKeysNameTheRule: a request with two
// Idempotency-Keys, each a valid token, is refused 400 naming the header
// with the rule it broke, one key per request. It named courier_token,
// a rule both keys keep, leaving the client to look for a bad character.
func TestPublishTwoIdempotencyKeysNameTheRule(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL,
		strings.NewReader(`{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+publishToken)
	req.Header.Add("Idempotency-Key", "req-0001")
	req.Header.Add("Idempotency-Key", "req-0002")
	resp, out := exchange(t, srv, req)
	wantProblemCode(t, resp, out, http.StatusBadRequest, courier.CodeValidation, "Idempotency-Key")
	var p struct {
		Errors []struct{ Field, Rule string }
	}
	if err := json.Unmarshal(out, &p); err != nil || len(p.Errors) != 1 || p.Errors[0].Rule != "single" {
		t.Fatalf("two Idempotency-Keys answered %s (%v), want the one error of rule single", out, err)
	}
	if pending(t, s) != 0 {
		t.Fatalf("a request with two Idempotency-Keys enqueued %d deliveries", pending(t, s))
	}
}

// TestPublishRetrySerializedAnotherWayIsTheSameRequest: the publish API
// recorded an Idempotency-Key with the digest of the request's bytes, so a
// publisher that retried after a timeout and serialized the same request
// again another way (another key order, white space, escapes, a float
// spelled otherwise, a member sent empty rather than left out) was
// answered 409 idempotency_collision, and took its event for one that
// conflicts. A request is now judged on what it asks, its payload in the
// canonical form it is stored in: every such retry is answered the first
// answer, byte for byte, nothing enqueued again. A
// request that would store another payload under the key stays 409,
// nothing written: another value, an integer no float64 tells apart from
// the first, and an integer where a float was (stored and sent as other
// bytes, as a publish without a key tells apart).
func TestPublishRetrySerializedAnotherWayIsTheSameRequest(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		subscribe(t, s, "orders-service", "https://orders.example/hooks")
		srv := publisherFor(t, s, "orders-service")
		first := `{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1",` +
			`"payload":{"order":9007199254740993,"total":1.5,"note":"café","lines":[{"sku":"a","qty":2}]}}`
		status, answer := publish(t, srv, first, "req-0001", publishToken)
		if status != http.StatusAccepted {
			t.Fatalf("first publish: %d %s", status, answer)
		}
		for _, retry := range []string{
			`{"payload":{"lines":[{"qty":2,"sku":"a"}],"note":"café","total":1.5,"order":9007199254740993},` +
				`"event_id":"evt-1","event_type":"order.paid","tenant":"orders-service"}`,
			"{\n  \"tenant\": \"orders-service\",\n  \"event_type\": \"order.paid\",\n  \"event_id\": \"evt-1\",\n" +
				"  \"payload\": {\"order\": 9007199254740993, \"total\": 1.5, \"note\": \"café\", \"lines\": [{\"sku\": \"a\", \"qty\": 2}]}\n}\n",
			`{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1",` +
				`"payload":{"order":9007199254740993,"total":1.50,"note":"caf\u00e9","lines":[{"sku":"\u0061","qty":2}]}}`,
			`{"tenant":"orders\u002dservice","event_type":"order.paid","event_id":"evt-1",` +
				`"payload":{"order":9007199254740993,"total":15e-1,"note":"café","lines":[{"sku":"a","qty":2}]}}`,
			`{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1","notification_id":"","endpoint":null,` +
				`"payload":{"order":9007199254740993,"total":1.5,"note":"café","lines":[{"sku":"a","qty":2}]}}`,
		} {
			if status, again := publish(t, srv, retry, "req-0001", publishToken); status != http.StatusAccepted || !bytes.Equal(again, answer) {
				t.Errorf("retry serialized as %q: %d %s, want 202 and the first answer %s", retry, status, again, answer)
			}
		}
		for _, other := range []string{
			strings.Replace(first, `"total":1.5`, `"total":2.5`, 1),
			strings.Replace(first, `9007199254740993`, `9007199254740992`, 1),
			strings.Replace(first, `"qty":2`, `"qty":2.0`, 1),
			strings.Replace(first, `"event_id":"evt-1"`, `"event_id":"evt-2"`, 1),
		} {
			if status, out := publish(t, srv, other, "req-0001", publishToken); status != http.StatusConflict || !strings.Contains(string(out), "idempotency_collision") {
				t.Errorf("another request %s under the key: %d %s, want 409 idempotency_collision", other, status, out)
			}
		}
		if outbox, inbox := stored(t, s); outbox != 1 || inbox != 1 {
			t.Fatalf("%d deliveries and %d idempotency records, want the first publish's 1 and 1", outbox, inbox)
		}
	})
}

// TestPublishKeyRecordedByItsBytesIsStillFound: an Idempotency-Key
// recorded with the digest of its request's bytes, as the publish API
// recorded every key before it judged requests on their canonical form,
// under the sender, as it recorded every key before a fan-out's were its
// tenant's, is still answered: the same bytes again get the stored
// answer, nothing enqueued. Another fan-out under the key is not judged by
// that record, which another tenant's publisher may have made: it is
// recorded in its tenant's space, where a request again is judged.
func TestPublishKeyRecordedByItsBytesIsStillFound(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		subscribe(t, s, "orders-service", "https://orders.example/hooks")
		srv := publisherFor(t, s, "orders-service")
		event := `{"tenant":"orders-service", "event_type":"order.paid", "event_id":"evt-1", "payload":{"b":1, "a":2}}`
		answer := []byte(`{"notification_ids":["evt-1:1"]}`)
		key := protocol.InboxKey{Sender: "publish/orders-service", Key: "req-0001", PayloadSHA256: ack.Digest([]byte(event))}
		if r, err := protocol.InboxFor(s).RecordCompleted(t.Context(), s.DB(), key, answer); err != nil || !r.Fresh {
			t.Fatalf("RecordCompleted = %+v, %v", r, err)
		}
		if status, out := publish(t, srv, event, "req-0001", publishToken); status != http.StatusAccepted || !bytes.Equal(out, answer) {
			t.Fatalf("the recorded bytes again: %d %s, want 202 %s", status, out, answer)
		}
		if outbox, inbox := stored(t, s); outbox != 0 || inbox != 1 {
			t.Fatalf("%d deliveries and %d idempotency records, want 0 and the 1 recorded", outbox, inbox)
		}
		other := strings.Replace(event, `"a":2`, `"a":3`, 1)
		status, first := publish(t, srv, other, "req-0001", publishToken)
		if status != http.StatusAccepted {
			t.Fatalf("another fan-out under the key: %d %s, want 202", status, first)
		}
		if status, out := publish(t, srv, other, "req-0001", publishToken); status != http.StatusAccepted || !bytes.Equal(out, first) {
			t.Fatalf("that fan-out again: %d %s, want its answer %s", status, out, first)
		}
		if status, out := publish(t, srv, strings.Replace(event, `"a":2`, `"a":4`, 1), "req-0001", publishToken); status != http.StatusConflict {
			t.Fatalf("a third request under the key: %d %s, want 409", status, out)
		}
		if outbox, inbox := stored(t, s); outbox != 1 || inbox != 2 {
			t.Fatalf("%d deliveries and %d idempotency records, want 1 and 2", outbox, inbox)
		}
	})
}

// TestPublishConcurrentRetriesOfOneKeyGetOneAnswer: retries of one
// request under one Idempotency-Key, serialized two ways, arrive at once:
// each waits for the one that records the key and is answered its answer,
// byte for byte, and the event is enqueued once.
func TestPublishConcurrentRetriesOfOneKeyGetOneAnswer(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		subscribe(t, s, "orders-service", "https://orders.example/hooks")
		srv := publisherFor(t, s, "orders-service")
		bodies := []string{
			`{"tenant":"orders-service","event_type":"order.paid","event_id":"evt-1","payload":{"a":1,"b":[1.5]}}`,
			`{"payload": {"b": [1.50], "a": 1}, "event_id": "evt-1", "event_type": "order.paid", "tenant": "orders-service"}`,
		}
		type result struct {
			status int
			body   []byte
			err    error
		}
		results := make([]result, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(bodies[i%2]))
				if err != nil {
					results[i].err = err
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+publishToken)
				req.Header.Set("Idempotency-Key", "req-0001")
				<-start
				resp, err := srv.Client().Do(req)
				if err != nil {
					results[i].err = err
					return
				}
				defer resp.Body.Close()
				results[i].status = resp.StatusCode
				results[i].body, results[i].err = io.ReadAll(resp.Body)
			})
		}
		close(start)
		wg.Wait()
		for i, r := range results {
			if r.err != nil || r.status != http.StatusAccepted || !bytes.Equal(r.body, results[0].body) {
				t.Errorf("retry %d: %d %s %v, want 202 and one answer for all (%s)", i, r.status, r.body, r.err, results[0].body)
			}
		}
		if outbox, inbox := stored(t, s); outbox != 1 || inbox != 1 {
			t.Fatalf("%d deliveries and %d idempotency records, want 1 and 1", outbox, inbox)
		}
	})
}

// TestPublishAnEventIDAsAnotherTypeIsACollision: an event_id published
// again as another event_type is another event under a taken identity, 409
// idempotency_collision with nothing enqueued, as another payload is. It
// was 202: the subscription to every type had its delivery found as the
// first type's, and the one to the second type got the event under the
// first's id.
func TestPublishAnEventIDAsAnotherTypeIsACollision(t *testing.T) {
	t.Parallel()
	s, srv := setupPublish(t)
	paid := `{"tenant":"acme","event_type":"order.paid","event_id":"evt-1","payload":{"a":1}}`
	if status, out := publish(t, srv, paid, "", publishToken); status != http.StatusAccepted {
		t.Fatalf("first publish: %d %s", status, out)
	}
	created := `{"tenant":"acme","event_type":"order.created","event_id":"evt-1","payload":{"a":1}}`
	if status, out := publish(t, srv, created, "", publishToken); status != http.StatusConflict || !strings.Contains(string(out), `"code":"idempotency_collision"`) {
		t.Fatalf("evt-1 again as order.created: %d %s, want 409 idempotency_collision", status, out)
	}
	if outbox, _ := stored(t, s); outbox != 2 {
		t.Fatalf("the outbox holds %d deliveries, want the first publish's 2", outbox)
	}
}

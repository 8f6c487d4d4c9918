package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// receiverBundle is a Terminal receiver on a real SQLite inbox behind a
// real HTTP server, with the key its senders sign with.
type receiverBundle struct {
	store  *store.Store
	server *httptest.Server
	signer signature.Signer
	calls  atomic.Int32
	fail   atomic.Int32 // the next fail calls of the application fail
}

func setupReceiver(t *testing.T, reject bool) *receiverBundle {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().Exec("CREATE TABLE effects (notification_id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "cms-host", Keys: []signature.StandardWebhooksKey{key}})
	signer, _ := signature.NewStandardWebhooksSigner(key)
	b := &receiverBundle{store: s, signer: signer}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Body: middleware.BodyLimits{MaxBytes: 4 << 10}}, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
		b.calls.Add(1)
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (notification_id) VALUES (?)", n.NotificationID); err != nil {
			return err
		}
		if b.fail.Add(-1) >= 0 {
			return errors.New("application trouble")
		}
		if reject {
			return handler.Reject("", "not for this site")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.server = httptest.NewServer(rcv)
	t.Cleanup(b.server.Close)
	return b
}

func terminal(t *testing.T, event string) (ack.Terminal, []byte) {
	t.Helper()
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: event, SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1",
		SourceSequence: "3", JobCount: "2", ChangeSHA256: ack.Digest([]byte("change")),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "cancelled",
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return n, p
}

// post sends body signed as notification id at time at.
func (b *receiverBundle) post(t *testing.T, id string, body []byte, at time.Time, edit func(r *http.Request)) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.server.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := b.signer.Sign(req, signature.Message{ID: id, Body: body, Time: at}); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(req)
	}
	resp, err := b.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// written counts what the receiver stored: inbox records and effects.
func (b *receiverBundle) written(t *testing.T) (inbox, effects int) {
	t.Helper()
	return rows(t, b.store, "courier_inbox"), rows(t, b.store, "effects")
}

type problemBody struct {
	Status int                 `json:"status"`
	Code   courier.Code        `json:"code"`
	Errors []map[string]string `json:"errors"`
}

func TestReceiverRefusals(t *testing.T) {
	t.Parallel()
	n, payload := terminal(t, "evt-1")
	withField := func(field string, v any) []byte {
		var m map[string]any
		json.Unmarshal(payload, &m)
		m[field] = v
		b, _ := json.Marshal(m)
		return b
	}
	tests := []struct {
		name   string
		body   []byte
		at     time.Duration // signing time offset from now
		edit   func(r *http.Request)
		status int
		code   courier.Code
		field  string // a field the problem must list
	}{
		{name: "GET", body: payload, edit: func(r *http.Request) { r.Method = http.MethodGet }, status: 405, code: courier.CodeMethodNotAllowed},
		{name: "PUT", body: payload, edit: func(r *http.Request) { r.Method = http.MethodPut }, status: 405, code: courier.CodeMethodNotAllowed},
		{name: "text/plain", body: payload, edit: func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, status: 415, code: courier.CodeUnsupportedMediaType},
		{name: "no content type", body: payload, edit: func(r *http.Request) { r.Header.Del("Content-Type") }, status: 415, code: courier.CodeUnsupportedMediaType},
		{name: "latin-1 charset", body: payload, edit: func(r *http.Request) { r.Header.Set("Content-Type", "application/json; charset=latin1") }, status: 415, code: courier.CodeUnsupportedMediaType},
		{name: "too large", body: bytes.Repeat([]byte(" "), 5<<10), status: 413, code: courier.CodeBodyTooLarge},
		{name: "bad signature", body: payload, edit: func(r *http.Request) { r.Header.Set("webhook-signature", "v1,AAAA") }, status: 401, code: "signature_mismatch"},
		{name: "unsigned", body: payload, edit: func(r *http.Request) { r.Header.Del("webhook-signature") }, status: 401, code: "signature_missing"},
		{name: "stale timestamp", body: payload, at: -10 * time.Minute, status: 401, code: "signature_timestamp_out_of_range"},
		{name: "malformed JSON", body: []byte(`{"schema":`), status: 400, code: courier.CodeMalformedJSON},
		{name: "duplicate keys", body: append([]byte(`{"site_id":"x",`), payload[1:]...), status: 400, code: courier.CodeDuplicateKey},
		{name: "not an object", body: []byte(`[]`), status: 400, code: courier.CodeValidation},
		{name: "unknown field", body: withField("extra", 1), status: 400, code: courier.CodeValidation, field: "extra"},
		{name: "bad token", body: withField("site_id", "a b"), status: 400, code: courier.CodeValidation, field: "site_id"},
		{name: "boolean sequence", body: withField("source_sequence", true), status: 400, code: courier.CodeValidation, field: "source_sequence"},
		{name: "id not derived", body: withField("job_count", 9), status: 400, code: courier.CodeValidation, field: "notification_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupReceiver(t, false)
			resp, out := b.post(t, n.NotificationID, tt.body, time.Now().Add(tt.at), tt.edit)
			var p problemBody
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatalf("body %q is not a problem: %v", out, err)
			}
			if resp.StatusCode != tt.status || p.Status != tt.status || p.Code != tt.code {
				t.Fatalf("got %d %s, want %d %s (body %s)", resp.StatusCode, p.Code, tt.status, tt.code, out)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if tt.status == 401 && !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="`+string(tt.code)+`"`) {
				t.Fatalf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
			if tt.field != "" && !strings.Contains(string(out), `"field":"`+tt.field+`"`) {
				t.Fatalf("problem does not list %s: %s", tt.field, out)
			}
			if inbox, effects := b.written(t); inbox != 0 || effects != 0 || b.calls.Load() != 0 {
				t.Fatalf("refused request wrote %d inbox rows, %d effects, %d calls", inbox, effects, b.calls.Load())
			}
		})
	}
}

func TestReceiverAcceptsOnceAndReplays(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, false)
	n, payload := terminal(t, "evt-1")
	resp, first := b.post(t, n.NotificationID, payload, time.Now(), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("first delivery: %d %s", resp.StatusCode, first)
	}
	p, _ := ack.Builtin(ack.ProfileTerminal)
	if err := p.Verify(ack.Sent{ID: n.NotificationID, Payload: payload, Attempt: 1}, first); err != nil {
		t.Fatalf("Ack does not verify: %v", err)
	}
	for range 3 { // redeliveries, each signed afresh
		resp, again := b.post(t, n.NotificationID, payload, time.Now(), nil)
		if resp.StatusCode != 200 || !bytes.Equal(again, first) {
			t.Fatalf("redelivery: %d %q, want 200 with %q", resp.StatusCode, again, first)
		}
	}
	if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 1 {
		t.Fatalf("after redeliveries: %d inbox, %d effects, %d calls; want 1 each", inbox, effects, b.calls.Load())
	}

	// Re-serialized redeliveries and another notification for the event:
	// identity_test.go.
}

func TestReceiverFailureIsRetried(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, false)
	b.fail.Store(1)
	n, payload := terminal(t, "evt-2")
	resp, out := b.post(t, n.NotificationID, payload, time.Now(), nil)
	if resp.StatusCode != 500 || !strings.Contains(string(out), string(courier.CodeHandlerFailed)) {
		t.Fatalf("failing application: %d %s", resp.StatusCode, out)
	}
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 {
		t.Fatalf("failed processing left %d inbox rows, %d effects", inbox, effects)
	}
	resp, out = b.post(t, n.NotificationID, payload, time.Now(), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("retry: %d %s", resp.StatusCode, out)
	}
	if inbox, effects := b.written(t); inbox != 1 || effects != 1 || b.calls.Load() != 2 {
		t.Fatalf("after the retry: %d inbox, %d effects, %d calls", inbox, effects, b.calls.Load())
	}
}

func TestReceiverRejection(t *testing.T) {
	t.Parallel()
	b := setupReceiver(t, true)
	n, payload := terminal(t, "evt-3")
	resp, out := b.post(t, n.NotificationID, payload, time.Now(), nil)
	if resp.StatusCode != 422 || !strings.Contains(string(out), `"code":"rejected"`) {
		t.Fatalf("rejection: %d %s", resp.StatusCode, out)
	}
	if inbox, effects := b.written(t); inbox != 0 || effects != 0 {
		t.Fatalf("rejection wrote %d inbox rows, %d effects", inbox, effects)
	}
}

func TestReceiverConfig(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil }
	if _, err := handler.NewReceiver(handler.ReceiverConfig{}, fn); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Fatalf("no store: %v", err)
	}
	s, _ := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "x.db"), store.Config{})
	defer s.Close()
	if _, err := handler.NewReceiver(handler.ReceiverConfig{Store: s}, fn); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Fatalf("no verifier: %v", err)
	}
}

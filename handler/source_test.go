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
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

var sourceDigest = strings.Repeat("e", 64)

// sourceBundle is a Source on a real SQLite inbox behind a real HTTP
// server.
type sourceBundle struct {
	store   *store.Store
	logs    *logtest.Records // what the Sources log
	server  *httptest.Server
	signer  signature.Signer
	calls   atomic.Int32
	already atomic.Bool // the application reports the command already applied
	// serve returns, behind a server of its own, another Source on the
	// same store, verifier and function, serving digest.
	serve func(t *testing.T, digest string) *httptest.Server
}

func setupSource(t *testing.T) *sourceBundle {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "source.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	verifier, _ := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "host", Keys: []signature.StandardWebhooksKey{key}})
	signer, _ := signature.NewStandardWebhooksSigner(key)
	b := &sourceBundle{store: s, logs: new(logtest.Records), signer: signer}
	b.serve = func(t *testing.T, digest string) *httptest.Server {
		t.Helper()
		src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: digest, Logger: slog.New(b.logs)}, func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			b.calls.Add(1)
			if b.already.Load() {
				return handler.ErrAlreadyApplied
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(src)
		t.Cleanup(srv.Close)
		return srv
	}
	b.server = b.serve(t, sourceDigest)
	return b
}

func sourceCommand(t *testing.T, op, id, digest, body string) []byte {
	t.Helper()
	c, err := ack.NewCommand(ack.Command{Operation: op, RequestID: id, SourceMaxAttempts: 2, CapabilitiesSHA256: digest, Body: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Payload()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body signed under id at the given attempt (0: no header).
// applyFirst posts change:r1 as attempt 1 and returns the command and the
// 200 response it was applied with.
func (b *sourceBundle) applyFirst(t *testing.T) (body, response []byte) {
	t.Helper()
	body = sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"a":1}`)
	status, _, response := b.post(t, "change:r1", body, 1)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, response)
	}
	return body, response
}

func (b *sourceBundle) post(t *testing.T, id string, body []byte, attempt int) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.server.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if attempt > 0 {
		req.Header.Set(ack.AttemptHeader, strconv.Itoa(attempt))
	}
	if err := b.signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp, err := b.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(out, &p)
	return resp.StatusCode, p.Code, out
}

func TestSourceAppliesOnceAndReplays(t *testing.T) {
	t.Parallel()
	b := setupSource(t)
	body, first := b.applyFirst(t)
	if err := verifyCommand(body, 1, first); err != nil {
		t.Fatalf("response does not verify: %v (%s)", err, first)
	}
	want := `{"attempt":1,"capabilities_sha256":"` + sourceDigest + `","operation":"change","payload_sha256":"` + ack.Digest(body) +
		`","request_id":"r1","schema":"courier.source-command-response.v1","source_max_attempts":2,"status":"applied"}`
	if string(first) != want {
		t.Fatalf("response = %s\nwant       %s", first, want)
	}
	// A redelivery at a later attempt gets the stored response byte for
	// byte, and it still verifies for that attempt.
	status, _, again := b.post(t, "change:r1", body, 2)
	if status != http.StatusOK || !bytes.Equal(again, first) || b.calls.Load() != 1 {
		t.Fatalf("redelivery: %d %s after %d calls", status, again, b.calls.Load())
	}
	if err := verifyCommand(body, 2, again); err != nil {
		t.Fatalf("replayed response does not verify at attempt 2: %v", err)
	}
	// Even beyond the source's budget, a duplicate is answered from the inbox.
	if status, _, late := b.post(t, "change:r1", body, 3); status != http.StatusOK || !bytes.Equal(late, first) {
		t.Fatalf("late redelivery: %d %s", status, late)
	}

	b.already.Store(true)
	tomb := sourceCommand(t, ack.OperationTombstone, "r1", sourceDigest, "null")
	status, _, resp := b.post(t, "tombstone:r1", tomb, 1)
	if status != http.StatusOK || !strings.Contains(string(resp), `"status":"already_applied"`) {
		t.Fatalf("already applied: %d %s", status, resp)
	}
	if err := verifyCommand(tomb, 1, resp); err != nil {
		t.Fatal(err)
	}
}

// TestSourceReplaysAppliedCommandAfterContractChange: the contract was
// checked before the Inbox, so once a source was upgraded to another
// capabilities digest, the sender's retry of a command the old one had
// applied (its response lost on the way) was refused 409 contract_changed,
// though the command was applied and its response stored. The retry now
// gets the stored response byte for byte, without running the function
// again; a new command built for the old contract is still refused.
func TestSourceReplaysAppliedCommandAfterContractChange(t *testing.T) {
	t.Parallel()
	b := setupSource(t)
	body, first := b.applyFirst(t)

	b.server = b.serve(t, strings.Repeat("a", 64)) // the upgraded source
	status, code, again := b.post(t, "change:r1", body, 2)
	if status != http.StatusOK || !bytes.Equal(again, first) {
		t.Fatalf("redelivery to the upgraded source: %d %s %s, want 200 and the stored response %s", status, code, again, first)
	}
	if b.calls.Load() != 1 {
		t.Fatalf("the function ran %d times, want once", b.calls.Load())
	}

	fresh := sourceCommand(t, ack.OperationChange, "r2", sourceDigest, `{"a":2}`)
	if status, code, out := b.post(t, "change:r2", fresh, 1); status != http.StatusConflict || code != string(courier.CodeContractChanged) {
		t.Fatalf("new command for the old contract: %d %s %s, want 409 contract_changed", status, code, out)
	}
	if b.calls.Load() != 1 {
		t.Fatalf("the function ran %d times, want once", b.calls.Load())
	}
}

func TestSourceRefuses(t *testing.T) {
	t.Parallel()
	b := setupSource(t)
	valid := sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"a":1}`)
	if status, _, _ := b.post(t, "change:r1", valid, 1); status != http.StatusOK {
		t.Fatal("setup command refused")
	}
	tests := []struct {
		name   string
		body   []byte
		try    int
		status int
		code   courier.Code
	}{
		{"other contract", sourceCommand(t, ack.OperationChange, "r2", strings.Repeat("f", 64), `{}`), 1, http.StatusConflict, courier.CodeContractChanged},
		{"no attempt header", sourceCommand(t, ack.OperationChange, "r3", sourceDigest, `{}`), 0, http.StatusBadRequest, courier.CodeValidation},
		{"beyond the source budget", sourceCommand(t, ack.OperationChange, "r4", sourceDigest, `{}`), 3, http.StatusUnprocessableEntity, courier.CodeSourceAttemptsExhausted},
		{"same identity, other body", sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"a":2}`), 1, http.StatusConflict, courier.CodeIdempotencyCollision},
		{"unknown member", []byte(strings.Replace(string(valid), "{", `{"x":1,`, 1)), 1, http.StatusBadRequest, courier.CodeValidation},
		{"malformed", []byte(`{"schema":`), 1, http.StatusBadRequest, courier.CodeMalformedJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "x" // the signed webhook-id: the command's identity where it has one
			var c struct {
				Operation string `json:"operation"`
				RequestID string `json:"request_id"`
			}
			if json.Unmarshal(tt.body, &c) == nil && c.Operation != "" {
				id = c.Operation + ":" + c.RequestID
			}
			status, code, out := b.post(t, id, tt.body, tt.try)
			if status != tt.status || code != string(tt.code) {
				t.Fatalf("got %d %s (%s), want %d %s", status, code, out, tt.status, tt.code)
			}
		})
	}
	if b.calls.Load() != 1 {
		t.Fatalf("application ran %d times, want once", b.calls.Load())
	}
	if _, err := handler.NewSource(handler.SourceConfig{Store: &store.Store{}, Verifier: nil, CapabilitiesSHA256: sourceDigest}, nil); courier.CodeOf(err) != courier.CodeConfigInvalid {
		t.Fatalf("NewSource without a verifier = %v", err)
	}
}

// verifyCommand verifies a source's response as the sender does.
func verifyCommand(payload []byte, attempt int, response []byte) error {
	p, _ := ack.Builtin(ack.ProfileCommand)
	return p.Verify(ack.Sent{Payload: payload, Attempt: attempt}, response)
}

// TestCommandIdentityFitsEndToEnd: a command's identity, operation ":"
// request_id, is its notification id and the Source's inbox key, a token
// of at most 256 characters; but request_id alone was checked against
// 256, so NewCommand built commands with a request_id of 244-256
// characters that EnqueueCommand then refused as invalid_argument about a
// NotificationID the caller never set, and a Source answered 400
// validation_failed naming no field. Now NewCommand refuses them naming
// request_id, a payload carrying one is refused naming it by the store and
// by the Source, and the longest request_id accepted goes end to end.
func TestCommandIdentityFitsEndToEnd(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		calls := new(atomic.Int32)
		// A Bearer token signs no message id: the command's identity is
		// the body's.
		token, err := signature.ParseSecret("host", publishToken)
		if err != nil {
			t.Fatal(err)
		}
		verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "host-1", Tokens: []signature.Secret{token}})
		if err != nil {
			t.Fatal(err)
		}
		src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest}, anyApp[ack.Command](calls, anyOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		server := httptest.NewServer(src)
		t.Cleanup(server.Close)
		send := func(body []byte) (*http.Response, []byte) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+publishToken)
			req.Header.Set(ack.AttemptHeader, "1")
			return exchange(t, server, req)
		}
		const longest = 256 - len(ack.OperationCancellation+":") // 243
		command := ack.Command{Operation: ack.OperationCancellation, SourceMaxAttempts: 2, CapabilitiesSHA256: sourceDigest}

		// One character more: refused by NewCommand, the store and the Source.
		command.RequestID = strings.Repeat("r", longest+1)
		var ve *ack.ValidationError
		if _, err := ack.NewCommand(command); !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "request_id" {
			t.Fatalf("NewCommand of an identity of 257 = %v, want a ValidationError naming request_id", err)
		}
		built := command
		built.Schema, built.Body = "courier.source-command.v1", json.RawMessage("null")
		tooLong, err := built.Payload()
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Outbox.EnqueueCommand(t.Context(), s.DB(), store.CommandParams{Endpoint: "https://source.example/c", Payload: tooLong})
		if courier.CodeOf(err) != courier.CodeRequestInvalid || !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "request_id" {
			t.Fatalf("EnqueueCommand = %v, want request_invalid naming request_id", err)
		}
		resp, out := send(tooLong)
		wantProblemCode(t, resp, out, http.StatusBadRequest, courier.CodeValidation, "request_id")

		// The longest: enqueued, and applied by the Source.
		command.RequestID = strings.Repeat("r", longest)
		c, err := ack.NewCommand(command)
		if err != nil {
			t.Fatalf("NewCommand of an identity of 256: %v", err)
		}
		body, err := c.Payload()
		if err != nil {
			t.Fatal(err)
		}
		e, err := s.Outbox.EnqueueCommand(t.Context(), s.DB(), store.CommandParams{Endpoint: "https://source.example/c", Payload: body})
		if err != nil {
			t.Fatalf("EnqueueCommand of an identity of 256: %v", err)
		}
		if d, err := s.Outbox.Get(t.Context(), e.ID); err != nil || d.NotificationID != c.DedupeKey() {
			t.Fatalf("enqueued %+v, %v; want notification id %s", d, err, c.DedupeKey())
		}
		resp, out = send(body)
		if resp.StatusCode != http.StatusOK || calls.Load() != 1 {
			t.Fatalf("the Source answers %d %s after %d calls, want 200 and one", resp.StatusCode, out, calls.Load())
		}
		if err := verifyCommand(body, 1, out); err != nil {
			t.Fatalf("the response does not verify: %v", err)
		}
		if inbox, _ := counts(t, s, "courier_outbox"); inbox != 1 {
			t.Fatalf("%d inbox records, want 1", inbox)
		}
	})
}

// TestSourceAlreadyAppliedAfterAFailedStatement: a function that finds a
// command's effect present by the failure of its write (an insert of a
// row that exists) returns ErrAlreadyApplied. On SQLite the transaction
// survives the failed statement and the Source answers already_applied;
// on PostgreSQL the failed statement aborts the transaction, so storing
// the response in it failed, and every delivery of the command was
// answered 503 internal_error, as if the store were down, until the
// sender's budget ran out. Both engines now answer already_applied and
// replay it to the redelivery without running the function again.
func TestSourceAlreadyAppliedAfterAFailedStatement(t *testing.T) {
	t.Parallel()
	onEachEngine(t, func(t *testing.T, s *store.Store) {
		if _, err := s.DB().ExecContext(t.Context(), `CREATE TABLE source_pages (id TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		verifier, signer := standardWebhooksFor(t, "host")
		var calls atomic.Int32
		src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest},
			func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
				calls.Add(1)
				if _, err := tx.ExecContext(ctx, `INSERT INTO source_pages (id) VALUES ('home')`); err != nil {
					return handler.ErrAlreadyApplied // the page is there
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		server := httptest.NewServer(src)
		t.Cleanup(server.Close)
		send := func(id string, body []byte) (*http.Response, []byte) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(ack.AttemptHeader, "1")
			if err := signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
				t.Fatal(err)
			}
			return exchange(t, server, req)
		}
		first := sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"page":"home"}`)
		if resp, out := send("change:r1", first); resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"status":"applied"`) {
			t.Fatalf("first command: %d %s, want 200 applied", resp.StatusCode, out)
		}
		again := sourceCommand(t, ack.OperationChange, "r2", sourceDigest, `{"page":"home"}`)
		resp, out := send("change:r2", again)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"status":"already_applied"`) {
			t.Fatalf("a command whose effect is present: %d %s, want 200 already_applied", resp.StatusCode, out)
		}
		if err := verifyCommand(again, 1, out); err != nil {
			t.Fatalf("the response does not verify: %v", err)
		}
		resp, replay := send("change:r2", again)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(replay, out) || calls.Load() != 2 {
			t.Fatalf("redelivery: %d %s after %d calls, want the stored response and 2 calls", resp.StatusCode, replay, calls.Load())
		}
		var pages int
		if err := s.DB().GetContext(t.Context(), &pages, `SELECT COUNT(*) FROM source_pages`); err != nil || pages != 1 {
			t.Fatalf("%d pages (%v), want 1", pages, err)
		}
	})
}

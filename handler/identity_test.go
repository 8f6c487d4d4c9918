package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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

// The tests here hold the receivers to identity as senders mean it: a
// terminal notification is its canonical JSON and is keyed by its event;
// the signed message id, of either Standard Webhooks brand, must be the
// notification's; a payload without an id of its own is deduped by the
// signed message id.

// redelivery is one notification of testdata/terminal/redeliveries.json,
// written by gen.py with the reference system's canonical JSON.
type redelivery struct {
	Name           string `json:"name"`
	NotificationID string `json:"notification_id"`
	EventID        string `json:"event_id"`
	Payload        string `json:"payload"` // canonical
	Ack            string `json:"ack"`     // the reference's Ack, canonical
	Redeliveries   []struct {
		Name string `json:"name"`
		Body string `json:"body"`
	} `json:"redeliveries"`
	// OtherForEvent is another notification for the same event.
	OtherForEvent struct {
		NotificationID string `json:"notification_id"`
		Payload        string `json:"payload"`
	} `json:"other_for_event"`
}

func redeliveries(t *testing.T) []redelivery {
	t.Helper()
	b, err := os.ReadFile("testdata/terminal/redeliveries.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []redelivery
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 2 || len(cases[0].Redeliveries) < 9 {
		t.Fatalf("testdata has %d cases", len(cases))
	}
	return cases
}

// engines opens a fresh store on each engine: SQLite, and PostgreSQL
// when one can be started (see openPostgresStore).
var engines = []struct {
	name string
	open func(t *testing.T) *store.Store
}{
	{"sqlite", openSQLiteStore},
	{"postgres", func(t *testing.T) *store.Store {
		t.Helper()
		return openPostgresStore(t, store.Config{})
	}},
}

// terminalEnv is a Terminal receiver behind a real server, verifying
// Standard Webhooks signatures of one sender, whose function records the
// notifications it applies.
type terminalEnv struct {
	store  *store.Store
	server *httptest.Server
	signer signature.Signer
	calls  atomic.Int32
}

// openTerminal serves a Terminal receiver on s for sender. Several may
// share s: they share its Inbox and the identity_effects table.
func openTerminal(t *testing.T, s *store.Store, sender string) *terminalEnv {
	t.Helper()
	if _, err := s.DB().Exec("CREATE TABLE IF NOT EXISTS identity_effects (notification_id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	verifier, signer := standardWebhooksFor(t, sender)
	e := &terminalEnv{store: s, signer: signer}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
		e.calls.Add(1)
		_, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO identity_effects (notification_id) VALUES (?)"), n.NotificationID)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.server = httptest.NewServer(rcv)
	t.Cleanup(e.server.Close)
	return e
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
	signer, err := signature.NewStandardWebhooksSigner(key)
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
	return exchange(t, server, req)
}

// onEachEngine runs test once per engine, in parallel, each with a fresh
// Store.
func onEachEngine(t *testing.T, test func(t *testing.T, s *store.Store)) {
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			test(t, engine.open(t))
		})
	}
}

// exchange sends req to server and returns the answer, its body read.
func exchange(t *testing.T, server *httptest.Server, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	return exchangeWith(t, server.Client(), req)
}

// exchangeWith sends req with c and returns the answer, its body read.
func exchangeWith(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(req)
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

// counts returns the Inbox records and the effects written on s.
func counts(t *testing.T, s *store.Store, effects string) (inbox, applied int) {
	t.Helper()
	return rows(t, s, "courier_inbox"), rows(t, s, effects)
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

// TestReserializedTerminalIsADuplicate: the receiver keyed terminal
// notifications on the digest of the raw bytes, so a redelivery of the
// same notification serialized by another encoder (Python's json.dumps
// defaults, indentation, another key order, \u escapes, a trailing
// newline) was answered 409 idempotency_collision. Its identity is its
// canonical JSON: every such redelivery is a duplicate, answered 200 with
// the stored Ack (the reference's Ack, byte for byte), the function not
// run again. The first delivery is itself re-serialized, so the stored
// Ack binds the canonical digest, not the bytes first received.
func TestReserializedTerminalIsADuplicate(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		for _, c := range redeliveries(t) {
			t.Run(engine.name+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				e := openTerminal(t, engine.open(t), "cms-host")
				first := c.Redeliveries[0]
				resp, stored := postSigned(t, e.server, e.signer, c.NotificationID, []byte(first.Body), false)
				if resp.StatusCode != http.StatusOK || string(stored) != c.Ack {
					t.Fatalf("first delivery (%s): %d %s, want 200 with the reference's Ack %s", first.Name, resp.StatusCode, stored, c.Ack)
				}
				profile, _ := ack.Builtin(ack.ProfileTerminal)
				if err := profile.Verify(ack.Sent{ID: c.NotificationID, Payload: []byte(c.Payload), Attempt: 1}, stored); err != nil {
					t.Fatalf("a courier sender of the canonical payload refuses the Ack: %v", err)
				}
				again := append([]struct {
					Name string `json:"name"`
					Body string `json:"body"`
				}{{Name: "canonical", Body: c.Payload}}, c.Redeliveries[1:]...)
				for _, r := range again {
					resp, out := postSigned(t, e.server, e.signer, c.NotificationID, []byte(r.Body), false)
					if resp.StatusCode != http.StatusOK || !bytes.Equal(out, stored) {
						t.Fatalf("redelivery %s: %d %s, want 200 with the stored Ack", r.Name, resp.StatusCode, out)
					}
				}
				if inbox, applied := counts(t, e.store, "identity_effects"); inbox != 1 || applied != 1 || e.calls.Load() != 1 {
					t.Fatalf("after %d redeliveries: %d inbox rows, %d effects, %d calls; want 1 each", len(again), inbox, applied, e.calls.Load())
				}
			})
		}
	}
}

// TestTerminalForAnAcceptedEventIsACollision: the reference keys terminal
// notifications by event_id, so another notification for an event already
// accepted is an idempotency collision; the receiver keyed them by
// notification_id and applied both. Now it answers 409
// idempotency_collision and applies nothing; the accepted notification
// again is still 200 with the stored Ack; and the event is scoped by the
// verified sender, so another sender's notification for an event of the
// same name is its own.
func TestTerminalForAnAcceptedEventIsACollision(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		for _, c := range redeliveries(t) {
			t.Run(engine.name+"/"+c.Name, func(t *testing.T) {
				t.Parallel()
				s := engine.open(t)
				e := openTerminal(t, s, "cms-host")
				resp, stored := postSigned(t, e.server, e.signer, c.NotificationID, []byte(c.Payload), false)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("first notification: %d %s", resp.StatusCode, stored)
				}
				other := []byte(c.OtherForEvent.Payload)
				resp, out := postSigned(t, e.server, e.signer, c.OtherForEvent.NotificationID, other, false)
				wantProblemCode(t, resp, out, http.StatusConflict, courier.CodeIdempotencyCollision, "")
				if inbox, applied := counts(t, s, "identity_effects"); inbox != 1 || applied != 1 || e.calls.Load() != 1 {
					t.Fatalf("the collision wrote: %d inbox rows, %d effects, %d calls", inbox, applied, e.calls.Load())
				}
				var key string
				if err := s.DB().Get(&key, "SELECT dedupe_key FROM courier_inbox"); err != nil || key != c.EventID {
					t.Fatalf("the Inbox keys it by %q (%v), want the event_id %q", key, err, c.EventID)
				}
				resp, out = postSigned(t, e.server, e.signer, c.NotificationID, []byte(c.Redeliveries[0].Body), false)
				if resp.StatusCode != http.StatusOK || !bytes.Equal(out, stored) {
					t.Fatalf("the accepted notification again: %d %s, want 200 with the stored Ack", resp.StatusCode, out)
				}

				elsewhere := openTerminal(t, s, "another-host")
				resp, out = postSigned(t, elsewhere.server, elsewhere.signer, c.OtherForEvent.NotificationID, other, false)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("another sender's notification for an event of that name: %d %s, want 200", resp.StatusCode, out)
				}
				if inbox, applied := counts(t, s, "identity_effects"); inbox != 2 || applied != 2 {
					t.Fatalf("after another sender's notification: %d inbox rows, %d effects; want 2 each", inbox, applied)
				}
			})
		}
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

// svixEvent is an outside sender's payload with no id of its own: Svix
// puts the message id (msg_…) only in the signed svix-id header.
type svixEvent struct {
	Type string         `json:"type" validate:"required"`
	Data map[string]any `json:"data" validate:"required"`
}

// DedupeKey is "": the signed message id is the identity.
func (svixEvent) DedupeKey() string { return "" }

// svixEnv is a Receiver[svixEvent] behind a real server.
type svixEnv struct {
	store  *store.Store
	server *httptest.Server
	calls  atomic.Int32
}

func openSvix(t *testing.T, verifier signature.Verifier) *svixEnv {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "svix.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.DB().Exec("CREATE TABLE svix_effects (type TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	e := &svixEnv{store: s}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n svixEvent) error {
		e.calls.Add(1)
		_, err := tx.ExecContext(ctx, "INSERT INTO svix_effects (type) VALUES (?)", n.Type)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.server = httptest.NewServer(rcv)
	t.Cleanup(e.server.Close)
	return e
}

// TestPayloadWithoutIDIsDedupedBySignedMessageID: a sender that puts its
// message id only in the signed svix-id header (Svix's msg_…) could not
// reach a receiver, which required the body to carry the id. A payload
// type whose DedupeKey is "" is now deduped by the signed message id: the
// Ack names it, the same message again is a duplicate with the stored
// Ack, the same id with another body a collision, and another message id
// a new notification.
func TestPayloadWithoutIDIsDedupedBySignedMessageID(t *testing.T) {
	t.Parallel()
	verifier, signer := standardWebhooksFor(t, "svix-app")
	e := openSvix(t, verifier)
	const msg = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1","amount":100}}`)

	resp, first := postSigned(t, e.server, signer, msg, body, true)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first delivery: %d %s", resp.StatusCode, first)
	}
	if err := ack.New(msg, body).Verify(first); err != nil {
		t.Fatalf("the Ack does not bind the signed message id and the body: %v (%s)", err, first)
	}
	var key string
	if err := e.store.DB().Get(&key, "SELECT dedupe_key FROM courier_inbox"); err != nil || key != msg {
		t.Fatalf("the Inbox keys it by %q (%v), want the signed message id", key, err)
	}
	resp, again := postSigned(t, e.server, signer, msg, body, true)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(again, first) {
		t.Fatalf("redelivery: %d %s, want 200 with the stored Ack", resp.StatusCode, again)
	}
	resp, out := postSigned(t, e.server, signer, msg, []byte(`{"type":"invoice.paid","data":{"id":"in_2"}}`), true)
	wantProblemCode(t, resp, out, http.StatusConflict, courier.CodeIdempotencyCollision, "")
	if inbox, applied := counts(t, e.store, "svix_effects"); inbox != 1 || applied != 1 || e.calls.Load() != 1 {
		t.Fatalf("after a redelivery and a collision: %d inbox rows, %d effects, %d calls; want 1 each", inbox, applied, e.calls.Load())
	}
	resp, out = postSigned(t, e.server, signer, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4X", body, false)
	if resp.StatusCode != http.StatusOK || ack.New("msg_2KWPBgLlAfxdpx2AI54pPJ85f4X", body).Verify(out) != nil {
		t.Fatalf("another message id (webhook-id brand): %d %s, want 200 with its own Ack", resp.StatusCode, out)
	}
	if inbox, applied := counts(t, e.store, "svix_effects"); inbox != 2 || applied != 2 {
		t.Fatalf("after another message: %d inbox rows, %d effects; want 2 each", inbox, applied)
	}
}

// TestPayloadWithoutIDNeedsASignedMessageID: with nothing to dedupe it
// by, a payload without an id is refused: 400 message_id_missing under a
// scheme that signs no message id (here a bearer token), 400
// validation_failed on webhook-id for a signed id that is no token.
// Nothing is written and the function does not run.
func TestPayloadWithoutIDNeedsASignedMessageID(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)
	t.Run("bearer", func(t *testing.T) {
		t.Parallel()
		const token = "svix-bearer-token-0123456789abcdefghijklmnop"
		secret, err := signature.ParseSecret("t1", token)
		if err != nil {
			t.Fatal(err)
		}
		verifier, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "svix-app", Tokens: []signature.Secret{secret}})
		if err != nil {
			t.Fatal(err)
		}
		e := openSvix(t, verifier)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.server.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("webhook-id", "msg_unsigned") // not signed: no identity
		resp, err := e.server.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantProblemCode(t, resp, out, http.StatusBadRequest, courier.CodeMessageIDMissing, "")
		if inbox, applied := counts(t, e.store, "svix_effects"); inbox != 0 || applied != 0 || e.calls.Load() != 0 {
			t.Fatalf("refused request wrote %d inbox rows, %d effects, %d calls", inbox, applied, e.calls.Load())
		}
	})
	t.Run("signed id not a token", func(t *testing.T) {
		t.Parallel()
		verifier, signer := standardWebhooksFor(t, "svix-app")
		e := openSvix(t, verifier)
		resp, out := postSigned(t, e.server, signer, "msg/1", body, true)
		wantProblemCode(t, resp, out, http.StatusBadRequest, courier.CodeValidation, "webhook-id")
		if inbox, applied := counts(t, e.store, "svix_effects"); inbox != 0 || applied != 0 || e.calls.Load() != 0 {
			t.Fatalf("refused request wrote %d inbox rows, %d effects, %d calls", inbox, applied, e.calls.Load())
		}
	})
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
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(_ context.Context, _ *sqlx.Tx, n ack.Terminal) error {
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
		SourceSequence: huge, JobCount: "1", ChangeSHA256: ack.Digest([]byte("change")),
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

// TestTerminalJobCountBeyondInt64IsAccepted: DESIGN gives job_count the
// rule of source_sequence (integers > 0, booleans rejected), and the
// reference takes any positive integer for both, but the receiver refused
// a job_count past int64, for good (400 validation_failed job_count/type),
// in a notification the reference renders. The payload and its digest are
// the reference's (Python: json.dumps with sort_keys, compact separators,
// ensure_ascii=False): it is accepted, the function sees the exact digits,
// and the Ack carries the reference's notification_sha256.
func TestTerminalJobCountBeyondInt64IsAccepted(t *testing.T) {
	t.Parallel()
	const (
		payload = `{"change_sha256":"12ea12eace7d655f471ce55e34f89b1b77a3d9d05a445ca82877dd2235beaa51","event_id":"evt-jobs","job_count":18446744073709551617,"lifecycle_binding_sha256":"80f70afeef3caa57646fd20afb95be9c3f2c03d38e091906de31838813dcc22e","lifecycle_sha256":null,"notification_id":"terminal-d6086fb09d7cf9101ca0ba0c097ae939f9afa4034f7b68bc1b5e0bfc991ff94e","plan_id":"plan-1","schema":"blun.cms-source-terminal-notification.v1","site_id":"site-1","source_sequence":1,"terminal_status":"cancelled","website_version":"v1"}`
		id      = "terminal-d6086fb09d7cf9101ca0ba0c097ae939f9afa4034f7b68bc1b5e0bfc991ff94e"
		digest  = "eb8c706fd5942c9c41c4a08c08f9e7e69c840d043102c053a3cbdac7f0bcc7fb"
		huge    = "18446744073709551617"
	)
	s := engines[0].open(t)
	verifier, signer := standardWebhooksFor(t, "cms-host")
	var got atomic.Value
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(_ context.Context, _ *sqlx.Tx, n ack.Terminal) error {
		got.Store(fmt.Sprint(n.JobCount))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(rcv)
	t.Cleanup(server.Close)
	resp, out := postSigned(t, server, signer, id, []byte(payload), false)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s, want 200 (the reference accepts job_count 2^64+1)", resp.StatusCode, out)
	}
	profile, _ := ack.Builtin(ack.ProfileTerminal)
	if err := profile.Verify(ack.Sent{ID: id, Payload: []byte(payload), Attempt: 1}, out); err != nil {
		t.Fatalf("the sender refuses the Ack: %v", err)
	}
	if !strings.Contains(string(out), `"notification_sha256":"`+digest+`"`) {
		t.Fatalf("Ack %s, want the reference's notification_sha256 %s", out, digest)
	}
	if jobs, _ := got.Load().(string); jobs != huge {
		t.Fatalf("the function saw job_count %q, want %s", jobs, huge)
	}
}

// openSQLiteStore opens a fresh SQLite store, closed as the test ends.
func openSQLiteStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

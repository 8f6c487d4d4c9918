package handler_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The tests of this file follow an operator through the rotation of each
// key courier holds, end to end: a worker delivering an outbox over real
// HTTP to a receiver deduping in a real inbox, on both engines, with
// deliveries in flight when the keys change. Each also checks that no
// secret reaches a log line, an answer or a stored error.

// rotated is the notification type of these tests.
type rotated struct {
	ID string `json:"notification_id" validate:"required,courier_token"`
}

func (r rotated) DedupeKey() string { return r.ID }

// syncBuffer is a bytes.Buffer safe for the concurrent writes of loggers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// rotationRig is a sender's outbox and a receiver's inbox, on one engine,
// and the receiver serving over HTTP behind a script of faults. The
// receiver verifies with whatever verifier is current (an operator's
// restart with new keys, without one), and records which key verified
// each request.
type rotationRig struct {
	ctx      context.Context
	outbox   *store.Store
	inbox    *store.Store
	srv      *couriertest.Server
	effects  *couriertest.Effects
	verifier atomic.Pointer[signature.Verifier]
	receiver atomic.Pointer[http.Handler]
	logs     *syncBuffer
	now      func() time.Time // the worker's clock

	mu     sync.Mutex
	faults map[string][]couriertest.Fault // by notification id, one per attempt
	keyIDs map[string][]string            // the keys that verified each notification's requests
}

// rotationEngines runs test on SQLite and on PostgreSQL.
func rotationEngines(t *testing.T, test func(t *testing.T, postgres bool)) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { test(t, pg) })
	}
}

// openRotationStores opens an outbox and an inbox, each in a database of
// its own, on one engine.
func openRotationStores(t *testing.T, postgres bool, outboxCfg, inboxCfg store.Config) (outbox, inbox *store.Store) {
	t.Helper()
	if !postgres {
		dir := t.TempDir()
		var err error
		if outbox, err = sqlite.Open(t.Context(), filepath.Join(dir, "sender.db"), outboxCfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { outbox.Close() })
		if inbox, err = sqlite.Open(t.Context(), filepath.Join(dir, "receiver.db"), inboxCfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inbox.Close() })
		return outbox, inbox
	}
	return openPostgresStore(t, outboxCfg), openPostgresStore(t, inboxCfg)
}

// newRotationRig returns a rig whose receiver verifies with v (set later
// with receiverTrusts when v is nil: no request comes before).
func newRotationRig(t *testing.T, postgres bool, outboxCfg, inboxCfg store.Config, v signature.Verifier) *rotationRig {
	t.Helper()
	r := &rotationRig{ctx: t.Context(), logs: &syncBuffer{}, now: time.Now, faults: map[string][]couriertest.Fault{}, keyIDs: map[string][]string{}}
	r.outbox, r.inbox = openRotationStores(t, postgres, outboxCfg, inboxCfg)
	var err error
	if r.effects, err = couriertest.NewEffects(r.ctx, r.inbox); err != nil {
		t.Fatal(err)
	}
	r.verifier.Store(&v)
	r.serveFrom(t, r.inbox)
	r.srv = couriertest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		(*r.receiver.Load()).ServeHTTP(w, req)
	}), func(id string, attempt int) couriertest.Fault {
		r.mu.Lock()
		defer r.mu.Unlock()
		if f := r.faults[id]; len(f) > 0 {
			r.faults[id] = f[1:]
			return f[0]
		}
		return couriertest.Fault{}
	})
	t.Cleanup(r.srv.Close)
	return r
}

// serveFrom switches the receiver to one over the inbox s, as a restart
// with another store configuration.
func (r *rotationRig) serveFrom(t *testing.T, s *store.Store) {
	t.Helper()
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{
		Store: s, Verifier: verifierFunc(r.verify),
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, func(ctx context.Context, tx *sqlx.Tx, n rotated) error { return r.effects.Record(ctx, tx, n.ID) })
	if err != nil {
		t.Fatal(err)
	}
	h := http.Handler(rcv)
	r.receiver.Store(&h)
}

// reopen returns another Store over s's database with cfg: another
// process sharing it, or the same one restarted with other keys.
func reopen(t *testing.T, s *store.Store, cfg store.Config) *store.Store {
	t.Helper()
	o, err := store.Open(t.Context(), s.DB(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// verifierFunc is a signature.Verifier of a function.
type verifierFunc func(ctx context.Context, req *http.Request, body []byte) (signature.Principal, error)

func (f verifierFunc) Verify(ctx context.Context, req *http.Request, body []byte) (signature.Principal, error) {
	return f(ctx, req, body)
}

// verify verifies with the current verifier and records the key that
// verified the request.
func (r *rotationRig) verify(ctx context.Context, req *http.Request, body []byte) (signature.Principal, error) {
	p, err := (*r.verifier.Load()).Verify(ctx, req, body)
	var n rotated
	_ = json.Unmarshal(body, &n)
	if err == nil {
		r.mu.Lock()
		r.keyIDs[n.ID] = append(r.keyIDs[n.ID], p.KeyID)
		r.mu.Unlock()
	}
	return p, err
}

// receiverTrusts switches the receiver to v, as a restart with new keys.
func (r *rotationRig) receiverTrusts(v signature.Verifier) { r.verifier.Store(&v) }

// fault scripts the next attempts of notification id.
func (r *rotationRig) fault(id string, f ...couriertest.Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[id] = append(r.faults[id], f...)
}

// verifiedBy returns the key ids that verified notification id's
// requests, in order.
func (r *rotationRig) verifiedBy(id string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keyIDs[id]...)
}

// enqueue commits one delivery of notification id to the receiver,
// signed with the configuration keyID.
func (r *rotationRig) enqueue(t *testing.T, id, keyID string) int64 {
	t.Helper()
	tx, err := r.outbox.Begin(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	e, err := r.outbox.Outbox.Enqueue(r.ctx, tx, store.EnqueueParams{
		NotificationID: id, Endpoint: r.srv.URL + "/hooks", Payload: []byte(`{"notification_id":"` + id + `"}`), KeyID: keyID,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

// worker returns a worker signing with signers, by the deliveries' KeyID,
// as a sender process configured with them; retries are due at once.
func (r *rotationRig) worker(t *testing.T, signers map[string]signature.Signer) *client.Worker {
	t.Helper()
	w, err := client.NewWorker(client.Config{
		Store: r.outbox, Transport: r.srv.Guard().Transport(), Concurrency: 4,
		SignerFor: func(_ context.Context, keyID string) (signature.Signer, error) {
			if s, ok := signers[keyID]; ok {
				return s, nil
			}
			return nil, courier.CodeConfigInvalid
		},
		Backoff: func(int, time.Duration) time.Duration { return 0 },
		Now:     r.now,
		Logger:  slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// work runs one cycle of w: each due delivery is attempted once.
func (r *rotationRig) work(t *testing.T, w *client.Worker) {
	t.Helper()
	if _, err := w.Work(r.ctx); err != nil {
		t.Fatal(err)
	}
}

// drain runs w until nothing is due.
func (r *rotationRig) drain(t *testing.T, w *client.Worker) {
	t.Helper()
	if _, err := couriertest.Drain(r.ctx, w); err != nil {
		t.Fatal(err)
	}
}

// delivery returns the delivery id as the outbox holds it.
func (r *rotationRig) delivery(t *testing.T, id int64) store.Delivery {
	t.Helper()
	d, err := r.outbox.Outbox.Get(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// applied returns how many times the receiver's function ran for id.
func (r *rotationRig) applied(t *testing.T, id string) int {
	t.Helper()
	n, err := r.effects.Count(r.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantAppliedOnce fails unless each of ids succeeded and the receiver's
// function ran once for it.
func (r *rotationRig) wantAppliedOnce(t *testing.T, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		d := r.delivery(t, id)
		if d.Status != courier.StatusSucceeded {
			t.Fatalf("delivery %s is %s/%s, want succeeded", d.NotificationID, d.Status, d.LastErrorCode)
		}
		if n := r.applied(t, d.NotificationID); n != 1 {
			t.Fatalf("%s applied %d times, want once", d.NotificationID, n)
		}
	}
}

// wantNoSecrets fails if any of secrets shows in what the rig logged, in
// a stored delivery's codes or in its attempts log.
func (r *rotationRig) wantNoSecrets(t *testing.T, deliveries []int64, secrets ...string) {
	t.Helper()
	seen := r.logs.String()
	for _, id := range deliveries {
		d := r.delivery(t, id)
		seen += "\n" + string(d.LastErrorCode) + " " + string(d.LastRemoteCode)
		attempts, err := r.outbox.Outbox.Attempts(r.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range attempts {
			b, _ := json.Marshal(a)
			seen += "\n" + string(b)
		}
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(seen, s) {
			t.Errorf("a secret shows in the logs or the stored deliveries")
		}
	}
}

// standardWebhooksKey parses a fresh whsec_ secret under id, and returns
// it with its encoded form and its base64 part, for the leak checks.
func standardWebhooksKey(t *testing.T, id string) (signature.StandardWebhooksKey, []string) {
	t.Helper()
	encoded := signature.NewStandardWebhooksSecret()
	k, err := signature.ParseStandardWebhooksKey(id, encoded)
	if err != nil {
		t.Fatal(err)
	}
	return k, []string{encoded, strings.TrimPrefix(encoded, "whsec_")}
}

func swVerifier(t *testing.T, keys ...signature.StandardWebhooksKey) signature.Verifier {
	t.Helper()
	v, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "orders", Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func swSigner(t *testing.T, keys ...signature.StandardWebhooksKey) signature.Signer {
	t.Helper()
	s, err := signature.NewStandardWebhooksSigner(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStandardWebhooksSecretRotationWithDeliveriesInFlight follows the
// rotation Standard Webhooks describes, receivers first: the receiver
// accepts the old and the new secret, the sender signs with both and then
// with the new alone, the receiver drops the old one. Deliveries first
// attempted under the old secret, one refused with a 503 and one whose
// Ack was lost after the receiver committed, are retried under the new:
// the first is accepted, the second answered from the inbox as the
// duplicate it is (the dedupe namespace is the sender, not its key). Once
// the old secret is dropped a sender still signing with it is refused
// with signature_rejected, the receiver's signature_mismatch beside it.
func TestStandardWebhooksSecretRotationWithDeliveriesInFlight(t *testing.T) {
	rotationEngines(t, func(t *testing.T, postgres bool) {
		old, oldSecrets := standardWebhooksKey(t, "2026-01")
		next, nextSecrets := standardWebhooksKey(t, "2026-12")
		r := newRotationRig(t, postgres, store.Config{}, store.Config{}, swVerifier(t, old))

		// Under the old secret: one delivery refused with a 503, one whose
		// Ack is lost after the receiver committed.
		refused, lost := r.enqueue(t, "n-refused", "acct"), r.enqueue(t, "n-lost", "acct")
		r.fault("n-refused", couriertest.Fault{Status: 503})
		r.fault("n-lost", couriertest.Fault{DropAfterCommit: true})
		r.work(t, r.worker(t, map[string]signature.Signer{"acct": swSigner(t, old)}))
		for _, id := range []int64{refused, lost} {
			if d := r.delivery(t, id); d.Status != courier.StatusRetryWait || d.Attempts != 1 {
				t.Fatalf("delivery %s after its first attempt: %s after %d attempts, want retry_wait after 1", d.NotificationID, d.Status, d.Attempts)
			}
		}
		// Enqueued before the switch, attempted after it.
		pending := r.enqueue(t, "n-pending", "acct")

		// The receiver accepts both; the sender signs with both, new first,
		// then with the new alone.
		r.receiverTrusts(swVerifier(t, old, next))
		r.work(t, r.worker(t, map[string]signature.Signer{"acct": swSigner(t, next, old)}))
		both := r.enqueue(t, "n-both", "acct")
		r.drain(t, r.worker(t, map[string]signature.Signer{"acct": swSigner(t, next)}))
		r.wantAppliedOnce(t, refused, lost, pending, both)
		if got := r.verifiedBy("n-lost"); len(got) != 2 || got[0] != "2026-01" || got[1] != "2026-12" {
			t.Fatalf("n-lost verified by %v, want the old key and then the new", got)
		}

		// The old secret dropped: what it alone signs is refused, with a
		// stable code on both ends; the new one is accepted.
		r.receiverTrusts(swVerifier(t, next))
		stale := r.enqueue(t, "n-stale", "acct")
		r.drain(t, r.worker(t, map[string]signature.Signer{"acct": swSigner(t, old)}))
		if d := r.delivery(t, stale); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeSignatureRejected ||
			d.LastHTTPStatus != 401 || d.LastRemoteCode != courier.CodeSignatureMismatch {
			t.Fatalf("signed with the dropped secret: %s/%s status %d remote %q, want failed/%s 401 remote %s",
				d.Status, d.LastErrorCode, d.LastHTTPStatus, d.LastRemoteCode, courier.CodeSignatureRejected, courier.CodeSignatureMismatch)
		}
		if n := r.applied(t, "n-stale"); n != 0 {
			t.Fatalf("n-stale applied %d times, want never", n)
		}
		fresh := r.enqueue(t, "n-fresh", "acct")
		r.drain(t, r.worker(t, map[string]signature.Signer{"acct": swSigner(t, next)}))
		if d := r.delivery(t, fresh); d.Status != courier.StatusSucceeded {
			t.Fatalf("signed with the new secret after the old was dropped: %s/%s", d.Status, d.LastErrorCode)
		}
		r.wantNoSecrets(t, []int64{refused, lost, pending, both, stale, fresh}, append(oldSecrets, nextSecrets...)...)
	})
}

// ed25519JWK returns a private Ed25519 JWK under kid, built from key
// bytes this test knows, with the base64url of its private part for the
// leak checks.
func ed25519JWK(t *testing.T, kid string) (signature.JWK, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d := base64.RawURLEncoding.EncodeToString(priv.Seed())
	k, err := signature.ParseJWK([]byte(`{"kty":"OKP","crv":"Ed25519","kid":"` + kid + `","use":"sig","adcp_use":"request-signing","key_ops":["sign"],` +
		`"x":"` + base64.RawURLEncoding.EncodeToString(pub) + `","d":"` + d + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	return k, d
}

// TestRFC9421KeyRotationWithDeliveriesInFlight follows the AdCP rotation
// by keyid: the sender publishes its new key beside the old one (the
// receiver looks keys up in the published set as it changes), signs with
// the new, and retires the old from the set. Deliveries first attempted
// under the old key, one refused with a 503 and one whose Ack was lost
// after the receiver committed, are retried under the new key, each
// attempt with a fresh nonce through the inbox's shared replay cache: the
// first is accepted, the second answered as the duplicate it is. Once the
// old key is retired, what it signs is refused with
// webhook_signature_key_unknown.
func TestRFC9421KeyRotationWithDeliveriesInFlight(t *testing.T) {
	rotationEngines(t, func(t *testing.T, postgres bool) {
		old, oldD := ed25519JWK(t, "2026-01")
		next, err := signature.GenerateJWK("2026-12", signature.AlgECDSAP256SHA256)
		if err != nil {
			t.Fatal(err)
		}
		var published atomic.Pointer[[]signature.JWK]
		publish := func(keys ...signature.JWK) {
			var set []signature.JWK
			for _, k := range keys {
				set = append(set, k.Public())
			}
			published.Store(&set)
		}
		publish(old)
		r := newRotationRig(t, postgres, store.Config{}, store.Config{}, nil)
		v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
			Sender: "seller", Replay: r.inbox.Replay, Origin: r.srv.URL,
			LookupKey: func(_ context.Context, kid string) (signature.JWK, bool, error) {
				for _, k := range *published.Load() {
					if k.KeyID() == kid {
						return k, true, nil
					}
				}
				return signature.JWK{}, false, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		r.receiverTrusts(v)
		signer := func(k signature.JWK) map[string]signature.Signer {
			s, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: k})
			if err != nil {
				t.Fatal(err)
			}
			return map[string]signature.Signer{"acct": s}
		}

		refused, lost := r.enqueue(t, "n-refused", "acct"), r.enqueue(t, "n-lost", "acct")
		r.fault("n-refused", couriertest.Fault{Status: 503})
		r.fault("n-lost", couriertest.Fault{DropAfterCommit: true})
		r.work(t, r.worker(t, signer(old)))
		for _, id := range []int64{refused, lost} {
			if d := r.delivery(t, id); d.Status != courier.StatusRetryWait || d.Attempts != 1 {
				t.Fatalf("delivery %s after its first attempt: %s after %d attempts, want retry_wait after 1", d.NotificationID, d.Status, d.Attempts)
			}
		}
		// Enqueued before the switch, attempted after it.
		pending := r.enqueue(t, "n-pending", "acct")

		// Both keys published, the sender switched to the new one.
		publish(old, next)
		r.drain(t, r.worker(t, signer(next)))
		r.wantAppliedOnce(t, refused, lost, pending)
		if got := r.verifiedBy("n-lost"); len(got) != 2 || got[0] != "2026-01" || got[1] != "2026-12" {
			t.Fatalf("n-lost verified by %v, want the old key and then the new", got)
		}
		if got := r.verifiedBy("n-refused"); len(got) != 1 || got[0] != "2026-12" {
			t.Fatalf("n-refused verified by %v, want the new key", got)
		}
		// A sender process not yet switched still signs with the old key,
		// and is accepted while both are published.
		overlap := r.enqueue(t, "n-overlap", "acct")
		r.drain(t, r.worker(t, signer(old)))
		if d := r.delivery(t, overlap); d.Status != courier.StatusSucceeded {
			t.Fatalf("signed with the old key while both are published: %s/%s", d.Status, d.LastErrorCode)
		}

		// The old key retired from the set.
		publish(next)
		stale := r.enqueue(t, "n-stale", "acct")
		r.drain(t, r.worker(t, signer(old)))
		if d := r.delivery(t, stale); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeSignatureRejected ||
			d.LastHTTPStatus != 401 || d.LastRemoteCode != courier.CodeWebhookKeyUnknown {
			t.Fatalf("signed with the retired key: %s/%s status %d remote %q, want failed/%s 401 remote %s",
				d.Status, d.LastErrorCode, d.LastHTTPStatus, d.LastRemoteCode, courier.CodeSignatureRejected, courier.CodeWebhookKeyUnknown)
		}
		fresh := r.enqueue(t, "n-fresh", "acct")
		r.drain(t, r.worker(t, signer(next)))
		if d := r.delivery(t, fresh); d.Status != courier.StatusSucceeded {
			t.Fatalf("signed with the new key after the old was retired: %s/%s", d.Status, d.LastErrorCode)
		}
		r.wantNoSecrets(t, []int64{refused, lost, pending, overlap, stale, fresh}, oldD)
	})
}

// payloadKeyOf returns a fresh payload key under id, with its bytes in hex
// and base64, for the leak checks.
func payloadKeyOf(t *testing.T, id string) (store.PayloadKey, []string) {
	t.Helper()
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	k, err := store.NewPayloadKey(id, secret)
	if err != nil {
		t.Fatal(err)
	}
	return k, []string{hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret)}
}

// TestPayloadKeyRotationWithDeliveriesInFlight follows the rotation the
// store documents for Encryption, on the sender's outbox and the
// receiver's inbox at once: every process learns the new key, then makes
// it Current; rows kept under the old one are still delivered, and
// redeliveries still answered from records kept under it; Store.KeysInUse
// says when the old key keeps nothing more, once Prune has taken the
// finished rows, and it then goes without losing anything. Retired too
// early, a key a pending delivery still needs quarantines it with
// payload_unreadable (nothing sent), and a redelivery to a record kept
// under it is answered 503 payload_unreadable (nothing processed again);
// with the key back, the delivery is redriven and the redelivery answered
// from its record.
func TestPayloadKeyRotationWithDeliveriesInFlight(t *testing.T) {
	rotationEngines(t, func(t *testing.T, postgres bool) {
		clock := &offsetClock{}
		var secrets []string
		key := func(id string) store.PayloadKey {
			k, s := payloadKeyOf(t, id)
			secrets = append(secrets, s...)
			return k
		}
		k1, k2, i1, i2 := key("k1"), key("k2"), key("i1"), key("i2")
		under := func(current string, keys ...store.PayloadKey) store.Config {
			return store.Config{Now: clock.Now, Encryption: &store.Encryption{Current: current, Keys: keys}}
		}
		sw, swSecrets := standardWebhooksKey(t, "sw")
		secrets = append(secrets, swSecrets...)
		v, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: "orders", Keys: []signature.StandardWebhooksKey{sw}, Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		r := newRotationRig(t, postgres, under("k1", k1), under("i1", i1), v)
		r.now = clock.Now
		signers := map[string]signature.Signer{"acct": swSigner(t, sw)}
		sealedUnder := func(id int64, want string) {
			t.Helper()
			if d := r.delivery(t, id); d.PayloadKeyID != want {
				t.Fatalf("delivery %s is sealed under %q, want %q", d.NotificationID, d.PayloadKeyID, want)
			}
		}
		keysInUse := func(s *store.Store, want map[string]int) {
			t.Helper()
			got, err := s.KeysInUse(r.ctx)
			if err != nil || !maps.Equal(got, want) {
				t.Fatalf("KeysInUse = %v, %v; want %v", got, err, want)
			}
		}
		// Under k1 and i1: one delivery refused with a 503, one whose Ack
		// is lost after the receiver kept its record.
		refused, lost := r.enqueue(t, "n-refused", "acct"), r.enqueue(t, "n-lost", "acct")
		r.fault("n-refused", couriertest.Fault{Status: 503})
		r.fault("n-lost", couriertest.Fault{DropAfterCommit: true})
		r.work(t, r.worker(t, signers))
		pending := r.enqueue(t, "n-pending", "acct")

		// Every process learns k2 and i2 and makes them Current.
		r.outbox = reopen(t, r.outbox, under("k2", k1, k2))
		inbox := reopen(t, r.inbox, under("i2", i1, i2))
		r.serveFrom(t, inbox)
		fresh := r.enqueue(t, "n-fresh", "acct")
		sealedUnder(refused, "k1")
		sealedUnder(pending, "k1")
		sealedUnder(fresh, "k2")
		r.drain(t, r.worker(t, signers))
		r.wantAppliedOnce(t, refused, lost, pending, fresh)
		keysInUse(r.outbox, map[string]int{"k1": 3, "k2": 1})
		keysInUse(inbox, map[string]int{"i1": 1, "i2": 3})

		// k1 retired too early, from a process behind on the rotation
		// that sealed a delivery under it meanwhile.
		behind := reopen(t, r.outbox, under("k1", k1))
		r.outbox = behind
		late := r.enqueue(t, "n-late", "acct")
		r.outbox = reopen(t, behind, under("k2", k2))
		r.drain(t, r.worker(t, signers))
		if d := r.delivery(t, late); d.Status != courier.StatusQuarantined || d.LastErrorCode != courier.CodePayloadUnreadable {
			t.Fatalf("a delivery whose key was retired is %s/%s, want quarantined/%s", d.Status, d.LastErrorCode, courier.CodePayloadUnreadable)
		}
		if n := r.applied(t, "n-late"); n != 0 {
			t.Fatalf("n-late applied %d times with its key gone, want never", n)
		}
		// Health says why rows are quarantined: their key, not an
		// alteration.
		if h, err := r.outbox.Outbox.Health(r.ctx); err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodePayloadUnreadable {
			t.Fatalf("Health with its key gone = %s/%s, %v; want blocked/%s", h.Status, h.Code, err, courier.CodePayloadUnreadable)
		}
		// i1 retired too early: a redelivery to the record kept under it
		// is neither processed again nor taken for a collision.
		redeliver := func() (int, []byte) {
			t.Helper()
			body := []byte(`{"notification_id":"n-lost"}`)
			resp, err := r.srv.Client().Do(couriertest.NewRequest(r.srv.URL+"/hooks", "n-lost", body, signers["acct"]))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			r.logs.Write(out) // checked for secrets with the logs
			return resp.StatusCode, out
		}
		r.serveFrom(t, reopen(t, inbox, under("i2", i2)))
		if status, out := redeliver(); status != 503 || !bytes.Contains(out, []byte(`"code":"`+courier.CodePayloadUnreadable+`"`)) {
			t.Fatalf("a redelivery to a record whose key was retired: %d %s, want 503 %s", status, out, courier.CodePayloadUnreadable)
		}
		if logs := r.logs.String(); !strings.Contains(logs, "code="+string(courier.CodePayloadUnreadable)) {
			t.Fatalf("the receiver logged no line with code %s:\n%s", courier.CodePayloadUnreadable, logs)
		}
		if n := r.applied(t, "n-lost"); n != 1 {
			t.Fatalf("n-lost applied %d times, want once", n)
		}

		// The keys put back: the quarantined delivery is redriven and
		// sent, the redelivery answered from its record.
		r.outbox = reopen(t, r.outbox, under("k2", k1, k2))
		r.serveFrom(t, inbox)
		if n, err := r.outbox.Outbox.Redrive(r.ctx, store.RedriveParams{}); err != nil || n != 1 {
			t.Fatalf("Redrive = %d, %v; want the quarantined delivery", n, err)
		}
		r.drain(t, r.worker(t, signers))
		r.wantAppliedOnce(t, late)
		if status, out := redeliver(); status != 200 || ack.New("n-lost", []byte(`{"notification_id":"n-lost"}`)).Verify(out) != nil {
			t.Fatalf("a redelivery with its record's key back: %d %s, want 200 and its Ack", status, out)
		}

		// Retired as documented: once Prune has taken what the old keys
		// kept, KeysInUse lists them no more, and they go.
		clock.Advance(48 * time.Hour)
		if _, err := r.outbox.Outbox.Prune(r.ctx, store.PruneParams{OlderThan: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := inbox.Inbox.Prune(r.ctx, store.PruneParams{OlderThan: 24 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		keysInUse(r.outbox, map[string]int{})
		keysInUse(inbox, map[string]int{})
		r.outbox = reopen(t, r.outbox, under("k2", k2))
		r.serveFrom(t, reopen(t, inbox, under("i2", i2)))
		after := r.enqueue(t, "n-after", "acct")
		r.drain(t, r.worker(t, signers))
		r.wantAppliedOnce(t, after)
		r.wantNoSecrets(t, []int64{after}, secrets...)
	})
}

// TestSharedSecretRotationWithDeliveriesInFlight follows the rotation of
// the AdCP legacy schemes' shared secrets (AdCP HMAC and Bearer): the
// receiver accepts the old and the new secret, the sender switches to the
// new one, the receiver drops the old. A delivery first attempted under
// the old secret whose Ack was lost is retried under the new and answered
// as the duplicate it is; one refused with a 503 is accepted. Once the
// old secret is dropped, what it signs is refused with
// signature_mismatch.
func TestSharedSecretRotationWithDeliveriesInFlight(t *testing.T) {
	schemes := []struct {
		name     string
		signer   func(signature.Secret) (signature.Signer, error)
		verifier func(...signature.Secret) (signature.Verifier, error)
	}{
		{"adcp-hmac", signature.NewAdCPHMACSigner, func(s ...signature.Secret) (signature.Verifier, error) {
			return signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{Sender: "agent", Secrets: s})
		}},
		{"bearer", signature.NewBearerSigner, func(s ...signature.Secret) (signature.Verifier, error) {
			return signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: "agent", Tokens: s})
		}},
	}
	for _, scheme := range schemes {
		t.Run(scheme.name, func(t *testing.T) {
			rotationEngines(t, func(t *testing.T, postgres bool) {
				secret := func(id string) (signature.Secret, string) {
					raw := make([]byte, 24)
					if _, err := rand.Read(raw); err != nil {
						t.Fatal(err)
					}
					value := base64.RawURLEncoding.EncodeToString(raw)
					s, err := signature.ParseSecret(id, value)
					if err != nil {
						t.Fatal(err)
					}
					return s, value
				}
				old, oldValue := secret("old")
				next, nextValue := secret("new")
				verifier := func(s ...signature.Secret) signature.Verifier {
					v, err := scheme.verifier(s...)
					if err != nil {
						t.Fatal(err)
					}
					return v
				}
				signer := func(s signature.Secret) map[string]signature.Signer {
					sg, err := scheme.signer(s)
					if err != nil {
						t.Fatal(err)
					}
					return map[string]signature.Signer{"acct": sg}
				}
				r := newRotationRig(t, postgres, store.Config{}, store.Config{}, verifier(old))

				refused, lost := r.enqueue(t, "n-refused", "acct"), r.enqueue(t, "n-lost", "acct")
				r.fault("n-refused", couriertest.Fault{Status: 503})
				r.fault("n-lost", couriertest.Fault{DropAfterCommit: true})
				r.work(t, r.worker(t, signer(old)))
				pending := r.enqueue(t, "n-pending", "acct")

				r.receiverTrusts(verifier(old, next))
				r.drain(t, r.worker(t, signer(next)))
				r.wantAppliedOnce(t, refused, lost, pending)
				if got := r.verifiedBy("n-lost"); len(got) != 2 || got[0] != "old" || got[1] != "new" {
					t.Fatalf("n-lost verified by %v, want the old secret and then the new", got)
				}

				r.receiverTrusts(verifier(next))
				stale := r.enqueue(t, "n-stale", "acct")
				r.drain(t, r.worker(t, signer(old)))
				if d := r.delivery(t, stale); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeSignatureRejected ||
					d.LastRemoteCode != courier.CodeSignatureMismatch {
					t.Fatalf("signed with the dropped secret: %s/%s remote %q, want failed/%s remote %s",
						d.Status, d.LastErrorCode, d.LastRemoteCode, courier.CodeSignatureRejected, courier.CodeSignatureMismatch)
				}
				r.wantNoSecrets(t, []int64{refused, lost, pending, stale}, oldValue, nextValue)
			})
		})
	}
}

package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/adcpvectors"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// signingTestdata holds AdCP's RFC 9421 webhook-signing vectors (Apache-2.0,
// with their LICENSE), which package signature's tests check the verifier
// against.
const signingTestdata = "../signature/testdata/adcp/webhook-signing/"

// signingVector is one of the vectors of signingTestdata.
type signingVector = adcpvectors.Vector

func loadSigningVectors(t *testing.T, kind string, want int) []signingVector {
	t.Helper()
	return adcpvectors.Load(t, signingTestdata, kind, want)
}

// signingKeys returns keys.json's public keys by kid.
func signingKeys(t *testing.T) map[string]signature.JWK {
	t.Helper()
	b, err := os.ReadFile(signingTestdata + "keys.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Keys []json.RawMessage }
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	keys := map[string]signature.JWK{}
	for _, raw := range file.Keys {
		k, err := signature.ParseJWK(raw)
		if err != nil {
			t.Fatal(err)
		}
		keys[k.KeyID()] = k
	}
	return keys
}

// vectorReceiver is a Reporting receiver set up as a vector asks: its
// keys, its revocation state, and a store and verifier whose clocks read
// the vector's reference time, behind a real HTTP server.
type vectorReceiver struct {
	store  *store.Store
	server *httptest.Server
	calls  atomic.Int32
}

// postgresServer returns the admin URL of the PostgreSQL server a test's
// databases are made on: COURIER_PG_URL's, or the throwaway one the
// package's tests share (pgtest.Server), started by the first to ask and
// stopped by TestMain. Without either t is skipped, or fails if
// COURIER_PG_REQUIRE is set.
func postgresServer(t *testing.T) string {
	t.Helper()
	return pgtest.Server(t)
}

// newVectorReceiver sets up the receiver vec asks for, on SQLite, or on a
// fresh database of the PostgreSQL server at pgAdmin when that is set.
func newVectorReceiver(t *testing.T, vec signingVector, keys map[string]signature.JWK, pgAdmin string) *vectorReceiver {
	t.Helper()
	now := func() time.Time { return time.Unix(vec.ReferenceNow, 0) }
	vr := &vectorReceiver{}
	cfg := store.Config{Now: now}
	if pgAdmin != "" {
		vr.store = openPostgresStore(t, cfg)
	} else {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		vr.store = s
	}
	var jwks []signature.JWK
	for _, kid := range vec.JWKSRef {
		k, ok := keys[kid]
		if override, found := vec.JWKSOverride[kid]; found {
			var err error
			if k, err = signature.ParseJWK(override); err != nil {
				t.Fatal(err)
			}
			ok = true
		}
		if !ok {
			t.Fatalf("jwks_ref names unknown kid %q", kid)
		}
		jwks = append(jwks, k)
	}
	var revoked func(context.Context, string) (bool, error)
	if len(vec.State.RevokedKids) > 0 || vec.State.RevocationStaleBy > 0 {
		revoked = func(_ context.Context, kid string) (bool, error) {
			if vec.State.RevocationStaleBy > 0 {
				return false, fmt.Errorf("revocation list %ds old: %w", vec.State.RevocationStaleBy, courier.CodeWebhookRevocationStale)
			}
			return slices.Contains(vec.State.RevokedKids, kid), nil
		}
	}
	scheme, rest, _ := strings.Cut(vec.Request.URL, "://")
	host, _, _ := strings.Cut(rest, "/")
	host, _, _ = strings.Cut(host, "?")
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender: reportingSender, Keys: jwks, Now: now, Replay: vr.store.Replay, Revoked: revoked,
		Origin: scheme + "://" + host, // the receiver as the vector's sender addressed it
	})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := handler.NewReporting(handler.ReportingConfig{Store: vr.store, Verifier: verifier},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
			vr.calls.Add(1)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	vr.server = httptest.NewServer(rcv)
	t.Cleanup(vr.server.Close)
	return vr
}

// send delivers the vector's request, its path and query as they are,
// to the receiver.
func (vr *vectorReceiver) send(t *testing.T, vec signingVector) (*http.Response, []byte) {
	t.Helper()
	_, rest, _ := strings.Cut(vec.Request.URL, "://")
	pathQuery := "/"
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		pathQuery = rest[i:]
	}
	req, err := http.NewRequestWithContext(t.Context(), vec.Request.Method, vr.server.URL+pathQuery, bytes.NewReader([]byte(vec.Request.Body)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range vec.Request.Headers {
		req.Header.Set(k, v)
	}
	resp, err := vr.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp, out.Bytes()
}

// stored counts the receiver's Inbox records and remembered nonces.
func (vr *vectorReceiver) stored(t *testing.T) (inbox, nonces int) {
	t.Helper()
	return rows(t, vr.store, "courier_inbox"), rows(t, vr.store, "courier_replay")
}

// TestReportingSigningVectors replays AdCP's webhook-signing vectors
// against the Reporting receiver, on both engines. A negative vector is
// refused 401 with its webhook_signature_* code, in the problem and in
// WWW-Authenticate, before anything is parsed, stored or run: no Inbox
// record, no nonce. Two are refused so that the sender retries, with
// the code in the problem alone: 018 (rate_abuse) 429 with Retry-After,
// 019 (revocation_stale) 503 without. A positive one passes the signature and is judged as
// an envelope next: the vectors' bodies lack members the envelope
// requires (task_type, timestamp, and in 007 idempotency_key), so it is
// refused 400 validation_failed, which is no signature error, with its
// nonce remembered: the same signed request again is a replay. For vector
// 018 the key's count of live nonces in the store is raised to its cap
// (1,000,000) first.
func TestReportingSigningVectors(t *testing.T) {
	t.Parallel()
	keys := signingKeys(t)
	positive, negative := loadSigningVectors(t, "positive", 8), loadSigningVectors(t, "negative", 21)
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			pgAdmin := ""
			if engine.postgres {
				pgAdmin = postgresServer(t)
			}
			for _, vec := range positive {
				t.Run(vec.File, func(t *testing.T) {
					if !vec.ExpectedOutcome.Success {
						t.Fatal("a positive vector that expects no success")
					}
					vr := newVectorReceiver(t, vec, keys, pgAdmin)
					resp, out := vr.send(t, vec)
					p := wantProblem(t, resp, out, http.StatusBadRequest, courier.CodeValidation)
					var fields []string
					for _, f := range p.Errors {
						fields = append(fields, f.Field)
					}
					want := []string{"task_type", "timestamp"}
					if strings.HasPrefix(vec.File, "007-") {
						want = []string{"idempotency_key", "task_type", "timestamp"}
					}
					if !slices.Equal(fields, want) {
						t.Fatalf("refused for %v, want %v (%s)", fields, want, out)
					}
					if inbox, nonces := vr.stored(t); inbox != 0 || nonces != 1 || vr.calls.Load() != 0 {
						t.Fatalf("%d inbox records, %d nonces, %d calls; want the nonce alone", inbox, nonces, vr.calls.Load())
					}
					resp, out = vr.send(t, vec)
					wantProblem(t, resp, out, http.StatusUnauthorized, courier.CodeWebhookReplayed)
				})
			}
			for _, vec := range negative {
				t.Run(vec.File, func(t *testing.T) {
					code := vec.ExpectedOutcome.ErrorCode
					if vec.ExpectedOutcome.Success || !strings.HasPrefix(string(code), "webhook_signature_") {
						t.Fatalf("a negative vector that expects %+v", vec.ExpectedOutcome)
					}
					vr := newVectorReceiver(t, vec, keys, pgAdmin)
					wantNonces := 0
					if kid := vec.State.CapFilledFor; kid != "" {
						// The harness state: the key holds its cap of live
						// nonces in the store. One request of its own, with a
						// fresh nonce, records the first; the count is raised
						// to the cap (1,000,000) as if the rest had come too.
						resp, out := vr.send(t, freshlySigned(t, vec, kid))
						wantProblem(t, resp, out, http.StatusBadRequest, courier.CodeValidation)
						if _, err := vr.store.DB().ExecContext(t.Context(), "UPDATE courier_replay_counts SET n = n + 999999"); err != nil {
							t.Fatal(err)
						}
						wantNonces = 1
					}
					if len(vec.State.ReplayCacheEntries) > 0 {
						// The harness state: the pair was seen. The signature is
						// otherwise valid, so the request itself records it.
						resp, out := vr.send(t, vec)
						wantProblem(t, resp, out, http.StatusBadRequest, courier.CodeValidation)
						wantNonces = 1
					}
					// The vectors fix the code, not the status: the two
					// refusals that say the receiver cannot accept for now
					// are answered for the sender to retry.
					status, auth, wait := http.StatusUnauthorized, `Signature error="`+string(code)+`"`, ""
					switch code {
					case courier.CodeWebhookRateAbuse:
						status, auth, wait = http.StatusTooManyRequests, "", "421"
					case courier.CodeWebhookRevocationStale:
						status, auth = http.StatusServiceUnavailable, ""
					}
					resp, out := vr.send(t, vec)
					wantProblem(t, resp, out, status, code)
					if got := resp.Header.Get("WWW-Authenticate"); got != auth {
						t.Fatalf("WWW-Authenticate %q, want %q", got, auth)
					}
					if got := resp.Header.Get("Retry-After"); got != wait {
						t.Fatalf("Retry-After %q, want %q", got, wait)
					}
					if inbox, nonces := vr.stored(t); inbox != 0 || nonces != wantNonces || vr.calls.Load() != 0 {
						t.Fatalf("refused request left %d inbox records, %d nonces, %d calls", inbox, nonces, vr.calls.Load())
					}
				})
			}
		})
	}
}

// freshlySigned returns vec with its request signed anew, a fresh nonce
// and all, by keys.json's private key kid at the vector's reference time.
func freshlySigned(t *testing.T, vec signingVector, kid string) signingVector {
	t.Helper()
	b, err := os.ReadFile(signingTestdata + "keys.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Keys []map[string]any }
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	var key signature.JWK
	for _, k := range file.Keys {
		if k["kid"] == kid {
			k["d"] = k["_private_d_for_test_only"]
			raw, _ := json.Marshal(k)
			if key, err = signature.ParseJWK(raw); err != nil {
				t.Fatal(err)
			}
		}
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatalf("key %q: %v", kid, err)
	}
	req, err := http.NewRequest(vec.Request.Method, vec.Request.URL, strings.NewReader(vec.Request.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", vec.Request.Headers["Content-Type"])
	if err := signer.Sign(req, signature.Message{Body: []byte(vec.Request.Body), Time: time.Unix(vec.ReferenceNow, 0)}); err != nil {
		t.Fatal(err)
	}
	signed := vec
	signed.Request.Headers = map[string]string{}
	for k := range req.Header {
		signed.Request.Headers[k] = req.Header.Get(k)
	}
	if signed.Request.Headers["Signature-Input"] == vec.Request.Headers["Signature-Input"] {
		t.Fatal("signed anew with the vector's own nonce")
	}
	return signed
}

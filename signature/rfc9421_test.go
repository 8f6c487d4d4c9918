package signature

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/adcpvectors"
)

const webhookSigningDir = "testdata/adcp/webhook-signing"

// webhookVector is one of the vectors of webhookSigningDir.
type webhookVector = adcpvectors.Vector

func loadWebhookVectors(t *testing.T, kind string, want int) []webhookVector {
	t.Helper()
	return adcpvectors.Load(t, webhookSigningDir, kind, want)
}

// webhookKeys returns keys.json's entries by kid: the public JWK as
// published, and the private JWK built from _private_d_for_test_only.
func webhookKeys(t *testing.T) (public, private map[string]JWK) {
	t.Helper()
	var file struct {
		Keys []map[string]any `json:"keys"`
	}
	loadJSON(t, filepath.Join(webhookSigningDir, "keys.json"), &file)
	public, private = map[string]JWK{}, map[string]JWK{}
	for _, k := range file.Keys {
		raw, _ := json.Marshal(k)
		pub, err := ParseJWK(raw)
		if err != nil {
			t.Fatalf("ParseJWK: %v", err)
		}
		k["d"] = k["_private_d_for_test_only"]
		raw, _ = json.Marshal(k)
		priv, err := ParseJWK(raw)
		if err != nil {
			t.Fatalf("ParseJWK with d: %v", err)
		}
		public[pub.KeyID()], private[pub.KeyID()] = pub, priv
	}
	if len(public) != 5 {
		t.Fatalf("keys.json: %d keys, want 5", len(public))
	}
	return public, private
}

// The two ways a verifier learns the origin a request was signed for.
var originModes = []string{"origin", "request host"}

// vectorVerifier builds the verifier a vector asks for: its JWKS subset, its
// clock, and its harness state. In mode "origin" it is configured with the
// origin of the vector's URL; in mode "request host" it trusts the request's
// Host.
func vectorVerifier(t *testing.T, vec webhookVector, public map[string]JWK, mode string) Verifier {
	t.Helper()
	var keys []JWK
	for _, kid := range vec.JWKSRef {
		k, ok := public[kid]
		if override, found := vec.JWKSOverride[kid]; found {
			var err error
			if k, err = ParseJWK(override); err != nil {
				t.Fatalf("jwks_override: %v", err)
			}
			ok = true
		}
		if !ok {
			t.Fatalf("jwks_ref names unknown kid %q", kid)
		}
		keys = append(keys, k)
	}
	now := clockAt(vec.ReferenceNow)
	cache := &memoryReplayCache{Now: now}
	ctx := context.Background()
	const sender = "seller"
	// The verifier records the vector's (keyid, nonce) pairs under the
	// keyid qualified by its Sender.
	for _, e := range vec.State.ReplayCacheEntries {
		if _, err := cache.Remember(ctx, replayKeyID(sender, e.KeyID), e.Nonce, now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if kid := vec.State.CapFilledFor; kid != "" {
		cache.MaxPerKey = 8
		for i := range cache.MaxPerKey {
			if _, err := cache.Remember(ctx, replayKeyID(sender, kid), fmt.Sprintf("fill-%d", i), now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var revoked func(context.Context, string) (bool, error)
	if len(vec.State.RevokedKids) > 0 || vec.State.RevocationStaleBy > 0 {
		// A revocation list refreshed hourly with an hour of grace.
		lastRefresh := vec.ReferenceNow - vec.State.RevocationStaleBy
		revoked = func(_ context.Context, kid string) (bool, error) {
			if vec.ReferenceNow-lastRefresh > 2*3600 {
				return false, fmt.Errorf("revocation list from %d: %w", lastRefresh, courier.CodeWebhookRevocationStale)
			}
			return slicesContains(vec.State.RevokedKids, kid), nil
		}
	}
	cfg := RFC9421VerifierConfig{Sender: sender, Keys: keys, Now: now, Replay: cache, Revoked: revoked}
	if mode == "origin" {
		scheme, rest, _ := strings.Cut(vec.Request.URL, "://")
		host, _, _ := strings.Cut(rest, "/")
		host, _, _ = strings.Cut(host, "?")
		cfg.Origin = scheme + "://" + host
	} else {
		cfg.TrustRequestHost = true
	}
	v, err := NewRFC9421Verifier(cfg)
	if err != nil {
		t.Fatalf("NewRFC9421Verifier: %v", err)
	}
	return v
}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// vectorRequests returns the vector's request twice: as built in process
// (an absolute URL), and as a server parses it off the wire over TLS.
func vectorRequests(t *testing.T, vec webhookVector) map[string]*http.Request {
	t.Helper()
	client := newRequest(t, vec.Request.Method, vec.Request.URL, nil, []byte(vec.Request.Body))
	for k, v := range vec.Request.Headers {
		client.Header.Set(k, v)
	}

	rest := strings.SplitN(vec.Request.URL, "://", 2)[1]
	host, pathQuery := rest, "/"
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		host, pathQuery = rest[:i], rest[i:]
	}
	var raw strings.Builder
	fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: %s\r\n", vec.Request.Method, pathQuery, host)
	for k, v := range vec.Request.Headers {
		fmt.Fprintf(&raw, "%s: %s\r\n", k, v)
	}
	fmt.Fprintf(&raw, "Content-Length: %d\r\n\r\n%s", len(vec.Request.Body), vec.Request.Body)
	server, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw.String())))
	if err != nil {
		t.Fatalf("ReadRequest: %v", err)
	}
	server.TLS = &tls.ConnectionState{}
	return map[string]*http.Request{"client": client, "server": server}
}

func TestRFC9421PositiveVectors(t *testing.T) {
	t.Parallel()
	public, private := webhookKeys(t)
	for _, vec := range loadWebhookVectors(t, "positive", 8) {
		t.Run(vec.File, func(t *testing.T) {
			t.Parallel()
			if !vec.ExpectedOutcome.Success {
				t.Fatal("positive vector does not expect success")
			}
			for form, req := range vectorRequests(t, vec) {
				for _, mode := range originModes {
					name := form + ", " + mode
					v := vectorVerifier(t, vec, public, mode)
					checkPositiveVector(t, name, vec, v, req, private)
				}
			}
		})
	}
}

// checkPositiveVector verifies a positive vector's request with v: the
// signature base is the vector's, the request verifies once, and a second
// delivery is a replay.
func checkPositiveVector(t *testing.T, name string, vec webhookVector, verifier Verifier, req *http.Request, private map[string]JWK) {
	v := verifier.(*rfc9421Verifier)
	t.Helper()
	in, err := parseRFC9421Headers(req.Header)
	if err != nil {
		t.Fatalf("%s: parse: %v", name, err)
	}
	target, authority, err := v.receivedTarget(req)
	if err != nil {
		t.Fatalf("%s: target: %v", name, err)
	}
	base, err := signatureBase(in.components, in.sigParams, baseRequest{method: req.Method, target: target, authority: authority, header: req.Header})
	if err != nil {
		t.Fatalf("%s: base: %v", name, err)
	}
	if base != vec.ExpectedSignatureBase {
		t.Errorf("%s: signature base\n%s\nwant\n%s", name, base, vec.ExpectedSignatureBase)
	}

	p, err := v.Verify(context.Background(), req, []byte(vec.Request.Body))
	if err != nil {
		t.Fatalf("%s: Verify: %v", name, err)
	}
	if p != (Principal{Sender: "seller", KeyID: in.keyID, Scheme: SchemeRFC9421}) {
		t.Errorf("%s: principal = %+v", name, p)
	}
	// Delivered again, the same request is a replay.
	_, err = v.Verify(context.Background(), req, []byte(vec.Request.Body))
	wantReject(t, err, courier.CodeWebhookReplayed)

	// Ed25519 is deterministic: signing the expected base with the
	// published private key reproduces the vector's signature.
	if k := private[in.keyID]; k.m().alg == AlgEd25519 {
		sig, err := k.m().sign([]byte(vec.ExpectedSignatureBase))
		if err != nil || !hmac.Equal(sig, in.signature) {
			t.Errorf("%s: re-signed base differs from the vector's signature", name)
		}
	}
}

func TestRFC9421NegativeVectors(t *testing.T) {
	t.Parallel()
	public, _ := webhookKeys(t)
	for _, vec := range loadWebhookVectors(t, "negative", 21) {
		t.Run(vec.File, func(t *testing.T) {
			t.Parallel()
			if vec.ExpectedOutcome.Success || !strings.HasPrefix(string(vec.ExpectedOutcome.ErrorCode), "webhook_signature_") {
				t.Fatalf("negative vector expects %+v", vec.ExpectedOutcome)
			}
			checkedBase := false
			for form, req := range vectorRequests(t, vec) {
				for _, mode := range originModes {
					v := vectorVerifier(t, vec, public, mode)
					// A vector refused for a missing parameter carries the
					// base signed before the parameter was dropped.
					if vec.ExpectedOutcome.ErrorCode != courier.CodeWebhookParamsIncomplete {
						checkedBase = checkNegativeVectorBase(t, form+", "+mode, vec, v, req) || checkedBase
					}
					_, err := v.Verify(context.Background(), req, []byte(vec.Request.Body))
					if courier.CodeOf(err) != vec.ExpectedOutcome.ErrorCode {
						t.Errorf("%s, %s: Verify = %v, want %s", form, mode, err, vec.ExpectedOutcome.ErrorCode)
					}
					if !errors.Is(err, courier.CodeSignatureInvalid) {
						t.Errorf("%s, %s: %v is not a case of CodeSignatureInvalid", form, mode, err)
					}
				}
			}
			// A vector refused at step 1 (Signature-Input missing, or no
			// structured field) gives no base a verifier can build; one
			// refused at step 2 is skipped above. Every other is checked.
			if !checkedBase && vec.ExpectedOutcome.ErrorCode != courier.CodeWebhookHeaderMalformed &&
				vec.ExpectedOutcome.ErrorCode != courier.CodeWebhookParamsIncomplete {
				t.Errorf("no signature base built for a vector refused at step %s", vec.ExpectedOutcome.ErrorCode)
			}
		})
	}
}

// checkNegativeVectorBase builds the signature base of a negative vector's
// request from its Signature-Input, as a verifier would before refusing
// it, and compares it with the vector's expected_signature_base: the
// refusal must come from the fault the vector plants, not from a base that
// differs. It reports whether the Signature-Input was readable at all.
func checkNegativeVectorBase(t *testing.T, name string, vec webhookVector, verifier Verifier, req *http.Request) bool {
	t.Helper()
	inputs, err := parseSFDictionary(strings.Join(req.Header.Values(headerSignatureInput), ", "))
	if err != nil {
		return false
	}
	input, ok := sfLookup(inputs, rFC9421Label)
	if !ok || !input.isList {
		return false
	}
	var components []string
	for _, it := range input.list {
		components = append(components, it.str)
	}
	var sp strings.Builder
	serializeInnerList(&sp, input.list, input.params)
	target, authority, err := verifier.(*rfc9421Verifier).receivedTarget(req)
	if err != nil {
		t.Fatalf("%s: target: %v", name, err)
	}
	base, err := signatureBase(components, sp.String(), baseRequest{method: req.Method, target: target, authority: authority, header: req.Header})
	if err != nil {
		t.Fatalf("%s: base: %v", name, err)
	}
	if base != vec.ExpectedSignatureBase {
		t.Errorf("%s: signature base\n%s\nwant\n%s", name, base, vec.ExpectedSignatureBase)
	}
	return true
}

func TestRFC9421AppendixB(t *testing.T) {
	t.Parallel()
	var file struct {
		Request struct {
			Method  string            `json:"method"`
			Target  string            `json:"target"`
			Host    string            `json:"host"`
			Headers map[string]string `json:"headers"`
		} `json:"request"`
		Keys struct {
			Ed25519 struct {
				PrivatePEM string `json:"private_pem"`
				PublicPEM  string `json:"public_pem"`
			} `json:"test-key-ed25519"`
			Shared struct {
				Secret string `json:"secret_base64"`
			} `json:"test-shared-secret"`
		} `json:"keys"`
		Vectors []struct {
			ID             string `json:"id"`
			Alg            string `json:"alg"`
			SignatureBase  string `json:"signature_base"`
			SignatureInput string `json:"signature_input"`
			Signature      string `json:"signature"`
		} `json:"vectors"`
	}
	loadJSON(t, "testdata/rfc9421/vectors.json", &file)
	if len(file.Vectors) != 2 {
		t.Fatalf("%d vectors, want B.2.5 and B.2.6", len(file.Vectors))
	}
	h := http.Header{}
	for k, v := range file.Request.Headers {
		h.Set(k, v)
	}
	target, authority, err := canonicalTarget("https://"+file.Request.Host+file.Request.Target, true)
	if err != nil {
		t.Fatal(err)
	}
	r := baseRequest{method: file.Request.Method, target: target, authority: authority, header: h}

	for _, vec := range file.Vectors {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			label, _, _ := strings.Cut(vec.SignatureInput, "=")
			inputs, err := parseSFDictionary(vec.SignatureInput)
			if err != nil {
				t.Fatalf("Signature-Input: %v", err)
			}
			sigs, err := parseSFDictionary(vec.Signature)
			if err != nil {
				t.Fatalf("Signature: %v", err)
			}
			in, _ := sfLookup(inputs, label)
			sm, _ := sfLookup(sigs, label)
			var components []string
			for _, it := range in.list {
				components = append(components, it.str)
			}
			var sp strings.Builder
			serializeInnerList(&sp, in.list, in.params)
			if got := label + "=" + sp.String(); got != vec.SignatureInput {
				t.Errorf("re-serialized Signature-Input = %q, want %q", got, vec.SignatureInput)
			}
			base, err := signatureBase(components, sp.String(), r)
			if err != nil {
				t.Fatalf("signatureBase: %v", err)
			}
			if base != vec.SignatureBase {
				t.Fatalf("signature base\n%s\nwant\n%s", base, vec.SignatureBase)
			}
			sig, err := decodeStdBase64(sm.item.str)
			if err != nil {
				t.Fatal(err)
			}
			switch vec.Alg {
			case "hmac-sha256":
				key, _ := base64.StdEncoding.DecodeString(file.Keys.Shared.Secret)
				mac := hmac.New(sha256.New, key)
				mac.Write([]byte(base))
				if !hmac.Equal(mac.Sum(nil), sig) {
					t.Error("HMAC does not match")
				}
			case "ed25519":
				pub := parsePEMKey(t, file.Keys.Ed25519.PublicPEM, x509.ParsePKIXPublicKey).(ed25519.PublicKey)
				if !ed25519.Verify(pub, []byte(base), sig) {
					t.Error("Ed25519 signature does not verify")
				}
				priv := parsePEMKey(t, file.Keys.Ed25519.PrivatePEM, x509.ParsePKCS8PrivateKey).(ed25519.PrivateKey)
				if !hmac.Equal(ed25519.Sign(priv, []byte(base)), sig) {
					t.Error("re-signed base differs")
				}
			default:
				t.Fatalf("unknown alg %q", vec.Alg)
			}
		})
	}
}

func parsePEMKey(t *testing.T, text string, parse func([]byte) (any, error)) any {
	t.Helper()
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		t.Fatal("no PEM block")
	}
	k, err := parse(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// setupOrigin is the origin newRFC9421Setup's verifier is configured with.
const setupOrigin = "https://buyer.example.com"

// rfc9421Setup is a signer and a verifier of a fresh key of alg.
type rfc9421Setup struct {
	key      JWK
	signer   Signer
	verifier Verifier
	cache    *memoryReplayCache
	now      time.Time
}

// newRFC9421Setup returns a signer and a verifier of a fresh key of alg; the
// verifier's Origin is setupOrigin unless an edit changes its config.
func newRFC9421Setup(t *testing.T, alg string, edits ...func(*RFC9421VerifierConfig)) rfc9421Setup {
	t.Helper()
	key, err := GenerateJWK("k-"+alg, alg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_776_520_800, 0)
	signer, err := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	cache := &memoryReplayCache{Now: clockAt(now.Unix())}
	cfg := RFC9421VerifierConfig{
		Sender: "seller", Keys: []JWK{key.Public()}, Origin: setupOrigin, Now: clockAt(now.Unix()), Replay: cache,
	}
	for _, edit := range edits {
		edit(&cfg)
	}
	verifier, err := NewRFC9421Verifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rfc9421Setup{key: key, signer: signer, verifier: verifier, cache: cache, now: now}
}

// withOrigin configures a setup's verifier with origin.
func withOrigin(origin string) func(*RFC9421VerifierConfig) {
	return func(c *RFC9421VerifierConfig) { c.Origin = origin }
}

// trustingHost configures a setup's verifier to trust the request's Host.
func trustingHost(c *RFC9421VerifierConfig) { c.Origin, c.TrustRequestHost = "", true }

func (s rfc9421Setup) sign(t *testing.T, url string, body []byte) *http.Request {
	t.Helper()
	req := newRequest(t, http.MethodPost, url, map[string][]string{"Content-Type": {"application/json"}}, body)
	if err := s.signer.Sign(req, Message{ID: "n1", Body: body, Time: s.now}); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return req
}

func TestRFC9421RoundTrip(t *testing.T) {
	t.Parallel()
	body := []byte(`{"task_id":"t1","status":"completed"}`)
	tests := []struct {
		url    string
		origin string // the receiver's, as its operator would write it
	}{
		{"https://buyer.example.com/adcp/webhook/op_1", "https://buyer.example.com"},
		{"https://Buyer.Example.com:443/a/./b/../c%7e?z=1&a=2", "https://buyer.example.com"},
		{"https://buyer.example.com:8443/p?", "https://Buyer.Example.com:8443"},
		{"http://127.0.0.1:8080/hook", "http://127.0.0.1:8080"},
		{"https://BÜCHER.example/hook", "https://bücher.example:443"},
		{"https://BÜCHER.example/hook", "https://xn--bcher-kva.example"},
	}
	for _, alg := range []string{AlgEd25519, AlgECDSAP256SHA256} {
		for _, tt := range tests {
			for _, mode := range originModes {
				edit := withOrigin(tt.origin)
				if mode == "request host" {
					edit = trustingHost
				}
				t.Run(alg+" "+tt.url+" "+tt.origin+" "+mode, func(t *testing.T) {
					t.Parallel()
					s := newRFC9421Setup(t, alg, edit)
					checkRoundTrip(t, s, alg, tt.url, body)
				})
			}
		}
	}
}

// checkRoundTrip signs a request to url with s's signer and verifies it, as
// a server reads it off the wire, with s's verifier.
func checkRoundTrip(t *testing.T, s rfc9421Setup, alg, url string, body []byte) {
	t.Helper()
	req := s.sign(t, url, body)
	if got := req.Header.Get(headerSignatureInput); !strings.HasPrefix(got, `sig1=("@method" "@target-uri" "@authority" "content-type" "content-digest");created=1776520800;expires=1776521100;nonce="`) ||
		!strings.HasSuffix(got, `";keyid="k-`+alg+`";alg="`+alg+`";tag="adcp/webhook-signing/v1"`) {
		t.Errorf("Signature-Input = %s", got)
	}
	p, err := s.verifier.Verify(context.Background(), overTheWire(t, req), body)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if p != (Principal{Sender: "seller", KeyID: "k-" + alg, Scheme: SchemeRFC9421}) {
		t.Errorf("principal = %+v", p)
	}
}

// overTheWire returns req as a server reads it: written by net/http's
// client code and parsed back, over TLS when the URL is https.
func overTheWire(t *testing.T, req *http.Request) *http.Request {
	t.Helper()
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := http.ReadRequest(bufio.NewReader(&buf))
	if err != nil {
		t.Fatalf("ReadRequest: %v", err)
	}
	if req.URL.Scheme == "https" {
		got.TLS = &tls.ConnectionState{}
	}
	return got
}

func TestRFC9421SignerNonces(t *testing.T) {
	t.Parallel()
	s := newRFC9421Setup(t, AlgEd25519)
	body := []byte(`{}`)
	seen := map[string]bool{}
	for range 50 {
		req := s.sign(t, "https://buyer.example.com/hook", body)
		in, err := parseRFC9421Headers(req.Header)
		if err != nil {
			t.Fatal(err)
		}
		if seen[in.nonce] || len(in.nonce) != 22 {
			t.Fatalf("nonce %q repeated or not 16 bytes of base64url", in.nonce)
		}
		seen[in.nonce] = true
		if _, err := s.verifier.Verify(context.Background(), req, body); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	if s.cache.Len() != 50 {
		t.Errorf("replay cache holds %d pairs, want 50", s.cache.Len())
	}
	// Message.Time zero, or before 1970: refused for good, as courier's
	// other signers refuse it, and nothing is set on the request.
	for _, at := range []time.Time{{}, time.Unix(-1, 0)} {
		req := newRequest(t, http.MethodPost, "https://buyer.example.com/hook", map[string][]string{"Content-Type": {"application/json"}}, body)
		err := s.signer.Sign(req, Message{Body: body, Time: at})
		if courier.CodeOf(err) != courier.CodeSigningFailed || !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("Sign at %v = %v, want signing_failed for good", at, err)
		}
		if len(req.Header) != 1 {
			t.Errorf("Sign at %v set headers on failure: %v", at, req.Header)
		}
	}
}

func TestRFC9421Rejections(t *testing.T) {
	t.Parallel()
	body := []byte(`{"status":"completed"}`)
	const url = "https://buyer.example.com/hook?x=1"

	tests := []struct {
		name   string
		mutate func(t *testing.T, s *rfc9421Setup, req *http.Request) []byte // returns the body to verify
		code   courier.Code
	}{
		{"body changed", func(_ *testing.T, _ *rfc9421Setup, _ *http.Request) []byte { return []byte(`{"status":"failed"}`) }, courier.CodeWebhookDigestMismatch},
		{"content-digest removed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Del(headerContentDigest)
			return body
		}, courier.CodeWebhookDigestMismatch},
		{"content-digest repeated", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Add(headerContentDigest, r.Header.Get(headerContentDigest))
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"content-type changed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Set("Content-Type", "text/plain")
			return body
		}, courier.CodeWebhookInvalid},
		{"content-type removed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte { r.Header.Del("Content-Type"); return body }, courier.CodeWebhookHeaderMalformed},
		{"method changed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte { r.Method = http.MethodPut; return body }, courier.CodeWebhookInvalid},
		{"query changed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte { r.URL.RawQuery = "x=2"; return body }, courier.CodeWebhookInvalid},
		{"signature removed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Del(headerSignature)
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"signature-input removed", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Del(headerSignatureInput)
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"signature truncated", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Set(headerSignature, "sig1=:AAAA:")
			return body
		}, courier.CodeWebhookInvalid},
		{"sig1 label twice", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Add(headerSignature, "sig1=:AAAA:")
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"only another label", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Set(headerSignatureInput, strings.Replace(r.Header.Get(headerSignatureInput), "sig1=", "sig2=", 1))
			r.Header.Set(headerSignature, strings.Replace(r.Header.Get(headerSignature), "sig1=", "sig2=", 1))
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"component with parameter", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Set(headerSignatureInput, strings.Replace(r.Header.Get(headerSignatureInput), `"content-type"`, `"content-type";sf`, 1))
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"created as string", func(_ *testing.T, _ *rfc9421Setup, r *http.Request) []byte {
			r.Header.Set(headerSignatureInput, strings.Replace(r.Header.Get(headerSignatureInput), "created=1776520800", `created="1776520800"`, 1))
			return body
		}, courier.CodeWebhookHeaderMalformed},
		{"replayed", func(t *testing.T, s *rfc9421Setup, r *http.Request) []byte {
			if _, err := s.verifier.Verify(context.Background(), r, body); err != nil {
				t.Fatal(err)
			}
			return body
		}, courier.CodeWebhookReplayed},
		{"created in the future", func(t *testing.T, s *rfc9421Setup, r *http.Request) []byte {
			*r = *s.signAt(t, s.now.Add(61*time.Second), url, body)
			return body
		}, courier.CodeWebhookWindowInvalid},
		{"expired beyond skew", func(t *testing.T, s *rfc9421Setup, r *http.Request) []byte {
			*r = *s.signAt(t, s.now.Add(-361*time.Second), url, body)
			return body
		}, courier.CodeWebhookWindowInvalid},
	}
	for _, alg := range []string{AlgEd25519, AlgECDSAP256SHA256} {
		for _, tt := range tests {
			t.Run(alg+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				s := newRFC9421Setup(t, alg)
				req := s.sign(t, url, body)
				got := tt.mutate(t, &s, req)
				_, err := s.verifier.Verify(context.Background(), req, got)
				wantReject(t, err, tt.code)
			})
		}
	}
}

// TestRFC9421SignatureBase64Forms: the signature byte sequence is accepted
// in both consistent forms, AdCP's unpadded base64url (what the signer
// writes) and RFC 8941's padded standard base64 (what generic HTTP Message
// Signatures libraries write); a value mixing the alphabets, base64url with
// padding, standard base64 without it, or wrong padding is malformed.
func TestRFC9421SignatureBase64Forms(t *testing.T) {
	t.Parallel()
	body := []byte(`{"status":"completed"}`)
	const url = "https://buyer.example.com/hook"
	setSig := func(r *http.Request, text string) { r.Header.Set(headerSignature, rFC9421Label+"=:"+text+":") }

	// The signer's signature, re-encoded, for both algorithms.
	for _, alg := range []string{AlgEd25519, AlgECDSAP256SHA256} {
		t.Run(alg+" signer", func(t *testing.T) {
			t.Parallel()
			s := newRFC9421Setup(t, alg)
			req := s.sign(t, url, body)
			in, err := parseRFC9421Headers(req.Header)
			if err != nil {
				t.Fatal(err)
			}
			want := rFC9421Label + "=:" + base64.RawURLEncoding.EncodeToString(in.signature) + ":"
			if got := req.Header.Get(headerSignature); got != want {
				t.Fatalf("the signer wrote %q, want unpadded base64url %q", got, want)
			}
			setSig(req, base64.StdEncoding.EncodeToString(in.signature))
			if _, err := s.verifier.Verify(context.Background(), overTheWire(t, req), body); err != nil {
				t.Fatalf("padded standard base64: Verify: %v", err)
			}
		})
	}

	// A vector's signature, whose encodings use "-" or "_" as base64url and
	// "+" or "/" as standard base64, so every mixed form below is mixed.
	public, _ := webhookKeys(t)
	vec := loadWebhookVectors(t, "positive", 8)[0]
	in, err := parseRFC9421Headers(vectorRequests(t, vec)["client"].Header)
	if err != nil {
		t.Fatal(err)
	}
	url64 := base64.RawURLEncoding.EncodeToString(in.signature)
	std64 := base64.StdEncoding.EncodeToString(in.signature)
	if strings.Count(url64, "-")+strings.Count(url64, "_") < 2 || !strings.ContainsAny(std64, "+/") || !strings.HasSuffix(std64, "==") {
		t.Fatalf("%s: the signature's encodings %q and %q do not exercise both alphabets and padding", vec.File, url64, std64)
	}
	// The base64url text with its first "-" or "_" in the standard alphabet:
	// the others stay, so both alphabets are present.
	toStd := strings.NewReplacer("-", "+", "_", "/")
	i := strings.IndexAny(url64, "-_")
	mixed := url64[:i] + toStd.Replace(url64[i:i+1]) + url64[i+1:]
	tests := []struct {
		name string
		text string
		code courier.Code // "" means verified
	}{
		{"unpadded base64url", url64, ""},
		{"padded standard base64", std64, ""},
		{"standard base64 without padding", strings.TrimRight(std64, "="), courier.CodeWebhookHeaderMalformed},
		{"padded base64url", base64.URLEncoding.EncodeToString(in.signature), courier.CodeWebhookHeaderMalformed},
		{"alphabets mixed", mixed, courier.CodeWebhookHeaderMalformed},
		{"alphabets mixed, padded", strings.Replace(std64, string(std64[strings.IndexAny(std64, "+/")]), "-", 1), courier.CodeWebhookHeaderMalformed},
		{"one pad short", strings.TrimSuffix(std64, "="), courier.CodeWebhookHeaderMalformed},
		{"one pad too many", std64 + "=", courier.CodeWebhookHeaderMalformed},
		{"padding inside", std64[:4] + "=" + std64[5:], courier.CodeWebhookHeaderMalformed},
		{"only padding", "==", courier.CodeWebhookHeaderMalformed},
	}
	for _, tt := range tests {
		for _, form := range []string{"client", "server"} {
			t.Run(tt.name+" "+form, func(t *testing.T) {
				t.Parallel()
				req := vectorRequests(t, vec)[form]
				setSig(req, tt.text)
				_, err := vectorVerifier(t, vec, public, "origin").Verify(context.Background(), req, []byte(vec.Request.Body))
				if tt.code == "" {
					if err != nil {
						t.Fatalf("Verify: %v", err)
					}
					return
				}
				wantReject(t, err, tt.code)
			})
		}
	}
}

// TestDecodeSFBinary: the two consistent forms decode to the same bytes;
// nothing else decodes.
func TestDecodeSFBinary(t *testing.T) {
	t.Parallel()
	raw := []byte{0xfb, 0xff, 0xbf, 0x00, 0x10, 0x83, 0xfa} // encodes to "+", "/", "-" and "_"
	std := base64.StdEncoding.EncodeToString(raw)
	url := base64.RawURLEncoding.EncodeToString(raw)
	if !strings.ContainsAny(std, "+/") || !strings.ContainsAny(url, "-_") || !strings.HasSuffix(std, "=") {
		t.Fatalf("test bytes encode as %q and %q", std, url)
	}
	for _, text := range []string{std, url} {
		got, err := decodeSFBinary(text)
		if err != nil || string(got) != string(raw) {
			t.Errorf("decodeSFBinary(%q) = %x, %v; want %x", text, got, err, raw)
		}
	}
	for _, text := range []string{
		strings.TrimRight(std, "="),            // standard, padding dropped
		base64.URLEncoding.EncodeToString(raw), // base64url, padded
		strings.Replace(url, "-", "+", 1),      // "+" beside "_"
		strings.Replace(std, "+", "-", 1),      // "-" beside "/" and "="
		std + "=",                              // excess padding
		"AB=C",                                 // padding inside
		"A",                                    // no whole byte
		"AB\nCD==",                             // a line break
		"AB==" + "CD==",                        // padding then more
	} {
		if got, err := decodeSFBinary(text); err == nil {
			t.Errorf("decodeSFBinary(%q) = %x; want an error", text, got)
		}
	}
}

// TestRFC9421RequestHost: a verifier that trusts the request's Host refuses
// a request whose Host, scheme or URL disagree with what was signed; one
// configured with Origin never looks at them, so the same requests verify.
func TestRFC9421RequestHost(t *testing.T) {
	t.Parallel()
	body := []byte(`{"status":"completed"}`)
	const url = "https://buyer.example.com/hook?x=1"
	tests := []struct {
		name   string
		mutate func(r *http.Request)
		code   courier.Code // with TrustRequestHost
	}{
		{"host changed", func(r *http.Request) { r.Host, r.URL.Host = "evil.example.com", "evil.example.com" }, courier.CodeWebhookInvalid},
		{"host disagrees with URL", func(r *http.Request) { r.Host = "evil.example.com" }, courier.CodeWebhookTargetURIMalformed},
		{"plain http", func(r *http.Request) { r.URL.Scheme = "http" }, courier.CodeWebhookTargetURIMalformed},
		{"raw U-label host", func(r *http.Request) { r.Host, r.URL.Host = "bücher.example", "bücher.example" }, courier.CodeWebhookTargetURIMalformed},
	}
	for _, alg := range []string{AlgEd25519, AlgECDSAP256SHA256} {
		for _, tt := range tests {
			t.Run(alg+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				trusting := newRFC9421Setup(t, alg, trustingHost)
				req := trusting.sign(t, url, body)
				tt.mutate(req)
				_, err := trusting.verifier.Verify(context.Background(), req, body)
				wantReject(t, err, tt.code)

				configured := newRFC9421Setup(t, alg)
				req = configured.sign(t, url, body)
				tt.mutate(req)
				if _, err := configured.verifier.Verify(context.Background(), req, body); err != nil {
					t.Fatalf("with Origin %s: Verify: %v", setupOrigin, err)
				}
			})
		}
	}
}

func (s *rfc9421Setup) signAt(t *testing.T, at time.Time, url string, body []byte) *http.Request {
	t.Helper()
	req := newRequest(t, http.MethodPost, url, map[string][]string{"Content-Type": {"application/json"}}, body)
	if err := s.signer.Sign(req, Message{Body: body, Time: at}); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestRFC9421WindowEdges(t *testing.T) {
	t.Parallel()
	s := newRFC9421Setup(t, AlgEd25519)
	body := []byte(`{}`)
	tests := []struct {
		name    string
		created time.Duration // relative to the verifier's now
		ok      bool
	}{
		{"created now", 0, true},
		{"created 60s ahead", 60 * time.Second, true},
		{"created 61s ahead", 61 * time.Second, false},
		{"expires 60s ago", -360 * time.Second, true},
		{"expires 61s ago", -361 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := s.signAt(t, s.now.Add(tt.created), "https://buyer.example.com/hook", body)
			_, err := s.verifier.Verify(context.Background(), req, body)
			if tt.ok {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			wantReject(t, err, courier.CodeWebhookWindowInvalid)
		})
	}
}

// TestRFC9421ReplayHeldForTheWholeWindow: the window is judged in whole
// seconds, so a request is accepted until the second after expires plus
// the skew has begun; its nonce is remembered until then too. The cache
// let the nonce go at expires plus the skew, and a captured request could
// be replayed at will during that last second.
func TestRFC9421ReplayHeldForTheWholeWindow(t *testing.T) {
	t.Parallel()
	key, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(1_776_520_800, 0)
	now := created
	clock := func() time.Time { return now } // moved only between calls below
	signer, err := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := NewRFC9421Verifier(RFC9421VerifierConfig{
		Sender: "seller", Keys: []JWK{key.Public()}, Origin: setupOrigin, Now: clock, Replay: &memoryReplayCache{Now: clock},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{}`)
	req := newRequest(t, http.MethodPost, "https://buyer.example.com/hook", map[string][]string{"Content-Type": {"application/json"}}, body)
	if err := signer.Sign(req, Message{ID: "n1", Body: body, Time: created}); err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(context.Background(), req, body); err != nil {
		t.Fatalf("first delivery: %v", err)
	}
	// created + 300 s window + 60 s skew, and part of the next second.
	for _, late := range []time.Duration{360 * time.Second, 360*time.Second + 600*time.Millisecond, 360*time.Second + 999*time.Millisecond} {
		now = created.Add(late)
		_, err := verifier.Verify(context.Background(), req, body)
		wantReject(t, err, courier.CodeWebhookReplayed)
	}
	now = created.Add(361 * time.Second)
	_, err = verifier.Verify(context.Background(), req, body)
	wantReject(t, err, courier.CodeWebhookWindowInvalid)
}

func TestRFC9421Infrastructure(t *testing.T) {
	t.Parallel()
	key, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	now := clockAt(1_776_520_800)
	signer, _ := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
	body := []byte(`{}`)
	sign := func() *http.Request {
		req := newRequest(t, http.MethodPost, "https://buyer.example.com/hook", map[string][]string{"Content-Type": {"application/json"}}, body)
		if err := signer.Sign(req, Message{Body: body, Time: now()}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	down := errors.New("database down")

	tests := []struct {
		name string
		cfg  RFC9421VerifierConfig
		code courier.Code // "" means an infrastructure error, not a rejection
		ok   bool
	}{
		{"lookup finds", RFC9421VerifierConfig{LookupKey: func(_ context.Context, kid string) (JWK, bool, error) {
			return key.Public(), kid == "k1", nil
		}}, "", true},
		{"lookup misses", RFC9421VerifierConfig{LookupKey: func(context.Context, string) (JWK, bool, error) { return JWK{}, false, nil }}, courier.CodeWebhookKeyUnknown, false},
		{"lookup returns another kid", RFC9421VerifierConfig{LookupKey: func(context.Context, string) (JWK, bool, error) {
			other, _ := GenerateJWK("k2", AlgEd25519)
			return other.Public(), true, nil
		}}, courier.CodeWebhookKeyUnknown, false},
		{"lookup fails", RFC9421VerifierConfig{LookupKey: func(context.Context, string) (JWK, bool, error) { return JWK{}, false, down }}, "", false},
		{"revocation check fails", RFC9421VerifierConfig{Keys: []JWK{key.Public()}, Revoked: func(context.Context, string) (bool, error) { return false, down }}, "", false},
		{"revocation stale", RFC9421VerifierConfig{Keys: []JWK{key.Public()}, Revoked: func(context.Context, string) (bool, error) {
			return false, fmt.Errorf("list: %w", courier.CodeWebhookRevocationStale)
		}}, courier.CodeWebhookRevocationStale, false},
		{"revoked", RFC9421VerifierConfig{Keys: []JWK{key.Public()}, Revoked: func(context.Context, string) (bool, error) { return true, nil }}, courier.CodeWebhookKeyRevoked, false},
		{"replay cache fails", RFC9421VerifierConfig{Keys: []JWK{key.Public()}, Replay: failingCache{down}}, "", false},
		{"nonce cap", RFC9421VerifierConfig{Keys: []JWK{key.Public()}, Replay: failingCache{courier.CodeWebhookRateAbuse}}, courier.CodeWebhookRateAbuse, false},
		{"key of another alg under the kid", RFC9421VerifierConfig{LookupKey: func(context.Context, string) (JWK, bool, error) {
			other, _ := GenerateJWK("k1", AlgECDSAP256SHA256)
			return other.Public(), true, nil
		}}, courier.CodeWebhookAlgNotAllowed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Sender, cfg.Now, cfg.Origin = "seller", now, "https://buyer.example.com"
			v, err := NewRFC9421Verifier(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(context.Background(), sign(), body)
			switch {
			case tt.ok:
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
			case tt.code != "":
				wantReject(t, err, tt.code)
			default:
				if err == nil || errors.Is(err, courier.CodeSignatureInvalid) || !errors.Is(err, down) {
					t.Fatalf("Verify = %v; want the infrastructure error, not a rejection", err)
				}
			}
		})
	}
}

type failingCache struct{ err error }

func (f failingCache) Remember(context.Context, string, string, time.Time) (bool, error) {
	return false, f.err
}

func TestRFC9421Origin(t *testing.T) {
	t.Parallel()
	key, _ := GenerateJWK("k1", AlgEd25519)
	now := clockAt(1_776_520_800)
	signer, _ := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
	body := []byte(`{}`)
	out := newRequest(t, http.MethodPost, "https://buyer.example.com/hook/1?a=b", map[string][]string{"Content-Type": {"application/json"}}, body)
	if err := signer.Sign(out, Message{Body: body, Time: now()}); err != nil {
		t.Fatal(err)
	}
	// Behind a proxy: plain http, Host rewritten to the backend's.
	raw := "POST /hook/1?a=b HTTP/1.1\r\nHost: backend:8080\r\nContent-Type: application/json\r\n" +
		"Content-Digest: " + out.Header.Get(headerContentDigest) + "\r\n" +
		"Signature-Input: " + out.Header.Get(headerSignatureInput) + "\r\n" +
		"Signature: " + out.Header.Get(headerSignature) + "\r\nContent-Length: 2\r\n\r\n{}"
	in := func() *http.Request {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name string
		cfg  RFC9421VerifierConfig
		code courier.Code // "" means verified
	}{
		{"origin", RFC9421VerifierConfig{Origin: "https://buyer.example.com"}, ""},
		{"origin in another case, with the default port", RFC9421VerifierConfig{Origin: "HTTPS://Buyer.Example.com:443"}, ""},
		{"another receiver's origin", RFC9421VerifierConfig{Origin: "https://other.example.com"}, courier.CodeWebhookInvalid},
		{"the origin on another port", RFC9421VerifierConfig{Origin: "https://buyer.example.com:8443"}, courier.CodeWebhookInvalid},
		{"trusting Host", RFC9421VerifierConfig{TrustRequestHost: true}, courier.CodeWebhookTargetURIMalformed}, // plain http to a non-loopback host
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Sender, cfg.Keys, cfg.Now = "s", []JWK{key.Public()}, now
			v, err := NewRFC9421Verifier(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(context.Background(), in(), body)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			wantReject(t, err, tt.code)
		})
	}
}

// TestRFC9421VerifierRefusesRequestSignedForAnotherReceiver is the
// regression test of a security finding: with no origin configured the
// verifier took the origin from the request's Host, so a request signed for
// receiver A was accepted by receiver B trusting the same sender key when an
// attacker sent it to B with "Host: A". A verifier must now be told its
// origin, and B's refuses what was signed for A, whatever Host says.
func TestRFC9421VerifierRefusesRequestSignedForAnotherReceiver(t *testing.T) {
	t.Parallel()
	key, err := GenerateJWK("sender-key", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	now := clockAt(1_776_520_800)
	signer, err := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"status":"completed"}`)
	out := newRequest(t, http.MethodPost, "https://a.example.com/hook", map[string][]string{"Content-Type": {"application/json"}}, body)
	if err := signer.Sign(out, Message{Body: body, Time: now()}); err != nil {
		t.Fatal(err)
	}
	// The captured request replayed to B's address: the path B listens on,
	// A's signature headers, and the Host the attacker chooses.
	send := func(to, host string) *http.Request {
		r := out.Clone(context.Background())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.URL.Host, r.Host = to, host
		return overTheWire(t, r)
	}
	toB := func(host string) *http.Request { return send("b.example.com", host) }
	receiver := func(cfg RFC9421VerifierConfig) (Verifier, error) {
		cfg.Sender, cfg.Keys, cfg.Now = "sender", []JWK{key.Public()}, now
		return NewRFC9421Verifier(cfg)
	}

	// B as receivers were built before: no origin. It is refused.
	if _, err := receiver(RFC9421VerifierConfig{}); !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), "RFC9421VerifierConfig.Origin") {
		t.Fatalf("a verifier without Origin: %v, want CodeConfigInvalid naming Origin", err)
	}

	b, err := receiver(RFC9421VerifierConfig{Origin: "https://b.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		_, err := b.Verify(context.Background(), toB(host), body)
		wantReject(t, err, courier.CodeWebhookInvalid)
	}

	// The request is genuine: A verifies it.
	a, err := receiver(RFC9421VerifierConfig{Origin: "https://a.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(context.Background(), send("a.example.com", "a.example.com"), body); err != nil {
		t.Fatalf("A: Verify: %v", err)
	}

	// The risk TrustRequestHost documents: B trusting Host accepts it.
	trusting, err := receiver(RFC9421VerifierConfig{TrustRequestHost: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trusting.Verify(context.Background(), toB("a.example.com"), body); err != nil {
		t.Fatalf("B trusting Host: Verify: %v; the documented risk no longer holds, update the docs", err)
	}
}

// TestNewRFC9421VerifierNeedsTheReceiversOrigin: the constructor refuses a
// config with neither Origin nor TrustRequestHost, or with both, and an
// Origin that is anything but "scheme://host[:port]".
func TestNewRFC9421VerifierNeedsTheReceiversOrigin(t *testing.T) {
	t.Parallel()
	key, _ := GenerateJWK("k1", AlgEd25519)
	tests := []struct {
		name  string
		cfg   RFC9421VerifierConfig
		names string // "" means accepted; else what the error names
	}{
		{"origin", RFC9421VerifierConfig{Origin: "https://buyer.example.com"}, ""},
		{"origin with a port", RFC9421VerifierConfig{Origin: "https://buyer.example.com:8443"}, ""},
		{"origin with an IPv6 host", RFC9421VerifierConfig{Origin: "https://[2001:db8::1]:8443"}, ""},
		{"origin with a U-label host", RFC9421VerifierConfig{Origin: "https://bücher.example"}, ""},
		{"loopback over http", RFC9421VerifierConfig{Origin: "http://127.0.0.1:8080"}, ""},
		{"localhost over http", RFC9421VerifierConfig{Origin: "http://localhost:8080"}, ""},
		{"trusting Host", RFC9421VerifierConfig{TrustRequestHost: true}, ""},
		{"neither", RFC9421VerifierConfig{}, "RFC9421VerifierConfig.Origin is empty"},
		{"both", RFC9421VerifierConfig{Origin: "https://buyer.example.com", TrustRequestHost: true}, "Origin and TrustRequestHost"},
		{"origin with a path", RFC9421VerifierConfig{Origin: "https://buyer.example.com/hook"}, "RFC9421VerifierConfig.Origin"},
		{"origin with a root path", RFC9421VerifierConfig{Origin: "https://buyer.example.com/"}, "RFC9421VerifierConfig.Origin"},
		{"origin with a query", RFC9421VerifierConfig{Origin: "https://buyer.example.com?a=b"}, "RFC9421VerifierConfig.Origin"},
		{"origin with a fragment", RFC9421VerifierConfig{Origin: "https://buyer.example.com#x"}, "RFC9421VerifierConfig.Origin"},
		{"origin with userinfo", RFC9421VerifierConfig{Origin: "https://user:pass@buyer.example.com"}, "RFC9421VerifierConfig.Origin"},
		{"origin without scheme", RFC9421VerifierConfig{Origin: "buyer.example.com"}, "RFC9421VerifierConfig.Origin"},
		{"origin of another scheme", RFC9421VerifierConfig{Origin: "ftp://buyer.example.com"}, "RFC9421VerifierConfig.Origin"},
		{"origin without host", RFC9421VerifierConfig{Origin: "https://"}, "RFC9421VerifierConfig.Origin"},
		{"origin with a bad port", RFC9421VerifierConfig{Origin: "https://buyer.example.com:99999"}, "RFC9421VerifierConfig.Origin"},
		{"origin with a space", RFC9421VerifierConfig{Origin: "https://buyer example.com"}, "RFC9421VerifierConfig.Origin"},
		{"plain http to a public host", RFC9421VerifierConfig{Origin: "http://buyer.example.com"}, "RFC9421VerifierConfig.Origin is not https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Sender, cfg.Keys = "s", []JWK{key.Public()}
			_, err := NewRFC9421Verifier(cfg)
			if tt.names == "" {
				if err != nil {
					t.Fatalf("NewRFC9421Verifier: %v", err)
				}
				return
			}
			if !errors.Is(err, courier.CodeConfigInvalid) || courier.CodeOf(err) != courier.CodeConfigInvalid {
				t.Fatalf("err = %v, want a case of CodeConfigInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.names) {
				t.Errorf("err = %q, want it to name %q", err, tt.names)
			}
		})
	}
}

func TestRFC9421Config(t *testing.T) {
	t.Parallel()
	priv, _ := GenerateJWK("k1", AlgEd25519)
	pub := priv.Public()
	lookup := func(context.Context, string) (JWK, bool, error) { return JWK{}, false, nil }

	verifierTests := []struct {
		name string
		cfg  RFC9421VerifierConfig
		ok   bool
	}{
		{"keys", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}}, true},
		{"lookup", RFC9421VerifierConfig{Sender: "s", LookupKey: lookup}, true},
		{"no sender", RFC9421VerifierConfig{Keys: []JWK{pub}}, false},
		{"no keys", RFC9421VerifierConfig{Sender: "s"}, false},
		{"keys and lookup", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, LookupKey: lookup}, false},
		{"zero key", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{{}}}, false},
		{"duplicate kid", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub, pub}}, false},
		{"private key", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{priv}}, false}, // its key_ops would refuse every request
		{"negative skew", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, ClockSkew: -time.Second}, false},
		{"skew over the window", RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, ClockSkew: maxRFC9421Window + time.Second}, false},
	}
	for _, tt := range verifierTests {
		t.Run("verifier "+tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tt.cfg
			cfg.Origin = "https://buyer.example.com"
			if _, err := NewRFC9421Verifier(cfg); (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	signerTests := []struct {
		name string
		cfg  RFC9421SignerConfig
		ok   bool
	}{
		{"private key", RFC9421SignerConfig{Key: priv}, true},
		{"public key", RFC9421SignerConfig{Key: pub}, false},
		{"zero key", RFC9421SignerConfig{}, false},
		{"window too long", RFC9421SignerConfig{Key: priv, Window: 301 * time.Second}, false},
		{"short window", RFC9421SignerConfig{Key: priv, Window: time.Minute}, true},
	}
	for _, tt := range signerTests {
		t.Run("signer "+tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewRFC9421Signer(tt.cfg); (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestRFC9421SignErrors(t *testing.T) {
	t.Parallel()
	key, _ := GenerateJWK("k1", AlgECDSAP256SHA256)
	signer, _ := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
	tests := []struct {
		name    string
		url     string
		headers map[string][]string
	}{
		{"no content type", "https://buyer.example.com/hook", nil},
		{"two content types", "https://buyer.example.com/hook", map[string][]string{"Content-Type": {"a/b", "c/d"}}},
		{"plain http", "http://buyer.example.com/hook", map[string][]string{"Content-Type": {"application/json"}}},
		{"bad host", "https://buyer..example.com/hook", map[string][]string{"Content-Type": {"application/json"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := newRequest(t, http.MethodPost, tt.url, tt.headers, nil)
			err := signer.Sign(req, Message{Body: []byte(`{}`), Time: time.Unix(1, 0)})
			if courier.CodeOf(err) != courier.CodeSigningFailed {
				t.Fatalf("Sign = %v, want %s", err, courier.CodeSigningFailed)
			}
			if req.Header.Get(headerSignature) != "" || req.Header.Get(headerContentDigest) != "" {
				t.Error("headers set on failure")
			}
		})
	}
}

func TestJWK(t *testing.T) {
	t.Parallel()
	public, private := webhookKeys(t)
	ed, ec := private["test-ed25519-webhook-2026"], private["test-es256-webhook-2026"]
	if !ed.isPrivate() || !ec.isPrivate() || public["test-ed25519-webhook-2026"].isPrivate() {
		t.Fatal("isPrivate wrong")
	}
	if ed.m().alg != AlgEd25519 || ec.m().alg != AlgECDSAP256SHA256 {
		t.Errorf("alg = %q, %q", ed.m().alg, ec.m().alg)
	}
	// MarshalJSON writes the public part only, and parses back.
	for _, k := range []JWK{ed, ec} {
		b, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"d"`) {
			t.Errorf("marshaled private part: %s", b)
		}
		back, err := ParseJWK(b)
		if err != nil || back.isPrivate() || back.KeyID() != k.KeyID() || back.m().alg != k.m().alg {
			t.Errorf("round trip: %v %v", back, err)
		}
	}
	set, err := os.ReadFile(filepath.Join(webhookSigningDir, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ParseJWKSet(set)
	if err != nil || len(keys) != 5 {
		t.Fatalf("ParseJWKSet = %d keys, %v", len(keys), err)
	}

	edX := "y7tTfeqazsFeTn3ccCzQlcJ4qFWuYsu-JkJAcfc9VoA"
	ecX, ecY := "0X7G_jryFpiX9XO3CKxIqUQs3DC8OhUkw6Rb5QOZd5M", "MwZN7qQJzLpTD5dyDJAoqOLZJ9r8-GCh4BnOYu6NE0c"
	tests := []struct {
		name string
		json string
		ok   bool
	}{
		{"ed25519", `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX + `"}`, true},
		{"ed25519 alg Ed25519", `{"kid":"a","kty":"OKP","crv":"Ed25519","alg":"Ed25519","x":"` + edX + `"}`, true},
		{"es256", `{"kid":"a","kty":"EC","crv":"P-256","alg":"ES256","x":"` + ecX + `","y":"` + ecY + `"}`, true},
		{"no kid", `{"kty":"OKP","crv":"Ed25519","x":"` + edX + `"}`, false},
		{"padded x", `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX + `="}`, false},
		{"std alphabet x", `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + strings.ReplaceAll(edX, "-", "+") + `"}`, false},
		{"short x", `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX[:40] + `"}`, false},
		{"alg mismatch", `{"kid":"a","kty":"OKP","crv":"Ed25519","alg":"ES256","x":"` + edX + `"}`, false},
		{"use enc", `{"kid":"a","kty":"OKP","crv":"Ed25519","use":"enc","x":"` + edX + `"}`, false},
		{"X25519", `{"kid":"a","kty":"OKP","crv":"X25519","x":"` + edX + `"}`, false},
		{"RSA", `{"kid":"a","kty":"RSA","n":"AQAB","e":"AQAB"}`, false},
		{"P-384", `{"kid":"a","kty":"EC","crv":"P-384","x":"` + ecX + `","y":"` + ecY + `"}`, false},
		{"point not on curve", `{"kid":"a","kty":"EC","crv":"P-256","x":"` + ecX + `","y":"` + ecX + `"}`, false},
		{"d does not match", `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX + `","d":"` + edX + `"}`, false},
		{"not JSON", `kid`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseJWK([]byte(tt.json))
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (strings.Contains(err.Error(), edX) || strings.Contains(err.Error(), ecX)) {
				t.Errorf("error %q contains key material", err)
			}
		})
	}
	if _, err := ParseJWKSet([]byte(`{"keys":[` + `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX + `"},{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX + `"}]}`)); err == nil {
		t.Error("duplicate kid accepted")
	}
	if _, err := GenerateJWK("k", "rsa-pss-sha512"); err == nil {
		t.Error("GenerateJWK accepted an unknown alg")
	}
}

// TestRFC9421SharedReplayCacheKeepsSendersApart: two senders, A and B,
// each with its own verifier (its own Sender and keys) on one receiver
// whose verifiers share a replay cache, as the store's is shared. Key ids
// are each sender's choice and both named their key "k1". A nonce A used
// is not a replay when B's signature carries it, and A's nonces do not
// count against B's cap of live nonces; each sender's own replays and cap
// still hold. (Keyed by the bare keyid, B's request with A's nonce was
// refused as replayed, and once A filled k1's cap B was refused as rate
// abuse.)
func TestRFC9421SharedReplayCacheKeepsSendersApart(t *testing.T) {
	t.Parallel()
	const origin = "https://buyer.example.com"
	now := clockAt(1_776_520_800)
	shared := &memoryReplayCache{Now: now, MaxPerKey: 2}
	verifier := func(sender string, key JWK) Verifier {
		v, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: sender, Keys: []JWK{key.Public()}, Origin: origin, Replay: shared, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	keyA, errA := GenerateJWK("k1", AlgEd25519)
	keyB, errB := GenerateJWK("k1", AlgEd25519)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	vA, vB := verifier("seller-a", keyA), verifier("seller-b", keyB)
	body := []byte(`{"task_id":"t1","status":"completed"}`)
	sign := func(key JWK) *http.Request {
		signer, err := NewRFC9421Signer(RFC9421SignerConfig{Key: key})
		if err != nil {
			t.Fatal(err)
		}
		req := newRequest(t, http.MethodPost, origin+"/hook", map[string][]string{"Content-Type": {"application/json"}}, body)
		if err := signer.Sign(req, Message{Body: body, Time: now()}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	verify := func(v Verifier, req *http.Request) error {
		_, err := v.Verify(context.Background(), req.Clone(context.Background()), body)
		return err
	}

	// A's two requests fill A's k1 to its cap.
	fromA := sign(keyA)
	for _, req := range []*http.Request{fromA, sign(keyA)} {
		if err := verify(vA, req); err != nil {
			t.Fatalf("A: %v", err)
		}
	}
	// B signs the same signature base, A's nonce and keyid included.
	sameNonce := fromA.Clone(context.Background())
	base, err := signatureBase(rfc9421Components, strings.TrimPrefix(fromA.Header.Get(headerSignatureInput), rFC9421Label+"="), baseRequest{
		method: fromA.Method, target: origin + "/hook", authority: "buyer.example.com", header: fromA.Header,
	})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := keyB.m().sign([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	sameNonce.Header.Set(headerSignature, rFC9421Label+"=:"+base64.RawURLEncoding.EncodeToString(sig)+":")
	if err := verify(vB, sameNonce); err != nil {
		t.Errorf("B's request with the nonce A used: %v; want it verified", err)
	}
	if err := verify(vB, sign(keyB)); err != nil {
		t.Errorf("B's second request, A's k1 at its cap: %v; want it verified", err)
	}
	// Each sender's own replays and cap.
	wantReject(t, verify(vA, fromA), courier.CodeWebhookReplayed)
	wantReject(t, verify(vB, sameNonce), courier.CodeWebhookReplayed)
	wantReject(t, verify(vA, sign(keyA)), courier.CodeWebhookRateAbuse)
	wantReject(t, verify(vB, sign(keyB)), courier.CodeWebhookRateAbuse)

	// The key the pairs are recorded under: fixed length, within a store's
	// 256 bytes, and unambiguous where a plain concatenation is not.
	long := strings.Repeat("x", 256)
	if k := replayKeyID(long, long); len(k) != 72 || !strings.HasPrefix(k, "rfc9421:") {
		t.Errorf("replayKeyID = %q, want rfc9421: and 64 hex digits", k)
	}
	if replayKeyID("ab", "c") == replayKeyID("a", "bc") || replayKeyID("a", "k1") == replayKeyID("b", "k1") {
		t.Error("replayKeyID gives two (sender, keyid) pairs one key")
	}
}

// TestParseJWKSetSkipsKeysOfOtherTypes: a sender's JWK Set may publish,
// beside its signing keys, keys courier does not verify with (RSA, X25519,
// Ed448, P-384, encryption keys). RFC 7517 §5 asks implementations to
// ignore them: the set yields its usable keys. A malformed key of a
// supported type, or a key id twice among the usable keys, still refuses
// the set; so does a set left with no usable key.
func TestParseJWKSetSkipsKeysOfOtherTypes(t *testing.T) {
	t.Parallel()
	const edX = "y7tTfeqazsFeTn3ccCzQlcJ4qFWuYsu-JkJAcfc9VoA"
	ecX, ecY := "0X7G_jryFpiX9XO3CKxIqUQs3DC8OhUkw6Rb5QOZd5M", "MwZN7qQJzLpTD5dyDJAoqOLZJ9r8-GCh4BnOYu6NE0c"
	ed := `{"kid":"webhook-2026","kty":"OKP","crv":"Ed25519","alg":"EdDSA","use":"sig","key_ops":["verify"],"adcp_use":"request-signing","x":"` + edX + `"}`
	ec := `{"kid":"es-2026","kty":"EC","crv":"P-256","x":"` + ecX + `","y":"` + ecY + `"}`
	foreign := []string{
		`{"kid":"rsa-other","kty":"RSA","alg":"RS256","use":"sig","n":"sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw","e":"AQAB"}`,
		`{"kid":"enc-2026","kty":"EC","crv":"P-256","use":"enc","x":"` + ecX + `","y":"` + ecY + `"}`,
		`{"kid":"ecdh","kty":"OKP","crv":"X25519","x":"` + edX + `"}`,
		`{"kid":"ed448","kty":"OKP","crv":"Ed448","x":"AAAA"}`,
		`{"kid":"p384","kty":"EC","crv":"P-384","x":"AAAA","y":"AAAA"}`,
		`{"kid":"webhook-2026","kty":"oct","k":"AAAA"}`,                                                                      // a skipped key may share a usable key's id
		`{"kid":7,"kty":"RSA","key_ops":"verify","x5c":[1]}`,                                                                 // members of other shapes in a key of another type
		`{"kty":"OKP","crv":"Ed25519","use":"enc","x":"AAAA"}`,                                                               // an encryption key, however it is written
		`{"kid":"ecdh-es","kty":"EC","crv":"P-256","alg":"ECDH-ES+A256KW","x":"` + ecX + `","y":"` + ecY + `"}`,              // a key agreement key, told by its alg alone
		`{"kid":"derive","kty":"EC","crv":"P-256","key_ops":["deriveKey","deriveBits"],"x":"` + ecX + `","y":"` + ecY + `"}`, // or by its key_ops
	}
	set := func(keys ...string) []byte { return []byte(`{"keys":[` + strings.Join(keys, ",") + `]}`) }

	keys, err := ParseJWKSet(set(slices.Concat(foreign[:1], []string{ed}, foreign[1:], []string{ec})...))
	if err != nil {
		t.Fatalf("ParseJWKSet: %v", err)
	}
	if len(keys) != 2 || keys[0].KeyID() != "webhook-2026" || keys[1].KeyID() != "es-2026" {
		t.Fatalf("keys = %v, want the Ed25519 and the P-256 signing key", keys)
	}

	malformed := `{"kid":"bad","kty":"OKP","crv":"Ed25519","x":"` + edX[:40] + `"}`
	badAlg := `{"kid":"bad","kty":"EC","crv":"P-256","alg":"EdDSA","x":"` + ecX + `","y":"` + ecY + `"}`
	for name, doc := range map[string][]byte{
		"only foreign keys":                set(foreign...),
		"a malformed supported key":        set(ed, malformed),
		"a supported key of the wrong alg": set(ed, badAlg),
		"a usable kid twice":               set(ed, foreign[0], ed),
		"a key that is not an object":      set(ed, `"k"`),
	} {
		if _, err := ParseJWKSet(doc); !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("%s: err = %v, want config_invalid", name, err)
		}
	}
}

// TestParseJWKMemberNamesAreExact: JWK member names are case-sensitive
// (RFC 7517 §4, RFC 8259), so "Use", "KEY_OPS" or "ADCP_USE" are unknown
// members, ignored, and never stand in for "use", "key_ops" or
// "adcp_use"; a member twice in one object is refused, as courier refuses
// it in every JSON it trusts. A key is read as any exact-name JWK library
// reads it: a key published with use "enc", or key_ops ["sign"], stays so.
func TestParseJWKMemberNamesAreExact(t *testing.T) {
	t.Parallel()
	const edX = "y7tTfeqazsFeTn3ccCzQlcJ4qFWuYsu-JkJAcfc9VoA"
	const key = `"kid":"k","kty":"OKP","crv":"Ed25519","x":"` + edX + `"`

	k, err := ParseJWK([]byte(`{` + key + `,"key_ops":["sign"],"KEY_OPS":["verify"],"adcp_use":"response-signing","ADCP_USE":"request-signing","Use":"enc"}`))
	if err != nil {
		t.Fatalf("ParseJWK: %v", err)
	}
	if m := k.m(); !slices.Equal(m.keyOps, []string{"sign"}) || m.adcpUse != "response-signing" || m.use != "" || m.purposeOK() {
		t.Errorf("read as use=%q key_ops=%v adcp_use=%q (purpose ok: %v); want the exact members: no use, key_ops [sign], adcp_use response-signing",
			m.use, m.keyOps, m.adcpUse, m.purposeOK())
	}

	for name, doc := range map[string]string{
		"use enc beside Use sig":  `{` + key + `,"use":"enc","Use":"sig"}`,
		"use twice":               `{` + key + `,"use":"sig","use":"enc"}`,
		"key_ops twice":           `{` + key + `,"key_ops":["verify"],"key_ops":["sign"]}`,
		"KID without kid":         `{"KID":"k","kty":"OKP","crv":"Ed25519","x":"` + edX + `"}`,
		"X without x":             `{"kid":"k","kty":"OKP","crv":"Ed25519","X":"` + edX + `"}`,
		"kid not a string":        `{"kid":7,"kty":"OKP","crv":"Ed25519","x":"` + edX + `"}`,
		"key_ops of a non-string": `{` + key + `,"key_ops":["verify",1]}`,
		"a member twice deeper":   `{` + key + `,"ext":{"a":1,"a":2}}`,
		"data after the object":   `{` + key + `} {}`,
	} {
		if _, err := ParseJWK([]byte(doc)); !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("%s: err = %v, want config_invalid", name, err)
		}
	}
	for name, doc := range map[string]string{
		"Keys without keys": `{"Keys":[{` + key + `}]}`,
		"keys twice":        `{"keys":[{` + key + `}],"keys":[]}`,
		"use enc in a set":  `{"keys":[{` + key + `,"use":"sig","Use":"enc"},{"kid":"k","kty":"OKP","crv":"Ed25519","use":"enc","Use":"sig","x":"` + edX + `"}]}`,
	} {
		keys, err := ParseJWKSet([]byte(doc))
		if name == "use enc in a set" {
			if err != nil || len(keys) != 1 || keys[0].m().use != "sig" {
				t.Errorf("%s: %v, %v; want the one key of use sig", name, keys, err)
			}
			continue
		}
		if !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("%s: err = %v, want config_invalid", name, err)
		}
	}
}

func TestMemoryReplayCache(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	c := &memoryReplayCache{Now: func() time.Time { return now }, MaxPerKey: 2}
	ctx := context.Background()
	remember := func(kid, nonce string, ttl time.Duration) (bool, error) {
		return c.Remember(ctx, kid, nonce, now.Add(ttl))
	}
	steps := []struct {
		kid, nonce string
		ttl        time.Duration
		replayed   bool
		err        error
	}{
		{"a", "1", time.Minute, false, nil},
		{"a", "1", time.Minute, true, nil},
		{"b", "1", time.Minute, false, nil}, // the same nonce under another key
		{"a", "2", time.Second, false, nil},
		{"a", "3", time.Minute, false, courier.CodeWebhookRateAbuse},
		{"a", "1", time.Minute, true, nil}, // a replay is still a replay at the cap
	}
	for i, s := range steps {
		replayed, err := remember(s.kid, s.nonce, s.ttl)
		if replayed != s.replayed || !errors.Is(err, s.err) {
			t.Fatalf("step %d: Remember(%s, %s) = %v, %v; want %v, %v", i, s.kid, s.nonce, replayed, err, s.replayed, s.err)
		}
	}
	now = now.Add(2 * time.Second) // "a"/"2" expires: room for one more
	if replayed, err := remember("a", "3", time.Minute); replayed || err != nil {
		t.Fatalf("after expiry: %v, %v", replayed, err)
	}
	if got := c.Len(); got != 3 {
		t.Errorf("Len = %d, want 3", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Remember(cancelled, "a", "9", now); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// TestRFC9421RefusesAFragmentInTheRequestTarget: a request target carries
// no fragment, yet net/http serves one that has "#": the handler's path
// or query then holds what follows it, which @target-uri, with the
// fragment dropped, does not. A request signed for one target, delivered
// with "#..." added, is refused, with either origin mode.
func TestRFC9421RefusesAFragmentInTheRequestTarget(t *testing.T) {
	t.Parallel()
	body := []byte(`{"status":"completed"}`)
	tests := []struct {
		url, target string // signed for url, delivered with target
		check       func(r *http.Request) bool
	}{
		{"https://buyer.example.com/hooks/a?x=1", "/hooks/a?x=1#&x=2", func(r *http.Request) bool {
			return slices.Equal(r.URL.Query()["x"], []string{"1#", "2"})
		}},
		{"https://buyer.example.com/hooks/a", "/hooks/a#b", func(r *http.Request) bool {
			return r.URL.Path == "/hooks/a#b"
		}},
		{"https://buyer.example.com/hooks/a", "/hooks/a#", func(r *http.Request) bool {
			return r.URL.Path == "/hooks/a#"
		}},
	}
	for _, tt := range tests {
		for _, mode := range originModes {
			t.Run(tt.target+" "+mode, func(t *testing.T) {
				t.Parallel()
				var edits []func(*RFC9421VerifierConfig)
				if mode == "request host" {
					edits = append(edits, trustingHost)
				}
				s := newRFC9421Setup(t, AlgEd25519, edits...)
				req := withRequestTarget(t, overTheWire(t, s.sign(t, tt.url, body)), tt.target)
				if !tt.check(req) {
					t.Fatalf("the server read %q as path %q, query %q; the test no longer shows what a handler sees", req.RequestURI, req.URL.Path, req.URL.RawQuery)
				}
				_, err := s.verifier.Verify(context.Background(), req, body)
				wantReject(t, err, courier.CodeWebhookTargetURIMalformed)
			})
		}
	}
}

// withRequestTarget returns req, as a server reads it, sent with target
// on its request line instead of its own.
func withRequestTarget(t *testing.T, req *http.Request, target string) *http.Request {
	t.Helper()
	var buf bytes.Buffer
	if err := req.Write(&buf); err != nil {
		t.Fatalf("Write: %v", err)
	}
	_, rest, _ := strings.Cut(buf.String(), "\r\n")
	got, err := http.ReadRequest(bufio.NewReader(strings.NewReader(req.Method + " " + target + " HTTP/1.1\r\n" + rest)))
	if err != nil {
		t.Fatalf("ReadRequest: %v", err)
	}
	got.TLS = req.TLS
	return got
}

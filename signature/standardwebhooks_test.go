package signature

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

const swVectorsPath = "testdata/standard-webhooks/vectors.json"

type swVector struct {
	ID            string `json:"id"`
	Why           string `json:"why"`
	Secret        string `json:"secret"`
	Ed25519Seed   string `json:"ed25519_seed_base64"`
	Ed25519Public string `json:"ed25519_public_base64"`
	MsgID         string `json:"msg_id"`
	Timestamp     int64  `json:"timestamp"`
	Body          string `json:"body"`
	Signature     string `json:"signature"`
}

type swVectors struct {
	Sign   []swVector `json:"sign"`
	Reject []swVector `json:"reject"`
	Multi  struct {
		Header string `json:"header"`
		Vector string `json:"vector"`
	} `json:"multi"`
}

func loadSWVectors(t *testing.T) swVectors {
	t.Helper()
	var v swVectors
	loadJSON(t, swVectorsPath, &v)
	if len(v.Sign) < 3 || len(v.Reject) < 4 || v.Multi.Header == "" {
		t.Fatalf("%s: want SW-1..3, SW-R1..4 and the multi case; got %d sign, %d reject", swVectorsPath, len(v.Sign), len(v.Reject))
	}
	return v
}

// swVectorKeys returns the signing key and the verifying key of a vector.
func swVectorKeys(t *testing.T, v swVector) (signing, verifying StandardWebhooksKey) {
	t.Helper()
	if v.Secret != "" {
		k, err := ParseStandardWebhooksKey("", v.Secret)
		if err != nil {
			t.Fatalf("%s: parse secret: %v", v.ID, err)
		}
		return k, k
	}
	sk, err := ParseStandardWebhooksKey("", prefixStandardWebhooksPrivateKey+v.Ed25519Seed)
	if err != nil {
		t.Fatalf("%s: parse private key: %v", v.ID, err)
	}
	pk, err := ParseStandardWebhooksKey("", prefixStandardWebhooksPublicKey+v.Ed25519Public)
	if err != nil {
		t.Fatalf("%s: parse public key: %v", v.ID, err)
	}
	return sk, pk
}

func swVectorRequest(t *testing.T, v swVector, sigLines ...string) *http.Request {
	t.Helper()
	return newRequest(t, http.MethodPost, "https://receiver.example/hook", map[string][]string{
		headerWebhookID:        {v.MsgID},
		headerWebhookTimestamp: {strconv.FormatInt(v.Timestamp, 10)},
		headerWebhookSignature: sigLines,
	}, []byte(v.Body))
}

func newSWVerifier(t *testing.T, now func() time.Time, keys ...StandardWebhooksKey) Verifier {
	t.Helper()
	v, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "sender", Keys: keys, Now: now})
	if err != nil {
		t.Fatalf("NewStandardWebhooksVerifier: %v", err)
	}
	return v
}

func TestStandardWebhooksSignVectors(t *testing.T) {
	t.Parallel()
	for _, vec := range loadSWVectors(t).Sign {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			signing, verifying := swVectorKeys(t, vec)

			signer, err := NewStandardWebhooksSigner(signing)
			if err != nil {
				t.Fatal(err)
			}
			req := newRequest(t, http.MethodPost, "https://receiver.example/hook", nil, []byte(vec.Body))
			if err := signer.Sign(req, Message{ID: vec.MsgID, Body: []byte(vec.Body), Time: time.Unix(vec.Timestamp, 0)}); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if got := req.Header.Get(headerWebhookSignature); got != vec.Signature {
				t.Errorf("webhook-signature = %q, want %q", got, vec.Signature)
			}
			if got := req.Header.Get(headerWebhookID); got != vec.MsgID {
				t.Errorf("webhook-id = %q, want %q", got, vec.MsgID)
			}
			if got, want := req.Header.Get(headerWebhookTimestamp), strconv.FormatInt(vec.Timestamp, 10); got != want {
				t.Errorf("webhook-timestamp = %q, want %q", got, want)
			}

			verifier := newSWVerifier(t, clockAt(vec.Timestamp), verifying)
			p, err := verifier.Verify(context.Background(), swVectorRequest(t, vec, vec.Signature), []byte(vec.Body))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p != (Principal{Sender: "sender", KeyID: verifying.ID(), Scheme: SchemeStandardWebhooks, MessageID: vec.MsgID}) {
				t.Errorf("principal = %+v", p)
			}
			// The verifier also accepts the private key, keeping its public half.
			if _, err := newSWVerifier(t, clockAt(vec.Timestamp), signing).Verify(context.Background(), swVectorRequest(t, vec, vec.Signature), []byte(vec.Body)); err != nil {
				t.Errorf("Verify with the signing key: %v", err)
			}
		})
	}
}

func TestStandardWebhooksRejectVectors(t *testing.T) {
	t.Parallel()
	for _, vec := range loadSWVectors(t).Reject {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			_, key := swVectorKeys(t, vec)
			verifier := newSWVerifier(t, clockAt(vec.Timestamp), key)
			_, err := verifier.Verify(context.Background(), swVectorRequest(t, vec, vec.Signature), []byte(vec.Body))
			wantReject(t, err, courier.CodeSignatureMismatch)
		})
	}
	// SW-1's valid signature written in the URL-safe alphabet or unpadded.
	vec := loadSWVectors(t).Sign[0]
	_, key := swVectorKeys(t, vec)
	verifier := newSWVerifier(t, clockAt(vec.Timestamp), key)
	for _, sig := range []string{
		strings.NewReplacer("+", "-", "/", "_").Replace(vec.Signature),
		strings.TrimRight(vec.Signature, "="),
	} {
		_, err := verifier.Verify(context.Background(), swVectorRequest(t, vec, sig), []byte(vec.Body))
		wantReject(t, err, courier.CodeSignatureMismatch)
	}
}

func TestStandardWebhooksMultipleSignatures(t *testing.T) {
	t.Parallel()
	vecs := loadSWVectors(t)
	var vec swVector
	for _, v := range vecs.Sign {
		if v.ID == vecs.Multi.Vector {
			vec = v
		}
	}
	if vec.ID == "" {
		t.Fatalf("multi names unknown vector %q", vecs.Multi.Vector)
	}
	_, key := swVectorKeys(t, vec)
	verifier := newSWVerifier(t, clockAt(vec.Timestamp), key)

	tests := []struct {
		name   string
		header string
	}{
		{"vector", vecs.Multi.Header},
		{"unknown versions and junk first", "v9,abc v1 v1,!!! v1a,AAAA " + vec.Signature},
		{"extra spaces", "  v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=   " + vec.Signature + " "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := verifier.Verify(context.Background(), swVectorRequest(t, vec, tt.header), []byte(vec.Body)); err != nil {
				t.Errorf("Verify: %v", err)
			}
		})
	}
}

// TestStandardWebhooksSignerKeysFitTheVerifier: the verifier reads at most
// 16 signatures from a header, at most 4 of them v1a, so the signer takes
// at most 16 keys, at most 4 of them whsk_. With 16 (a long rotation
// overlap, both kinds), what it signs verifies with its last key of each
// kind alone; a 17th key, or a 5th whsk_ one, is refused when the signer
// is built, as config_invalid, not left to make every request
// unverifiable.
func TestStandardWebhooksSignerKeysFitTheVerifier(t *testing.T) {
	t.Parallel()
	var signing, verifying []StandardWebhooksKey
	for i := range maxSWSignatures - maxSWAsymmetric {
		secret, private, public := swTestKeys(t, strconv.Itoa(i))
		signing = append(signing, secret)
		verifying = append(verifying, secret)
		if i < maxSWAsymmetric {
			signing = append(signing, private)
			verifying = append(verifying, public)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	m := Message{ID: "msg_1", Body: []byte(`{"id":"msg_1"}`), Time: now}
	req := signSW(t, signing, m)
	if n := len(strings.Fields(req.Header.Get(headerWebhookSignature))); n != maxSWSignatures {
		t.Fatalf("%d signatures, want %d", n, maxSWSignatures)
	}
	lastPublic := verifying[2*maxSWAsymmetric-1]
	for _, last := range []StandardWebhooksKey{verifying[len(verifying)-1], lastPublic} {
		if _, err := newSWVerifier(t, func() time.Time { return now }, last).Verify(context.Background(), req, m.Body); err != nil {
			t.Errorf("verifier holding the signer's last %s: %v", last.kindName(), err)
		}
	}

	more, morePrivate, _ := swTestKeys(t, "17")
	if _, err := NewStandardWebhooksSigner(append(signing, more)...); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf("signer with %d keys: err = %v, want config_invalid", len(signing)+1, err)
	}
	if _, err := NewStandardWebhooksSigner(append(signing[1:], morePrivate)...); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf("signer with %d whsk_ keys: err = %v, want config_invalid", maxSWAsymmetric+1, err)
	}
}

// swTestKeys returns fresh keys: a whsec secret, a whsk private key and its
// whpk public key.
func swTestKeys(t *testing.T, id string) (secret, private, public StandardWebhooksKey) {
	t.Helper()
	var err error
	if secret, err = ParseStandardWebhooksKey(id+"-hmac", NewStandardWebhooksSecret()); err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	if private, err = ParseStandardWebhooksKey(id+"-ed", prefixStandardWebhooksPrivateKey+base64.StdEncoding.EncodeToString(priv.Seed())); err != nil {
		t.Fatal(err)
	}
	if public, err = ParseStandardWebhooksKey(id+"-ed", prefixStandardWebhooksPublicKey+base64.StdEncoding.EncodeToString(pub)); err != nil {
		t.Fatal(err)
	}
	return secret, private, public
}

func signSW(t *testing.T, keys []StandardWebhooksKey, m Message) *http.Request {
	t.Helper()
	signer, err := NewStandardWebhooksSigner(keys...)
	if err != nil {
		t.Fatal(err)
	}
	req := newRequest(t, http.MethodPost, "https://receiver.example/hook", nil, m.Body)
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, m); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	return req
}

func TestStandardWebhooksRoundTrip(t *testing.T) {
	t.Parallel()
	secret, private, public := swTestKeys(t, "k")
	now := time.Unix(1_700_000_000, 0)
	m := Message{ID: "ntf_01HX", Body: []byte(`{"a":1}`), Time: now}

	tests := []struct {
		name      string
		sign      []StandardWebhooksKey
		verify    []StandardWebhooksKey
		wantKeyID string
		wantSigs  int
	}{
		{"v1", []StandardWebhooksKey{secret}, []StandardWebhooksKey{secret}, "k-hmac", 1},
		{"v1a", []StandardWebhooksKey{private}, []StandardWebhooksKey{public}, "k-ed", 1},
		{"v1 and v1a, verified by v1a", []StandardWebhooksKey{secret, private}, []StandardWebhooksKey{public}, "k-ed", 2},
		{"v1 and v1a, verified by v1", []StandardWebhooksKey{secret, private}, []StandardWebhooksKey{secret}, "k-hmac", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := signSW(t, tt.sign, m)
			if got := len(strings.Split(req.Header.Get(headerWebhookSignature), " ")); got != tt.wantSigs {
				t.Errorf("%d signatures, want %d", got, tt.wantSigs)
			}
			p, err := newSWVerifier(t, clockAt(now.Unix()), tt.verify...).Verify(context.Background(), req, m.Body)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p.KeyID != tt.wantKeyID || p.MessageID != m.ID {
				t.Errorf("KeyID, MessageID = %q, %q; want %q, %q", p.KeyID, p.MessageID, tt.wantKeyID, m.ID)
			}
			tampered := append([]byte(nil), m.Body...)
			tampered[len(tampered)-2] = '2'
			_, err = newSWVerifier(t, clockAt(now.Unix()), tt.verify...).Verify(context.Background(), req, tampered)
			wantReject(t, err, courier.CodeSignatureMismatch)
		})
	}
}

func TestStandardWebhooksRotation(t *testing.T) {
	t.Parallel()
	oldSecret, oldPrivate, oldPublic := swTestKeys(t, "old")
	newSecret, newPrivate, newPublic := swTestKeys(t, "new")
	now := time.Unix(1_700_000_000, 0)
	m := Message{ID: "ntf_rot", Body: []byte(`{}`), Time: now}

	tests := []struct {
		name    string
		sign    []StandardWebhooksKey
		verify  []StandardWebhooksKey
		wantKey string // "" means rejected
	}{
		{"v1 new key, verifier holds old and new", []StandardWebhooksKey{newSecret}, []StandardWebhooksKey{oldSecret, newSecret}, "new-hmac"},
		{"v1 signed with both, verifier holds old", []StandardWebhooksKey{newSecret, oldSecret}, []StandardWebhooksKey{oldSecret}, "old-hmac"},
		{"v1 new key, old retired", []StandardWebhooksKey{oldSecret}, []StandardWebhooksKey{newSecret}, ""},
		{"v1a new key, verifier holds old and new", []StandardWebhooksKey{newPrivate}, []StandardWebhooksKey{oldPublic, newPublic}, "new-ed"},
		{"v1a old key, old retired", []StandardWebhooksKey{oldPrivate}, []StandardWebhooksKey{newPublic}, ""},
		{"v1a key does not verify v1 signature", []StandardWebhooksKey{newSecret}, []StandardWebhooksKey{newPublic}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := signSW(t, tt.sign, m)
			p, err := newSWVerifier(t, clockAt(now.Unix()), tt.verify...).Verify(context.Background(), req, m.Body)
			if tt.wantKey == "" {
				wantReject(t, err, courier.CodeSignatureMismatch)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p.KeyID != tt.wantKey {
				t.Errorf("KeyID = %q, want %q", p.KeyID, tt.wantKey)
			}
		})
	}
}

// TestStandardWebhooksSignerTakesTwoKeysUnderOneName: a signer's keys
// may share an id. The wire carries none, and the receiver names its
// keys itself: a sender whose SignerFor name ("orders") covers the old
// and the new secret during a rotation signs with both, and a receiver
// holding either, under its own ids, verifies the request. (A signer
// that refused such keys failed every delivery a SignerFor built it for,
// for good: config_invalid.)
func TestStandardWebhooksSignerTakesTwoKeysUnderOneName(t *testing.T) {
	t.Parallel()
	oldText, newText := NewStandardWebhooksSecret(), NewStandardWebhooksSecret()
	key := func(id, text string) StandardWebhooksKey {
		t.Helper()
		k, err := ParseStandardWebhooksKey(id, text)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Unix(1_700_000_000, 0)
	m := Message{ID: "ntf_name", Body: []byte(`{}`), Time: now}
	req := signSW(t, []StandardWebhooksKey{key("orders", newText), key("orders", oldText)}, m)
	for _, held := range []StandardWebhooksKey{key("r-old", oldText), key("r-new", newText)} {
		p, err := newSWVerifier(t, clockAt(now.Unix()), held).Verify(context.Background(), req, m.Body)
		if err != nil || p.KeyID != held.ID() {
			t.Fatalf("a receiver holding %s: %+v, %v; want it verified under its own id", held.ID(), p, err)
		}
	}
}

func TestStandardWebhooksTolerance(t *testing.T) {
	t.Parallel()
	secret, _, _ := swTestKeys(t, "k")
	const ts = 1_700_000_000
	m := Message{ID: "ntf_t", Body: []byte(`{}`), Time: time.Unix(ts, 0)}
	req := signSW(t, []StandardWebhooksKey{secret}, m)

	tests := []struct {
		name      string
		now       int64
		tolerance time.Duration
		ok        bool
	}{
		{"same second", ts, 0, true},
		{"5 min late", ts + 300, 0, true},
		{"5 min early", ts - 300, 0, true},
		{"stale", ts + 301, 0, false},
		{"future", ts - 301, 0, false},
		{"custom tolerance stale", ts + 61, time.Minute, false},
		{"custom tolerance ok", ts + 60, time.Minute, true},
		{"long tolerance", ts + 3600, time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{
				Sender: "s", Keys: []StandardWebhooksKey{secret}, Tolerance: tt.tolerance, Now: clockAt(tt.now),
			})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(context.Background(), req, m.Body)
			if tt.ok {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			wantReject(t, err, courier.CodeSignatureTimestamp)
		})
	}
}

func TestStandardWebhooksHeaders(t *testing.T) {
	t.Parallel()
	secret, _, _ := swTestKeys(t, "k")
	const ts = 1_700_000_000
	body := []byte(`{"x":true}`)
	good := signSW(t, []StandardWebhooksKey{secret}, Message{ID: "ntf_h", Body: body, Time: time.Unix(ts, 0)})
	sig := good.Header.Get(headerWebhookSignature)
	verifier := newSWVerifier(t, clockAt(ts), secret)

	tests := []struct {
		name   string
		mutate func(h http.Header)
		code   courier.Code
	}{
		{"missing id", func(h http.Header) { h.Del(headerWebhookID) }, courier.CodeSignatureMissing},
		{"missing timestamp", func(h http.Header) { h.Del(headerWebhookTimestamp) }, courier.CodeSignatureMissing},
		{"missing signature", func(h http.Header) { h.Del(headerWebhookSignature) }, courier.CodeSignatureMissing},
		{"empty signature", func(h http.Header) { h.Set(headerWebhookSignature, "") }, courier.CodeSignatureMissing},
		{"blank signature", func(h http.Header) { h.Set(headerWebhookSignature, "   ") }, courier.CodeSignatureMissing},
		{"repeated signature lines", func(h http.Header) { h.Add(headerWebhookSignature, sig) }, courier.CodeSignatureMalformed},
		{"signature split over two lines", func(h http.Header) {
			h.Set(headerWebhookSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
			h.Add(headerWebhookSignature, sig)
		}, courier.CodeSignatureMalformed},
		{"repeated id", func(h http.Header) { h.Add(headerWebhookID, "ntf_other") }, courier.CodeSignatureMalformed},
		{"repeated timestamp", func(h http.Header) { h.Add(headerWebhookTimestamp, strconv.Itoa(ts)) }, courier.CodeSignatureMalformed},
		{"timestamp not a number", func(h http.Header) { h.Set(headerWebhookTimestamp, "17e8") }, courier.CodeSignatureMalformed},
		{"timestamp signed", func(h http.Header) { h.Set(headerWebhookTimestamp, "+1700000000") }, courier.CodeSignatureMalformed},
		{"timestamp negative", func(h http.Header) { h.Set(headerWebhookTimestamp, "-1") }, courier.CodeSignatureMalformed},
		{"timestamp huge", func(h http.Header) { h.Set(headerWebhookTimestamp, "99999999999999999999") }, courier.CodeSignatureMalformed},
		{"id with space", func(h http.Header) { h.Set(headerWebhookID, "ntf h") }, courier.CodeSignatureMalformed},
		{"id too long", func(h http.Header) { h.Set(headerWebhookID, strings.Repeat("a", maxWebhookIDBytes+1)) }, courier.CodeSignatureMalformed},
		{"other id", func(h http.Header) { h.Set(headerWebhookID, "ntf_other") }, courier.CodeSignatureMismatch},
		{"signature header too long", func(h http.Header) { h.Set(headerWebhookSignature, sig+" "+strings.Repeat("v", maxHeaderBytes)) }, courier.CodeSignatureMalformed},
		{"too many signatures", func(h http.Header) { h.Set(headerWebhookSignature, strings.Repeat("v1,AAAA ", maxSWSignatures)+sig) }, courier.CodeSignatureMalformed},
		{"too many v1a signatures", func(h http.Header) {
			h.Set(headerWebhookSignature, strings.Repeat("v1a,"+base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))+" ", maxSWAsymmetric+1)+sig)
		}, courier.CodeSignatureMalformed},
		{"unpadded base64", func(h http.Header) { h.Set(headerWebhookSignature, strings.TrimRight(sig, "=")) }, courier.CodeSignatureMismatch},
		{"no version", func(h http.Header) { h.Set(headerWebhookSignature, strings.TrimPrefix(sig, "v1,")) }, courier.CodeSignatureMismatch},
		{"version upper case", func(h http.Header) { h.Set(headerWebhookSignature, "V1"+strings.TrimPrefix(sig, "v1")) }, courier.CodeSignatureMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := good.Clone(context.Background())
			tt.mutate(req.Header)
			_, err := verifier.Verify(context.Background(), req, body)
			wantReject(t, err, tt.code)
		})
	}
	// The unmutated request passes, so every case above fails for its own reason.
	if _, err := verifier.Verify(context.Background(), good, body); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}

func TestParseStandardWebhooksKey(t *testing.T) {
	t.Parallel()
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 7
	priv := ed25519.NewKeyFromSeed(seed)
	badPriv := append([]byte(nil), priv...)
	badPriv[63] ^= 1

	tests := []struct {
		name    string
		encoded string
		ok      bool
	}{
		{"secret 24 bytes", "whsec_" + b64(24), true},
		{"secret 32 bytes", "whsec_" + b64(32), true},
		{"secret 64 bytes", "whsec_" + b64(64), true},
		{"secret 23 bytes", "whsec_" + b64(23), false},
		{"secret 65 bytes", "whsec_" + b64(65), false},
		{"secret empty", "whsec_", false},
		{"secret unpadded", "whsec_" + strings.TrimRight(b64(25), "="), false},
		{"secret url-safe alphabet", "whsec_" + strings.Repeat("_-", 16), false},
		{"secret with whitespace", "whsec_ " + b64(24), false},
		{"secret with newline", "whsec_" + b64(24) + "\n", false},
		{"no prefix", b64(32), false},
		{"wrong prefix case", "WHSEC_" + b64(32), false},
		{"private seed", "whsk_" + base64.StdEncoding.EncodeToString(seed), true},
		{"private seed and public", "whsk_" + base64.StdEncoding.EncodeToString(priv), true},
		{"private public half mismatch", "whsk_" + base64.StdEncoding.EncodeToString(badPriv), false},
		{"private 31 bytes", "whsk_" + b64(31), false},
		{"private 33 bytes", "whsk_" + b64(33), false},
		{"public 32 bytes", "whpk_" + base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)), true},
		{"public 31 bytes", "whpk_" + b64(31), false},
		{"public 64 bytes", "whpk_" + b64(64), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k, err := ParseStandardWebhooksKey("", tt.encoded)
			if tt.ok {
				if err != nil {
					t.Fatalf("ParseStandardWebhooksKey: %v", err)
				}
				if k.ID() == "" {
					t.Error("empty fingerprint id")
				}
				return
			}
			if err == nil {
				t.Fatal("parsed; want an error")
			}
			if body, _ := strings.CutPrefix(tt.encoded, "whsec_"); len(body) > 8 && strings.Contains(err.Error(), body) {
				t.Errorf("error %q contains the key", err)
			}
		})
	}
}

func TestStandardWebhooksKeyIDs(t *testing.T) {
	t.Parallel()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	private, _ := ParseStandardWebhooksKey("", prefixStandardWebhooksPrivateKey+base64.StdEncoding.EncodeToString(priv.Seed()))
	public, _ := ParseStandardWebhooksKey("", prefixStandardWebhooksPublicKey+base64.StdEncoding.EncodeToString(pub))
	if private.ID() != public.ID() || !strings.HasPrefix(public.ID(), "ed25519:") {
		t.Errorf("private id %q, public id %q: want the same ed25519 fingerprint", private.ID(), public.ID())
	}
	if got := private.Public().ID(); got != private.ID() {
		t.Errorf("Public().ID() = %q, want %q", got, private.ID())
	}
	a, _ := ParseStandardWebhooksKey("", "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")))
	b, _ := ParseStandardWebhooksKey("", "whsec_"+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdeF")))
	if a.ID() == b.ID() || !strings.HasPrefix(a.ID(), "whsec:") {
		t.Errorf("secret fingerprints %q and %q", a.ID(), b.ID())
	}
}

func TestStandardWebhooksConfig(t *testing.T) {
	t.Parallel()
	secret, private, public := swTestKeys(t, "k")

	signerTests := []struct {
		name string
		keys []StandardWebhooksKey
		ok   bool
	}{
		{"secret and private", []StandardWebhooksKey{secret, private}, true},
		{"no keys", nil, false},
		{"public key", []StandardWebhooksKey{public}, false},
		{"zero key", []StandardWebhooksKey{{}}, false},
	}
	for _, tt := range signerTests {
		t.Run("signer "+tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewStandardWebhooksSigner(tt.keys...)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}

	verifierTests := []struct {
		name string
		cfg  StandardWebhooksVerifierConfig
		ok   bool
	}{
		{"all kinds", StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{secret, private, public}}, true},
		{"no sender", StandardWebhooksVerifierConfig{Keys: []StandardWebhooksKey{secret}}, false},
		{"no keys", StandardWebhooksVerifierConfig{Sender: "s"}, false},
		{"zero key", StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{{}}}, false},
		{"negative tolerance", StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{secret}, Tolerance: -time.Second}, false},
		{"sub-second tolerance", StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{secret}, Tolerance: time.Millisecond}, false},
	}
	for _, tt := range verifierTests {
		t.Run("verifier "+tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := NewStandardWebhooksVerifier(tt.cfg)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok=%v", err, tt.ok)
			}
		})
	}

	d := StandardWebhooksVerifierConfig{}.withDefaults()
	if d.Tolerance != defaultStandardWebhooksTolerance || d.Now == nil {
		t.Errorf("withDefaults = %+v", d)
	}
}

func TestStandardWebhooksSignErrors(t *testing.T) {
	t.Parallel()
	secret, _, _ := swTestKeys(t, "k")
	signer, err := NewStandardWebhooksSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    Message
	}{
		{"empty id", Message{Time: time.Unix(1, 0)}},
		{"id with newline", Message{ID: "a\nb", Time: time.Unix(1, 0)}},
		{"zero time", Message{ID: "ntf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := newRequest(t, http.MethodPost, "https://receiver.example/", nil, nil)
			err := signer.Sign(req, tt.m)
			if courier.CodeOf(err) != courier.CodeSigningFailed {
				t.Fatalf("Sign = %v, want %s", err, courier.CodeSigningFailed)
			}
			if errors.Is(err, courier.CodeSignatureInvalid) {
				t.Error("a signing failure is not a verification failure")
			}
			if len(req.Header) != 0 {
				t.Errorf("headers set on failure: %v", req.Header)
			}
		})
	}
}

// svixSign signs the way Svix does, written out here rather than through
// the signer: HMAC-SHA256, keyed with the base64 of the secret after
// "whsec_", over msg_id.timestamp.body, sent as "v1," and its standard
// base64.
func svixSign(t *testing.T, secret, msgID string, ts int64, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", msgID, ts)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// TestStandardWebhooksSvixBrand: a request signed and sent the way Svix
// sends it (svix-id, svix-timestamp, svix-signature) verifies like its
// webhook-* twin, with the signed id as Principal.MessageID. A request
// carries one brand: both brands verify only when they say exactly the
// same thing; any difference is malformed, never a fallback from one brand
// to the other.
func TestStandardWebhooksSvixBrand(t *testing.T) {
	t.Parallel()
	vec := loadSWVectors(t).Sign[0]
	body := []byte(vec.Body)
	sig := svixSign(t, vec.Secret, vec.MsgID, vec.Timestamp, body)
	if sig != vec.Signature {
		t.Fatalf("Svix's signing of %s gives %q, the vector says %q", vec.ID, sig, vec.Signature)
	}
	ts := strconv.FormatInt(vec.Timestamp, 10)
	other := svixSign(t, vec.Secret, "msg_other", vec.Timestamp, body)
	key, _ := swVectorKeys(t, vec)
	verifier := newSWVerifier(t, clockAt(vec.Timestamp), key)
	svix := map[string][]string{headerSvixID: {vec.MsgID}, headerSvixTimestamp: {ts}, headerSvixSignature: {sig}}
	webhook := map[string][]string{headerWebhookID: {vec.MsgID}, headerWebhookTimestamp: {ts}, headerWebhookSignature: {sig}}
	merge := func(sets ...map[string][]string) map[string][]string {
		out := map[string][]string{}
		for _, set := range sets {
			for k, v := range set {
				out[k] = v
			}
		}
		return out
	}

	tests := []struct {
		name    string
		headers map[string][]string
		body    []byte
		now     int64
		code    courier.Code // "" means verified
	}{
		{"svix brand", svix, body, vec.Timestamp, ""},
		{"svix brand, upper-case names", map[string][]string{"Svix-Id": {vec.MsgID}, "SVIX-TIMESTAMP": {ts}, "Svix-Signature": {sig}}, body, vec.Timestamp, ""},
		{"webhook brand", webhook, body, vec.Timestamp, ""},
		{"both brands, identical", merge(webhook, svix), body, vec.Timestamp, ""},
		{"svix brand, body changed", svix, []byte(`{"test": 0}`), vec.Timestamp, courier.CodeSignatureMismatch},
		{"svix brand, stale", svix, body, vec.Timestamp + 301, courier.CodeSignatureTimestamp},
		{"svix brand, another id", merge(svix, map[string][]string{headerSvixID: {"msg_other"}}), body, vec.Timestamp, courier.CodeSignatureMismatch},
		{"svix brand, no signature", merge(svix, map[string][]string{headerSvixSignature: nil}), body, vec.Timestamp, courier.CodeSignatureMissing},
		{"svix brand, id repeated", merge(svix, map[string][]string{headerSvixID: {vec.MsgID, vec.MsgID}}), body, vec.Timestamp, courier.CodeSignatureMalformed},
		{"both brands, ids differ", merge(webhook, svix, map[string][]string{headerSvixID: {"msg_other"}, headerSvixSignature: {other}}), body, vec.Timestamp, courier.CodeSignatureMalformed},
		{"both brands, timestamps differ", merge(webhook, svix, map[string][]string{headerWebhookTimestamp: {"1614265331"}}), body, vec.Timestamp, courier.CodeSignatureMalformed},
		{"both brands, signatures differ", merge(webhook, svix, map[string][]string{headerWebhookSignature: {"v1,AAAA"}}), body, vec.Timestamp, courier.CodeSignatureMalformed},
		{"both brands, one has a second signature line", merge(webhook, svix, map[string][]string{headerSvixSignature: {sig, sig}}), body, vec.Timestamp, courier.CodeSignatureMalformed},
		{"brands split across the headers", map[string][]string{headerSvixID: {vec.MsgID}, headerWebhookTimestamp: {ts}, headerWebhookSignature: {sig}}, body, vec.Timestamp, courier.CodeSignatureMalformed},
		{"svix id beside a webhook triple", merge(webhook, map[string][]string{headerSvixID: {vec.MsgID}}), body, vec.Timestamp, courier.CodeSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := newRequest(t, http.MethodPost, "https://receiver.example/hook", tt.headers, tt.body)
			v := verifier
			if tt.now != vec.Timestamp {
				v = newSWVerifier(t, clockAt(tt.now), key)
			}
			p, err := v.Verify(context.Background(), req, tt.body)
			if tt.code != "" {
				wantReject(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if p != (Principal{Sender: "sender", KeyID: key.ID(), Scheme: SchemeStandardWebhooks, MessageID: vec.MsgID}) {
				t.Errorf("principal = %+v", p)
			}
		})
	}
}

// TestNewStandardWebhooksKeyPair: the pair parses, the private half signs
// and the public half verifies (v1a), and each call is a new pair.
func TestNewStandardWebhooksKeyPair(t *testing.T) {
	t.Parallel()
	priv, pub := NewStandardWebhooksKeyPair()
	priv2, _ := NewStandardWebhooksKeyPair()
	if priv == priv2 || !strings.HasPrefix(priv, "whsk_") || !strings.HasPrefix(pub, "whpk_") {
		t.Fatalf("pair %.9s… %.9s…", priv, pub)
	}
	sk, err := ParseStandardWebhooksKey("k", priv)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParseStandardWebhooksKey("k", pub)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := NewStandardWebhooksSigner(sk)
	verifier, _ := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{pk}})
	body := []byte(`{"a":1}`)
	req, _ := http.NewRequest(http.MethodPost, "https://r.example/", bytes.NewReader(body))
	if err := signer.Sign(req, Message{ID: "n-1", Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(req.Header.Get("webhook-signature"), "v1a,") {
		t.Fatalf("signature %q is not v1a", req.Header.Get("webhook-signature"))
	}
	if _, err := verifier.Verify(t.Context(), req, body); err != nil {
		t.Fatalf("the public half does not verify the private half's signature: %v", err)
	}
}

// BenchmarkStandardWebhooksUnsignedV1a prices what anyone who knows the
// time can ask of a verifier holding 4 whpk_ keys: a 1 MiB body under a
// header of junk v1a signatures, each an Ed25519 check over the body per
// key. At the cap of 4 the request costs 16 checks; a header of 16, which
// cost 64 before the cap, is refused before any.
func BenchmarkStandardWebhooksUnsignedV1a(b *testing.B) {
	var keys []StandardWebhooksKey
	for i := range 4 {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			b.Fatal(err)
		}
		k, err := ParseStandardWebhooksKey(strconv.Itoa(i), prefixStandardWebhooksPublicKey+base64.StdEncoding.EncodeToString(pub))
		if err != nil {
			b.Fatal(err)
		}
		keys = append(keys, k)
	}
	now := time.Unix(1_800_000_000, 0)
	v, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "sender", Keys: keys, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 1<<20)
	junk := "v1a," + base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	for _, n := range []int{1, maxSWAsymmetric, maxSWSignatures} {
		b.Run(strconv.Itoa(n)+" signatures", func(b *testing.B) {
			req, err := http.NewRequest(http.MethodPost, "https://receiver.example/", nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set(headerWebhookID, "msg_1")
			req.Header.Set(headerWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
			req.Header.Set(headerWebhookSignature, strings.TrimSpace(strings.Repeat(junk+" ", n)))
			for b.Loop() {
				if _, err := v.Verify(context.Background(), req, body); !errors.Is(err, courier.CodeSignatureInvalid) {
					b.Fatalf("Verify = %v, want a signature failure", err)
				}
			}
		})
	}
}

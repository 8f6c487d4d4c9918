package signature

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

// TestConfigErrorsAreErrConfigInvalid: every constructor and every parser
// of configuration refuses bad input with a case of courier.CodeConfigInvalid
// (code config_invalid) whose message names what is wrong, like the store,
// client and handler configs do.
func TestConfigErrorsAreErrConfigInvalid(t *testing.T) {
	t.Parallel()
	swSecret, swPrivate, swPublic := swTestKeys(t, "k")
	priv, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.Public()
	shared, err := ParseSecret("s1", "0123456789abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(context.Context, string) (JWK, bool, error) { return JWK{}, false, nil }
	const origin = "https://buyer.example.com"
	const edX = "y7tTfeqazsFeTn3ccCzQlcJ4qFWuYsu-JkJAcfc9VoA"

	tests := []struct {
		name string
		call func() error
		want string // what the message must name
	}{
		// Standard Webhooks.
		{"sw signer without keys", func() error {
			_, err := NewStandardWebhooksSigner()
			return err
		}, "NewStandardWebhooksSigner: no keys"},
		{"sw signer with a zero key", func() error {
			_, err := NewStandardWebhooksSigner(StandardWebhooksKey{})
			return err
		}, "key 0"},
		{"sw signer with a public key", func() error {
			_, err := NewStandardWebhooksSigner(swPrivate, swPublic)
			return err
		}, "key 1"},
		{"sw signer with more keys than a verifier reads", func() error {
			keys := make([]StandardWebhooksKey, 17)
			for i := range keys {
				keys[i] = swSecret
			}
			_, err := NewStandardWebhooksSigner(keys...)
			return err
		}, "NewStandardWebhooksSigner: 17 keys"},
		{"sw verifier without sender", func() error {
			_, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Keys: []StandardWebhooksKey{swSecret}})
			return err
		}, "StandardWebhooksVerifierConfig.Sender"},
		{"sw verifier without keys", func() error {
			_, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s"})
			return err
		}, "StandardWebhooksVerifierConfig.Keys"},
		{"sw verifier with a zero key", func() error {
			_, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{swSecret, {}}})
			return err
		}, "StandardWebhooksVerifierConfig.Keys[1]"},
		{"sw verifier with a key id twice", func() error {
			other, err := ParseStandardWebhooksKey(swSecret.ID(), NewStandardWebhooksSecret())
			if err != nil {
				return err
			}
			_, err = NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{swSecret, other}})
			return err
		}, `StandardWebhooksVerifierConfig.Keys[1]: key id "k-hmac" appears twice`},
		{"sw verifier with a sub-second tolerance", func() error {
			_, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{swSecret}, Tolerance: time.Millisecond})
			return err
		}, "StandardWebhooksVerifierConfig.Tolerance"},
		{"sw key without prefix", func() error {
			_, err := ParseStandardWebhooksKey("", base64.StdEncoding.EncodeToString(make([]byte, 32)))
			return err
		}, "standard webhooks key"},
		{"sw secret too short", func() error {
			_, err := ParseStandardWebhooksKey("", prefixStandardWebhooksSecret+base64.StdEncoding.EncodeToString(make([]byte, 8)))
			return err
		}, "standard webhooks key"},
		{"sw key left unset", func() error {
			_, err := ParseStandardWebhooksKey("", "")
			return err
		}, "standard webhooks key: key is empty"},
		{"sw key read with its file's newline", func() error {
			_, err := ParseStandardWebhooksKey("", NewStandardWebhooksSecret()+"\n")
			return err
		}, "white space around it"},
		{"sw key pasted with a space before it", func() error {
			_, err := ParseStandardWebhooksKey("", " "+NewStandardWebhooksSecret())
			return err
		}, "white space around it"},

		// RFC 9421.
		{"rfc9421 signer with a public key", func() error {
			_, err := NewRFC9421Signer(RFC9421SignerConfig{Key: pub})
			return err
		}, "RFC9421SignerConfig.Key"},
		{"rfc9421 signer with a long window", func() error {
			_, err := NewRFC9421Signer(RFC9421SignerConfig{Key: priv, Window: time.Hour})
			return err
		}, "RFC9421SignerConfig.Window"},
		{"rfc9421 verifier without sender", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Keys: []JWK{pub}, Origin: origin})
			return err
		}, "RFC9421VerifierConfig.Sender"},
		{"rfc9421 verifier without keys", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Origin: origin})
			return err
		}, "RFC9421VerifierConfig.Keys"},
		{"rfc9421 verifier with keys and lookup", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, LookupKey: lookup, Origin: origin})
			return err
		}, "LookupKey"},
		{"rfc9421 verifier with a zero key", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub, {}}, Origin: origin})
			return err
		}, "RFC9421VerifierConfig.Keys[1]"},
		{"rfc9421 verifier with a kid twice", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub, pub}, Origin: origin})
			return err
		}, "RFC9421VerifierConfig.Keys[1]"},
		{"rfc9421 verifier with a negative skew", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, Origin: origin, ClockSkew: -time.Second})
			return err
		}, "RFC9421VerifierConfig.ClockSkew"},
		{"rfc9421 verifier without origin", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}})
			return err
		}, "RFC9421VerifierConfig.Origin"},
		{"rfc9421 verifier with origin and trusting Host", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, Origin: origin, TrustRequestHost: true})
			return err
		}, "RFC9421VerifierConfig.Origin and TrustRequestHost"},
		{"rfc9421 verifier with an origin with a path", func() error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{pub}, Origin: origin + "/hook"})
			return err
		}, "RFC9421VerifierConfig.Origin"},
		{"jwk not JSON", func() error {
			_, err := ParseJWK([]byte("kid"))
			return err
		}, "jwk"},
		{"jwk with a bad x", func() error {
			_, err := ParseJWK([]byte(`{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX[:40] + `"}`))
			return err
		}, `jwk "a"`},
		{"jwk set with a malformed key", func() error {
			_, err := ParseJWKSet([]byte(`{"keys":[{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX[:40] + `"}]}`))
			return err
		}, `jwk set: keys[0]: jwk "a"`},
		{"jwk set with no key of a supported type", func() error {
			_, err := ParseJWKSet([]byte(`{"keys":[{"kid":"a","kty":"RSA"}]}`))
			return err
		}, "jwk set: no key"},
		{"jwk set with a kid twice", func() error {
			k := `{"kid":"a","kty":"OKP","crv":"Ed25519","x":"` + edX + `"}`
			_, err := ParseJWKSet([]byte(`{"keys":[` + k + `,` + k + `]}`))
			return err
		}, "jwk set: key id"},
		{"jwk set empty", func() error {
			_, err := ParseJWKSet([]byte(`{"keys":[]}`))
			return err
		}, "jwk set"},
		{"generated jwk without kid", func() error {
			_, err := GenerateJWK("", AlgEd25519)
			return err
		}, "jwk: key id"},
		{"generated jwk of an unknown alg", func() error {
			_, err := GenerateJWK("k", "rsa-pss-sha512")
			return err
		}, "jwk: alg"},

		// AdCP legacy HMAC and bearer.
		{"adcp hmac signer without secret", func() error {
			_, err := NewAdCPHMACSigner(Secret{})
			return err
		}, "NewAdCPHMACSigner"},
		{"adcp hmac verifier without sender", func() error {
			_, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Secrets: []Secret{shared}})
			return err
		}, "AdCPHMACVerifierConfig.Sender"},
		{"adcp hmac verifier without secrets", func() error {
			_, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s"})
			return err
		}, "AdCPHMACVerifierConfig.Secrets"},
		{"adcp hmac verifier with a zero secret", func() error {
			_, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{shared, {}}})
			return err
		}, "AdCPHMACVerifierConfig.Secrets[1]"},
		{"adcp hmac verifier with a secret id twice", func() error {
			other, err := ParseSecret("s1", "abcdefghijklmnopqrstuvwxyz0123456789")
			if err != nil {
				return err
			}
			_, err = NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{shared, other}})
			return err
		}, `AdCPHMACVerifierConfig.Secrets[1]: secret id "s1" appears twice`},
		{"adcp hmac verifier with a sub-second tolerance", func() error {
			_, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{shared}, Tolerance: time.Millisecond})
			return err
		}, "AdCPHMACVerifierConfig.Tolerance"},
		{"bearer signer without token", func() error {
			_, err := NewBearerSigner(Secret{})
			return err
		}, "NewBearerSigner"},
		{"bearer verifier without sender", func() error {
			_, err := NewBearerVerifier(BearerVerifierConfig{Tokens: []Secret{shared}})
			return err
		}, "BearerVerifierConfig.Sender"},
		{"bearer verifier without tokens", func() error {
			_, err := NewBearerVerifier(BearerVerifierConfig{Sender: "s"})
			return err
		}, "BearerVerifierConfig.Tokens"},
		{"bearer verifier with a zero token", func() error {
			_, err := NewBearerVerifier(BearerVerifierConfig{Sender: "s", Tokens: []Secret{{}}})
			return err
		}, "BearerVerifierConfig.Tokens[0]"},
		{"bearer verifier with a token id twice", func() error {
			other, err := ParseSecret("s1", "abcdefghijklmnopqrstuvwxyz0123456789")
			if err != nil {
				return err
			}
			_, err = NewBearerVerifier(BearerVerifierConfig{Sender: "s", Tokens: []Secret{shared, other}})
			return err
		}, `BearerVerifierConfig.Tokens[1]: secret id "s1" appears twice`},
		{"secret too short", func() error {
			_, err := ParseSecret("", "short")
			return err
		}, "secret"},
		{"secret of one character", func() error {
			_, err := ParseSecret("", strings.Repeat("a", minSecretBytes))
			return err
		}, "secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.call()
			if !errors.Is(err, courier.CodeConfigInvalid) {
				t.Fatalf("err = %v, want a case of CodeConfigInvalid", err)
			}
			if code := courier.CodeOf(err); code != courier.CodeConfigInvalid {
				t.Errorf("code = %s, want %s", code, courier.CodeConfigInvalid)
			}
			if errors.Is(err, courier.CodeSignatureInvalid) {
				t.Error("a configuration error is not a verification failure")
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "config_invalid: signature: ") || !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not start with the package or name %q", msg, tt.want)
			}
		})
	}
}

// TestVerifierSenderIsWhatAReceiverRecords: a verifier took a Sender of
// any length, but the receivers record Principal.Sender in their Inbox,
// which holds at most 256 bytes, so a receiver behind a verifier with a
// longer one refused every request from it (400 validation_failed, naming
// no field). Every verifier constructor refuses such a Sender with
// config_invalid naming the field, and takes one of 256 bytes.
func TestVerifierSenderIsWhatAReceiverRecords(t *testing.T) {
	t.Parallel()
	constructors := senderConstructors(t)
	refused := map[string]string{
		"257 bytes":       strings.Repeat("s", 257),
		"255 bytes and é": strings.Repeat("s", 255) + "é",
		"empty":           "",
	}
	for cfg, build := range constructors {
		t.Run(cfg, func(t *testing.T) {
			t.Parallel()
			for _, sender := range []string{strings.Repeat("s", 256), strings.Repeat("é", 128), "s"} {
				if err := build(sender); err != nil {
					t.Errorf("a Sender of %d bytes: %v", len(sender), err)
				}
			}
			for name, sender := range refused {
				err := build(sender)
				if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), cfg+".Sender") {
					t.Errorf("a Sender of %s: %v, want config_invalid naming %s.Sender", name, err, cfg)
				}
			}
			// An empty one is a Sender left out, by someone who may not
			// know what it is for: the error says.
			if err := build(""); err == nil || !strings.Contains(err.Error(), "dedupe") {
				t.Errorf("an empty Sender: %v, want an error that says what a Sender is", err)
			}
		})
	}
}

// TestVerifierSenderIsText: a verifier took a Sender with a NUL byte,
// another control character or bytes that are not UTF-8, and the
// receivers refused every request from it (the Inbox records no NUL and
// no invalid UTF-8). Every verifier constructor refuses such a Sender
// with config_invalid naming the field, as it refuses an overlong one,
// and takes text with spaces and letters of any script.
func TestVerifierSenderIsText(t *testing.T) {
	t.Parallel()
	refused := map[string]string{
		"NUL":          "acme\x00corp",
		"newline":      "acme\ncorp",
		"tab":          "acme\tcorp",
		"DEL":          "acme\x7fcorp",
		"C1 control":   "acme\u0085corp",
		"not UTF-8":    "acme\xffcorp",
		"cut rune":     "acme\xc3",
		"only a NUL":   "\x00",
		"escape first": "\x1b[31macme",
	}
	for cfg, build := range senderConstructors(t) {
		t.Run(cfg, func(t *testing.T) {
			t.Parallel()
			for _, sender := range []string{"Acme Corp", "Åcme café", "アクメ", "acme/eu-1:prod"} {
				if err := build(sender); err != nil {
					t.Errorf("the Sender %q: %v", sender, err)
				}
			}
			for name, sender := range refused {
				err := build(sender)
				if courier.CodeOf(err) != courier.CodeConfigInvalid || !strings.Contains(err.Error(), cfg+".Sender") {
					t.Errorf("a Sender with %s: %v, want config_invalid naming %s.Sender", name, err, cfg)
				}
			}
		})
	}
}

// senderConstructors builds, for each verifier config by its name, a
// verifier of that Sender, and returns the constructor's error.
func senderConstructors(t *testing.T) map[string]func(sender string) error {
	t.Helper()
	swSecret, _, _ := swTestKeys(t, "k")
	priv, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := ParseSecret("s1", "0123456789abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]func(sender string) error{
		"StandardWebhooksVerifierConfig": func(sender string) error {
			_, err := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: sender, Keys: []StandardWebhooksKey{swSecret}})
			return err
		},
		"RFC9421VerifierConfig": func(sender string) error {
			_, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: sender, Keys: []JWK{priv.Public()}, Origin: "https://buyer.example.com"})
			return err
		},
		"AdCPHMACVerifierConfig": func(sender string) error {
			_, err := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: sender, Secrets: []Secret{shared}})
			return err
		},
		"BearerVerifierConfig": func(sender string) error {
			_, err := NewBearerVerifier(BearerVerifierConfig{Sender: sender, Tokens: []Secret{shared}})
			return err
		},
	}
}

// TestSignFailuresNoRetryChangesWrapConfigInvalid: a Sign failure decided
// by the request or the signer (a URL RFC 9421 does not sign, a message
// id Standard Webhooks does not take, a time before 1970) is
// signing_failed and wraps courier.CodeConfigInvalid, which fails the
// delivery at once rather than retry it until its budget runs out.
func TestSignFailuresNoRetryChangesWrapConfigInvalid(t *testing.T) {
	t.Parallel()
	swSecret, _, _ := swTestKeys(t, "k")
	sw, err := NewStandardWebhooksSigner(swSecret)
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := GenerateJWK("k1", AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	rfc, err := NewRFC9421Signer(RFC9421SignerConfig{Key: jwk})
	if err != nil {
		t.Fatal(err)
	}
	shared, err := ParseSecret("s1", "0123456789abcdefghijklmnopqrstuvwxyz")
	if err != nil {
		t.Fatal(err)
	}
	hmac, err := NewAdCPHMACSigner(shared)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		signer Signer
		url    string
		m      Message
	}{
		{"rfc9421, plain http to a private address", rfc, "http://10.1.2.3:8080/hook", Message{ID: "n-1", Time: time.Now()}},
		{"standard webhooks, an id with a space", sw, "https://r.example/hook", Message{ID: "n 1", Time: time.Now()}},
		{"adcp hmac, before 1970", hmac, "https://r.example/hook", Message{ID: "n-1", Time: time.Unix(-1, 0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, tt.url, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			err = tt.signer.Sign(req, tt.m)
			if courier.CodeOf(err) != courier.CodeSigningFailed || !errors.Is(err, courier.CodeConfigInvalid) {
				t.Fatalf("Sign = %v; want signing_failed wrapping config_invalid", err)
			}
		})
	}
}

// TestSmallOrderEd25519PublicKeysAreRefused: an Ed25519 public key that
// encodes a point of small order (order dividing 8) is no one's key, and
// with it anyone forges signatures: R = identity, S = 0 verifies every
// message whose hash is a multiple of the point's order. Both public key
// parsers ("whpk_" and a JWK's x) refuse every encoding of those points,
// canonical or not and with either sign bit, as config_invalid, so a
// placeholder key such as 32 zero bytes cannot be configured; real keys,
// generated or from the conformance vectors, parse.
func TestSmallOrderEd25519PublicKeysAreRefused(t *testing.T) {
	t.Parallel()
	// The y coordinates of the 8 points of order dividing 8, computed from
	// the curve equation (and equal to libsodium's blocklist): 0 (order 4),
	// 1 (the identity), the two of the points of order 8, p-1 (order 2),
	// and the non-canonical p and p+1 (0 and 1 again); little-endian, sign
	// bit clear.
	smallOrder := []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	}
	forged := make([]byte, ed25519.SignatureSize)
	forged[0] = 1 // R = the identity point (y = 1), S = 0
	for _, h := range smallOrder {
		positive, err := hex.DecodeString(h)
		if err != nil || len(positive) != ed25519.PublicKeySize {
			t.Fatalf("%s: %v", h, err)
		}
		negative := slices.Clone(positive)
		negative[31] |= 0x80 // the other sign of x (for x = 0, a non-canonical -0)
		for _, pub := range [][]byte{positive, negative} {
			// Evidence the entry belongs: crypto/ed25519 takes it as a key
			// and accepts the forgery for some of these messages.
			forges := false
			for i := range 64 {
				if ed25519.Verify(pub, []byte("message "+strconv.Itoa(i)), forged) {
					forges = true
					break
				}
			}
			if !forges {
				t.Errorf("%x: no forgery verifies; is it of small order?", pub)
			}
			_, err := ParseStandardWebhooksKey("", "whpk_"+base64.StdEncoding.EncodeToString(pub))
			if !errors.Is(err, courier.CodeConfigInvalid) {
				t.Errorf("whpk_ of %x: err = %v, want config_invalid", pub, err)
			}
			jwk := `{"kid":"k","kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
			if _, err := ParseJWK([]byte(jwk)); !errors.Is(err, courier.CodeConfigInvalid) {
				t.Errorf("JWK with x = %x: err = %v, want config_invalid", pub, err)
			}
			if _, err := ParseJWKSet([]byte(`{"keys":[` + jwk + `]}`)); !errors.Is(err, courier.CodeConfigInvalid) {
				t.Errorf("JWK Set with x = %x: err = %v, want config_invalid", pub, err)
			}
			// A "whsk_" private key carrying it as its public half does
			// not match its seed (no seed derives a small-order point).
			seedAndPublic := append(make([]byte, ed25519.SeedSize), pub...)
			if _, err := ParseStandardWebhooksKey("", "whsk_"+base64.StdEncoding.EncodeToString(seedAndPublic)); !errors.Is(err, courier.CodeConfigInvalid) {
				t.Errorf("whsk_ with public half %x: err = %v, want config_invalid", pub, err)
			}
		}
	}

	// Real keys parse.
	var real []ed25519.PublicKey
	for range 256 {
		pub, _, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		real = append(real, pub)
	}
	for _, vec := range loadSWVectors(t).Sign {
		if vec.Ed25519Public != "" {
			raw, err := base64.StdEncoding.DecodeString(vec.Ed25519Public)
			if err != nil {
				t.Fatal(err)
			}
			real = append(real, raw)
		}
	}
	var rfc9421Vectors struct {
		Keys struct {
			Ed25519 struct {
				PublicPEM string `json:"public_pem"`
			} `json:"test-key-ed25519"`
		} `json:"keys"`
	}
	loadJSON(t, "testdata/rfc9421/vectors.json", &rfc9421Vectors)
	real = append(real, parsePEMKey(t, rfc9421Vectors.Keys.Ed25519.PublicPEM, x509.ParsePKIXPublicKey).(ed25519.PublicKey))
	if len(real) < 256+2 {
		t.Fatalf("%d keys, want the vectors' too", len(real))
	}
	for _, pub := range real {
		if _, err := ParseStandardWebhooksKey("", "whpk_"+base64.StdEncoding.EncodeToString(pub)); err != nil {
			t.Errorf("whpk_ of %x: %v", pub, err)
		}
		if _, err := ParseJWK([]byte(`{"kid":"k","kty":"OKP","crv":"Ed25519","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`)); err != nil {
			t.Errorf("JWK with x = %x: %v", pub, err)
		}
	}
	public, _ := webhookKeys(t) // AdCP's keys.json, each parsed by ParseJWK
	if len(public) == 0 {
		t.Fatal("no AdCP vector keys")
	}
}

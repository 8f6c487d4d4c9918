package signature

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// secretForms returns the ways a secret's bytes could show up in output.
func secretForms(raw []byte, encoded ...string) []string {
	forms := append([]string{
		string(raw),
		base64.StdEncoding.EncodeToString(raw),
		base64.RawURLEncoding.EncodeToString(raw),
		hex.EncodeToString(raw),
		fmt.Sprint(raw), // [1 2 3 …]
	}, encoded...)
	out := forms[:0]
	for _, f := range forms {
		if len(f) >= 8 { // shorter forms would match by chance
			out = append(out, f)
		}
	}
	return out
}

// leak formats v every way a program might print or log it and returns
// the first output that contains a form of the secret, or "".
func leak(v any, forms []string) string {
	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		outputs = append(outputs, fmt.Sprintf(verb, v), fmt.Sprintf(verb, []any{v}), fmt.Sprintf(verb, struct{ V any }{v}))
	}
	if s, ok := v.(fmt.Stringer); ok {
		outputs = append(outputs, s.String())
	}
	if e, ok := v.(error); ok {
		outputs = append(outputs, e.Error())
	}
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("msg", "v", v, slog.Any("any", v), slog.Group("g", "v", v))
		outputs = append(outputs, buf.String())
	}
	for _, out := range outputs {
		lower := strings.ToLower(out)
		for _, f := range forms {
			if strings.Contains(out, f) || strings.Contains(lower, strings.ToLower(f)) && isHexString(f) {
				return out
			}
		}
	}
	return ""
}

// TestLeakDetects checks the checker: plain secret-holding values leak.
func TestLeakDetects(t *testing.T) {
	t.Parallel()
	raw := []byte("0123456789abcdefghijklmnopqrstuv")
	forms := secretForms(raw)
	for _, v := range []any{
		raw,
		struct{ key []byte }{raw},
		&struct{ key string }{string(raw)},
		errors.New("bad key " + hex.EncodeToString(raw)),
	} {
		if leak(v, forms) == "" {
			t.Errorf("leak(%T) found nothing", v)
		}
	}
}

func isHexString(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

type redactItem struct {
	name string
	v    any
}

func TestSecretsNeverPrinted(t *testing.T) {
	t.Parallel()
	var cases []struct {
		forms []string
		items []redactItem
	}
	add := func(forms []string, items ...redactItem) {
		cases = append(cases, struct {
			forms []string
			items []redactItem
		}{forms, items})
	}

	// Standard Webhooks: a secret, a private key, its public half.
	rawSecret := []byte("0123456789abcdefghijklmnopqrstuv")
	encSecret := prefixStandardWebhooksSecret + base64.StdEncoding.EncodeToString(rawSecret)
	swSecret, err := ParseStandardWebhooksKey("", encSecret)
	if err != nil {
		t.Fatal(err)
	}
	seed := []byte("TESTSIGNINGKEYDONOTUSETHISFORANY")
	encPrivate := prefixStandardWebhooksPrivateKey + base64.StdEncoding.EncodeToString(seed)
	swPrivate, err := ParseStandardWebhooksKey("ed", encPrivate)
	if err != nil {
		t.Fatal(err)
	}
	swSigner, _ := NewStandardWebhooksSigner(swSecret, swPrivate)
	swVerifier, _ := NewStandardWebhooksVerifier(StandardWebhooksVerifierConfig{Sender: "s", Keys: []StandardWebhooksKey{swSecret, swPrivate}})
	add(append(secretForms(rawSecret, encSecret), secretForms(seed, encPrivate)...),
		redactItem{"whsec key", swSecret},
		redactItem{"whsk key", swPrivate},
		redactItem{"whsk key pointer", &swPrivate},
		redactItem{"signer keys", []StandardWebhooksKey{swSecret, swPrivate}},
		redactItem{"signer", swSigner},
		redactItem{"signer value", *swSigner.(*standardWebhooksSigner)},
		redactItem{"verifier", swVerifier},
		redactItem{"parse error", func() error { _, err := ParseStandardWebhooksKey("", encSecret+"x"); return err }()},
	)

	// AdCP legacy HMAC and bearer: one Secret type.
	rawShared := "adcp-shared-secret-0123456789abcdef"
	shared := adcpTestSecret(t, rawShared)
	hmacSigner, _ := NewAdCPHMACSigner(shared)
	hmacVerifier, _ := NewAdCPHMACVerifier(AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{shared}})
	bearerSigner, _ := NewBearerSigner(shared)
	bearerV, _ := NewBearerVerifier(BearerVerifierConfig{Sender: "s", Tokens: []Secret{shared}})
	add(secretForms([]byte(rawShared)),
		redactItem{"secret", shared},
		redactItem{"secret pointer", &shared},
		redactItem{"hmac signer", hmacSigner},
		redactItem{"hmac signer value", *hmacSigner.(*adcpHMACSigner)},
		redactItem{"hmac verifier", hmacVerifier},
		redactItem{"hmac verifier config", AdCPHMACVerifierConfig{Sender: "s", Secrets: []Secret{shared}}},
		redactItem{"bearer signer", bearerSigner},
		redactItem{"bearer verifier", bearerV},
		redactItem{"bearer verifier value", *bearerV.(*bearerVerifier)},
		redactItem{"secret error", func() error { _, err := ParseSecret("", rawShared+" "); return err }()},
	)

	// RFC 9421: private JWKs (Ed25519 and P-256).
	_, private := webhookKeys(t)
	for _, kid := range []string{"test-ed25519-webhook-2026", "test-es256-webhook-2026"} {
		k := private[kid]
		m := k.m()
		var d []byte
		if m.edPrivate != nil {
			d = m.edPrivate.Seed()
		} else {
			d, _ = m.ecPrivate.Bytes()
		}
		signer, err := NewRFC9421Signer(RFC9421SignerConfig{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		verifier, err := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{k.Public()}, Origin: "https://buyer.example.com"})
		if err != nil {
			t.Fatal(err)
		}
		_, privateRefused := NewRFC9421Verifier(RFC9421VerifierConfig{Sender: "s", Keys: []JWK{k}, Origin: "https://buyer.example.com"})
		if privateRefused == nil {
			t.Fatalf("%s: a verifier of the private key was made", kid)
		}
		badJWK, _ := k.MarshalJSON()
		badJWK = append(badJWK[:len(badJWK)-1], []byte(`,"d":"`+base64.RawURLEncoding.EncodeToString(append(d[1:], d[0]))+`"}`)...)
		add(secretForms(d),
			redactItem{kid, k},
			redactItem{kid + " pointer", &k},
			redactItem{kid + " keys", []JWK{k}},
			redactItem{kid + " signer config", RFC9421SignerConfig{Key: k}},
			redactItem{kid + " signer", signer},
			redactItem{kid + " signer value", *signer.(*rfc9421Signer)},
			redactItem{kid + " verifier", verifier},
			redactItem{kid + " verifier's refusal of it", privateRefused},
			redactItem{kid + " parse error", func() error { _, err := ParseJWK(badJWK); return err }()},
		)
	}

	for _, c := range cases {
		for _, it := range c.items {
			if it.v == nil {
				t.Errorf("%s: nothing to format", it.name)
			}
			if out := leak(it.v, c.forms); out != "" {
				t.Errorf("%s: output contains secret material: %.200s", it.name, out)
			}
		}
	}
}

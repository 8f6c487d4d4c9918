package signature_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/signature"
)

// A JWK marshals without its private part but with its own members:
// a private key's key_ops stay ["sign"]. Published so, it is refused by
// the verifier's purpose check; its Public half is what verifies.
func TestOnlyThePublicHalfOfAPrivateJWKVerifies(t *testing.T) {
	key, err := signature.GenerateJWK("k1", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	verifyWith := func(published []byte) error {
		t.Helper()
		keys, err := signature.ParseJWKSet([]byte(`{"keys":[` + string(published) + `]}`))
		if err != nil {
			t.Fatalf("ParseJWKSet(%s): %v", published, err)
		}
		v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
			Sender: "agent", Keys: keys, Origin: "https://buyer.example.com",
		})
		if err != nil {
			t.Fatal(err)
		}
		body := []byte(`{"task_id":"t1"}`)
		req, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/hook", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if err := signer.Sign(req, signature.Message{ID: "n1", Body: body, Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(context.Background(), req, body)
		return err
	}

	whole, err := json.Marshal(key)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(whole), `"d"`) || !strings.Contains(string(whole), `"key_ops":["sign"]`) {
		t.Errorf("json.Marshal(private key) = %s, want no d and key_ops [sign]", whole)
	}
	if err := verifyWith(whole); courier.CodeOf(err) != courier.CodeWebhookKeyPurposeInvalid {
		t.Errorf("a private key published as json.Marshal(key) verified with %v, want %s", err, courier.CodeWebhookKeyPurposeInvalid)
	}
	public, err := json.Marshal(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyWith(public); err != nil {
		t.Errorf("a key published as json.Marshal(key.Public()) = %s: %v", public, err)
	}
}

// TestZeroMessageTime: Message.Time's doc, signer by signer: each
// signer that carries a time refuses a zero Time for good (signing_failed),
// and sets no header.
func TestZeroMessageTime(t *testing.T) {
	t.Parallel()
	sw, err := signature.ParseStandardWebhooksKey("k", signature.NewStandardWebhooksSecret())
	if err != nil {
		t.Fatal(err)
	}
	secret, err := signature.ParseSecret("s", "abcdefghijklmnopqrstuvwxyz0123456789ABCD")
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := signature.GenerateJWK("j", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	swSigner, _ := signature.NewStandardWebhooksSigner(sw)
	hmacSigner, _ := signature.NewAdCPHMACSigner(secret)
	rfcSigner, _ := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: jwk})
	for _, tt := range []struct {
		name   string
		signer signature.Signer
	}{{"standard webhooks", swSigner}, {"adcp hmac", hmacSigner}, {"rfc9421", rfcSigner}} {
		req, _ := http.NewRequest(http.MethodPost, "https://r.example/h", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "application/json")
		err := tt.signer.Sign(req, signature.Message{ID: "n1", Body: []byte("{}")})
		if courier.CodeOf(err) != courier.CodeSigningFailed || !errors.Is(err, courier.CodeConfigInvalid) {
			t.Errorf("%s: %v, want signing_failed for good", tt.name, err)
		}
		if len(req.Header) != 1 {
			t.Errorf("%s: headers set on failure: %v", tt.name, req.Header)
		}
	}
}

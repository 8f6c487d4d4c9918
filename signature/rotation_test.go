package signature_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/signature"
)

// TestRFC9421Rotation: a sender publishes a new key beside the old one and
// signs with the new; receivers holding both verify; once the old key is
// retired from the set, what it signs is refused.
func TestRFC9421Rotation(t *testing.T) {
	t.Parallel()
	oldKey, err := signature.GenerateJWK("2026-01", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := signature.GenerateJWK("2026-12", signature.AlgECDSAP256SHA256)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k signature.JWK) *http.Request {
		t.Helper()
		body := []byte(`{"idempotency_key":"rotation-0000000001"}`)
		req, _ := http.NewRequest(http.MethodPost, "https://buyer.example/webhooks/adcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		s, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: k})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(req, signature.Message{Body: body, Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return req
	}
	verify := func(keys []signature.JWK, req *http.Request) (signature.Principal, error) {
		t.Helper()
		v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: "agent", Keys: keys, Origin: "https://buyer.example"})
		if err != nil {
			t.Fatal(err)
		}
		return v.Verify(t.Context(), req, []byte(`{"idempotency_key":"rotation-0000000001"}`))
	}
	both := []signature.JWK{oldKey.Public(), newKey.Public()}
	if p, err := verify(both, sign(newKey)); err != nil || p.KeyID != "2026-12" {
		t.Fatalf("new key with old+new published: %+v, %v", p, err)
	}
	if p, err := verify(both, sign(oldKey)); err != nil || p.KeyID != "2026-01" {
		t.Fatalf("old key during the rotation: %+v, %v", p, err)
	}
	retired := []signature.JWK{newKey.Public()}
	if _, err := verify(retired, sign(oldKey)); courier.CodeOf(err) != courier.CodeWebhookKeyUnknown {
		t.Fatalf("old key after retirement: %v, want %s", err, courier.CodeWebhookKeyUnknown)
	}
	if _, err := verify(retired, sign(newKey)); err != nil {
		t.Fatalf("new key after retirement: %v", err)
	}
}

// TestARebuiltRFC9421VerifierRemembersItsPredecessorsNonces: a receiver
// takes a new key by building its verifier again (the package doc's
// Rotating keys, step 1). A request the old verifier accepted, replayed
// to the new one within its window, is a replay still.
func TestARebuiltRFC9421VerifierRemembersItsPredecessorsNonces(t *testing.T) {
	t.Parallel()
	oldKey, errOld := signature.GenerateJWK("2026-01", signature.AlgEd25519)
	newKey, errNew := signature.GenerateJWK("2026-12", signature.AlgEd25519)
	if errOld != nil || errNew != nil {
		t.Fatal(errOld, errNew)
	}
	body := []byte(`{"idempotency_key":"rotation-0000000002"}`)
	req, err := http.NewRequest(http.MethodPost, "https://buyer.example/webhooks/adcp", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := signer.Sign(req, signature.Message{Body: body, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	verifier := func(keys ...signature.JWK) signature.Verifier {
		v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: t.Name(), Keys: keys, Origin: "https://buyer.example"})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	if _, err := verifier(oldKey.Public()).Verify(t.Context(), req, body); err != nil {
		t.Fatalf("the old verifier: %v", err)
	}
	rebuilt := verifier(oldKey.Public(), newKey.Public())
	if _, err := rebuilt.Verify(t.Context(), req, body); courier.CodeOf(err) != courier.CodeWebhookReplayed {
		t.Fatalf("the same request to the verifier built again: %v, want %s", err, courier.CodeWebhookReplayed)
	}
}

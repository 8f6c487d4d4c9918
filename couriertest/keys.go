package couriertest

import (
	"bytes"
	"net/http"
	"time"

	"github.com/courier-go/courier/signature"
)

// Keys is a signer and the verifier that accepts what it signs, under
// fresh random key material: the two ends of one signature scheme, for
// tests.
type Keys struct {
	Signer   signature.Signer
	Verifier signature.Verifier
}

// StandardWebhooksKeys returns keys of courier's default scheme, Standard
// Webhooks v1 (HMAC-SHA256 with a fresh whsec_ secret), the verifier
// naming the sender sender.
func StandardWebhooksKeys(sender string) Keys {
	key, err := signature.ParseStandardWebhooksKey("test-key", signature.NewStandardWebhooksSecret())
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	s, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	v, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	return Keys{Signer: s, Verifier: v}
}

// RFC9421Keys returns keys of the AdCP RFC 9421 webhook profile (a fresh
// Ed25519 JWK), the verifier naming the sender sender and serving origin
// (the receiver's scheme and authority, e.g. a test server's URL), with a
// replay cache of its own.
func RFC9421Keys(sender, origin string) Keys {
	key, err := signature.GenerateJWK("test-key", signature.AlgEd25519)
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	s, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: sender, Keys: []signature.JWK{key.Public()}, Origin: origin})
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	return Keys{Signer: s, Verifier: v}
}

// AdCPHMACKeys returns keys of AdCP's legacy HMAC scheme under a fresh
// shared secret.
func AdCPHMACKeys(sender string) Keys {
	secret, err := signature.ParseSecret("test-key", "test-"+signature.NewStandardWebhooksSecret())
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	s, err := signature.NewAdCPHMACSigner(secret)
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	v, err := signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{Sender: sender, Secrets: []signature.Secret{secret}})
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	return Keys{Signer: s, Verifier: v}
}

// BearerKeys returns keys of the bearer scheme under a fresh token.
func BearerKeys(sender string) Keys {
	token, err := signature.ParseSecret("test-key", "test-"+signature.NewStandardWebhooksSecret())
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	s, err := signature.NewBearerSigner(token)
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	v, err := signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: sender, Tokens: []signature.Secret{token}})
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	return Keys{Signer: s, Verifier: v}
}

// NewRequest returns a POST of body to url as a courier worker sends it:
// Content-Type application/json, signed now by signer for the
// notification id. Use it to test one's own receiver with httptest.
// NewRequest panics if url is not a valid URL or signer fails.
func NewRequest(url, id string, body []byte, signer signature.Signer) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic("couriertest: NewRequest: " + err.Error())
	}
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		panic("couriertest: NewRequest: " + err.Error())
	}
	return req
}

package couriertest

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"time"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/wire"
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
	key := must(signature.ParseStandardWebhooksKey("test-key", signature.NewStandardWebhooksSecret()))
	return Keys{
		Signer:   must(signature.NewStandardWebhooksSigner(key)),
		Verifier: must(signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{Sender: sender, Keys: []signature.StandardWebhooksKey{key}})),
	}
}

// RFC9421Keys returns keys of the AdCP RFC 9421 webhook profile (a fresh
// Ed25519 JWK), the verifier naming the sender sender and serving origin
// (the receiver's scheme and authority, e.g. a test server's URL). Its
// replay cache is the process's (see signature.RFC9421VerifierConfig.Replay),
// shared with every other verifier of the test binary: a request verified
// twice, by one verifier or two, is a replay.
//
// A Server's URL is known only once it listens, and its receiver, which
// needs the verifier, is given before: listen first, make the keys and
// the receiver for that address, then serve on the listener
// (NewUnstartedServer, Server.Listener, Start), as ExampleRFC9421Keys does.
func RFC9421Keys(sender, origin string) Keys {
	key := must(signature.GenerateJWK("test-key", signature.AlgEd25519))
	return Keys{
		Signer:   must(signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})),
		Verifier: must(signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{Sender: sender, Keys: []signature.JWK{key.Public()}, Origin: origin})),
	}
}

// AdCPHMACKeys returns keys of AdCP's legacy HMAC scheme under a fresh
// shared secret.
func AdCPHMACKeys(sender string) Keys {
	secret := freshSecret()
	return Keys{
		Signer:   must(signature.NewAdCPHMACSigner(secret)),
		Verifier: must(signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{Sender: sender, Secrets: []signature.Secret{secret}})),
	}
}

// BearerKeys returns keys of the bearer scheme under a fresh token.
func BearerKeys(sender string) Keys {
	token := freshSecret()
	return Keys{
		Signer:   must(signature.NewBearerSigner(token)),
		Verifier: must(signature.NewBearerVerifier(signature.BearerVerifierConfig{Sender: sender, Tokens: []signature.Secret{token}})),
	}
}

// freshSecret is a shared secret of random bytes, under the key id
// test-key.
func freshSecret() signature.Secret {
	return must(signature.ParseSecret("test-key", "test-"+signature.NewStandardWebhooksSecret()))
}

// must returns v, or panics with err: the key material here is made, not
// read, so an error is a bug in courier.
func must[T any](v T, err error) T {
	if err != nil {
		panic("couriertest: " + err.Error())
	}
	return v
}

// NewRequest returns a POST of body to url as a courier worker sends its
// first attempt: Content-Type application/json, courier's User-Agent,
// ack.AttemptHeader 1, signed now by signer for the notification id. Use
// it to test one's own receiver or source with httptest; set the attempt
// header to another number to play a redelivery. Served to a handler
// directly (ServeHTTP), a request to an https URL reads as one that came
// over TLS (its TLS field is set, as httptest.NewRequest sets it), which
// an http.Client sending it ignores.
// NewRequest panics if url is not a valid URL or signer fails.
func NewRequest(url, id string, body []byte, signer signature.Signer) *http.Request {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic("couriertest: NewRequest: " + err.Error())
	}
	if req.URL.Scheme == "https" {
		req.TLS = &tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, ServerName: req.URL.Hostname()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", wire.UserAgent)
	req.Header.Set(ack.AttemptHeader, "1")
	if err := signer.Sign(req, signature.Message{ID: id, Body: body, Time: time.Now()}); err != nil {
		panic("couriertest: NewRequest: " + err.Error())
	}
	return req
}

// Package signature signs outgoing notifications and verifies incoming ones.
//
// Four schemes are implemented, each as a Signer and a Verifier built from a
// validated Config:
//
//   - Standard Webhooks ([NewStandardWebhooksSigner], [NewStandardWebhooksVerifier]):
//     webhook-id, webhook-timestamp and webhook-signature with HMAC-SHA256 (v1)
//     and Ed25519 (v1a) signatures; courier's default between its own ends.
//     The verifier also accepts Svix's brand of the same headers (svix-id,
//     svix-timestamp, svix-signature), one brand per request: a request
//     carrying both is refused unless the two say exactly the same thing.
//     The signed id comes back as [Principal].MessageID.
//   - The AdCP RFC 9421 webhook profile ([NewRFC9421Signer], [NewRFC9421Verifier]):
//     HTTP Message Signatures with Ed25519 or ECDSA P-256 keys published as JWKs,
//     Content-Digest, and a (keyid, nonce) replay check through a [ReplayCache].
//     The signer writes the signature as unpadded base64url, as AdCP does; the
//     verifier also accepts padded standard base64, the RFC 8941 form generic
//     HTTP Message Signatures libraries write, but not a value that mixes the
//     two alphabets or pads base64url.
//   - The AdCP legacy HMAC scheme ([NewAdCPHMACSigner], [NewAdCPHMACVerifier]).
//   - Bearer tokens ([NewBearerSigner], [NewBearerVerifier]).
//
// An endpoint registers exactly one scheme; a receiver never tries one scheme
// and falls back to another.
//
// An RFC 9421 signature covers the receiver's origin (@authority and
// @target-uri), so that a request signed for one receiver is refused by
// another receiver trusting the same sender key. The verifier must therefore
// be told its own origin: [RFC9421VerifierConfig].Origin,
// "https://buyer.example.com", from which it rebuilds the target URI with
// the request's path and query, ignoring the Host the request carries. The
// named opt-out [RFC9421VerifierConfig].TrustRequestHost takes the origin
// from each request's Host instead; it is safe only behind a proxy that sets
// Host itself, or in tests, since otherwise whoever sends the request
// chooses the origin it is checked against.
//
// Every verification failure is a *[courier.Error] that is a case of
// [courier.ErrSignatureInvalid]: errors.Is(err, courier.ErrSignatureInvalid)
// holds and [courier.CodeOf] gives the precise code, one of the root
// package's codes of signature verification ([courier.CodeSignatureMismatch],
// [courier.CodeWebhookInvalid], …). Failure messages never contain secrets,
// key bytes, signature values, header values or body bytes. An error that is not a case of
// ErrSignatureInvalid (a replay cache or key lookup that could not answer, a
// cancelled context) is infrastructure trouble: the receiver should answer
// 5xx so the sender retries.
//
// Keys and secrets are opaque types built by parsers that validate them
// once: [StandardWebhooksKey] ([ParseStandardWebhooksKey]), [JWK]
// ([ParseJWK], [ParseJWKSet], [GenerateJWK]) and [Secret] ([ParseSecret]).
// They print and log redacted with every fmt verb and through slog, however
// deeply they are nested, and no error message carries their bytes.
//
// Verifiers never parse the body: a body that passes verification still
// goes through the receiver's strict JSON decoding (which refuses duplicate
// keys) before anything acts on it.
package signature

import (
	"context"
	"net/http"
	"time"

	"github.com/courier-go/courier"
)

// Message is what a Signer signs for one delivery attempt.
type Message struct {
	ID   string    // the notification id (Standard Webhooks webhook-id)
	Body []byte    // the exact bytes sent
	Time time.Time // the time of this attempt
}

// Signer adds a scheme's headers to an outgoing request for one attempt.
// req's method, URL and Content-Type are already final.
type Signer interface {
	Sign(req *http.Request, m Message) error
}

// Principal is who a verified request came from, and the message id the
// signature vouches for when the scheme signs one. Never contains key
// material.
type Principal struct {
	Sender string // the configured name of the verified sender
	KeyID  string // which key verified it (an id, never key bytes)
	Scheme string // "standard-webhooks", "rfc9421", "adcp-hmac", "bearer"
	// MessageID is the message id covered by the signature: for Standard
	// Webhooks the webhook-id header (or svix-id, Svix's brand of it), which
	// courier senders set to the notification id. A receiver that dedupes
	// by an id in the body must check that it equals MessageID, or a signed
	// request could carry another notification's identity. It is "" for
	// schemes that sign no id (RFC 9421, AdCP HMAC, bearer).
	MessageID string
}

// Verifier checks a request's signature over the exact body bytes.
type Verifier interface {
	Verify(ctx context.Context, req *http.Request, body []byte) (Principal, error)
}

// Every scheme implements both interfaces.
var (
	_ Signer   = (*standardWebhooksSigner)(nil)
	_ Signer   = (*rfc9421Signer)(nil)
	_ Signer   = (*adcpHMACSigner)(nil)
	_ Signer   = (*bearerSigner)(nil)
	_ Verifier = (*standardWebhooksVerifier)(nil)
	_ Verifier = (*rfc9421Verifier)(nil)
	_ Verifier = (*adcpHMACVerifier)(nil)
	_ Verifier = (*bearerVerifier)(nil)
)

// The schemes, as Principal.Scheme names them.
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeRFC9421          = "rfc9421"
	SchemeAdCPHMAC         = "adcp-hmac"
	SchemeBearer           = "bearer"
)

// maxHeaderBytes bounds every signature header a verifier parses.
const maxHeaderBytes = 8 << 10

// redacted is what secret-holding types print instead of their secrets.
const redacted = "[REDACTED]"

// reject returns a verification failure with a content-free message.
func reject(code courier.Code, msg string) error {
	return courier.Wrap(courier.ErrSignatureInvalid, code, msg)
}

// configError returns the error of a constructor or parser refusing its
// configuration: a case of courier.ErrConfigInvalid whose message names the
// field. msg never carries key or secret bytes.
func configError(msg string) error {
	return courier.Wrap(courier.ErrConfigInvalid, courier.CodeConfigInvalid, "signature: "+msg)
}

// signingFailed returns a Sign failure with a content-free message.
func signingFailed(msg string) error {
	return courier.NewError(courier.CodeSigningFailed, msg)
}

// nowFunc returns now, or time.Now when now is nil.
func nowFunc(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// singleHeader returns the one field line of name in h. ok is false when the
// field is absent; many reports more than one field line.
func singleHeader(h http.Header, name string) (v string, ok, many bool) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", false, false
	case 1:
		return vs[0], true, false
	}
	return "", true, true
}

// sealed holds a value out of reach of fmt, slog and every other
// reflection-based printer or encoder: they see a func and print at most its
// address. Secret-holding types keep their material sealed, so that no verb,
// no nesting in a caller's struct and no log handler can show it.
type sealed[T any] func() T

func seal[T any](v T) sealed[T] { return func() T { return v } }

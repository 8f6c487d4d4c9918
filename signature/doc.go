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
// [courier.CodeSignatureInvalid]: errors.Is(err, courier.CodeSignatureInvalid)
// holds and [courier.CodeOf] gives the precise code, one of the root
// package's codes of signature verification ([courier.CodeSignatureMismatch],
// [courier.CodeWebhookInvalid], …). Failure messages never contain secrets,
// key bytes, signature values, header values or body bytes. An error that is not a case of
// CodeSignatureInvalid (a replay cache or key lookup that could not answer, a
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

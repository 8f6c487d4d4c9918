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
//     two alphabets or pads base64url. A receiver verifies against the
//     sender's published JWK Set through a [JWKSet], which fetches it and
//     keeps it fresh, or against keys of its configuration.
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
// chooses the origin it is checked against. What to configure behind a
// reverse proxy is below (Behind a proxy).
//
// Every verification failure is a case of [courier.CodeSignatureInvalid]:
// errors.Is(err, courier.CodeSignatureInvalid) holds and [courier.CodeOf]
// gives the precise code, one of the root package's codes of signature
// verification ([courier.CodeSignatureMismatch], [courier.CodeWebhookInvalid],
// …). A Verifier of an application's own says its failures the same way,
// the precise code first: fmt.Errorf("%w: %w", code,
// courier.CodeSignatureInvalid). Failure messages never contain secrets,
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
// # Rotating keys
//
// Every scheme rotates the same way, receivers first, so that no request
// is refused on the way:
//
//  1. Give every receiver the new key beside the old one: both in
//     [StandardWebhooksVerifierConfig].Keys (the new "whpk_" public key,
//     or the new "whsec_" secret), [AdCPHMACVerifierConfig].Secrets or
//     [BearerVerifierConfig].Tokens. A verifier keeps the keys it was
//     built with: a running receiver takes the new one when it is built
//     again, with a new verifier, and put in the old one's place (the
//     http.Handler its mux serves; a redelivery is answered from the
//     Store's records whichever receiver value recorded it), or when its
//     process restarts. For RFC 9421 the sender publishes its new JWK in
//     its set beside the old one, under a new kid: a verifier built with
//     [RFC9421VerifierConfig].Keys sees it once it is built again with
//     both, one with LookupKey as soon as the lookup finds it ([JWKSet]'s
//     at the first request that names it).
//  2. Switch every sender process to sign with the new key. A Standard
//     Webhooks signer may sign with both meanwhile
//     (NewStandardWebhooksSigner(next, old)), so that a receiver not yet
//     given the new key still verifies the old signature. A courier
//     worker signs each attempt afresh (a new timestamp, and for RFC 9421
//     a new nonce) with the signer it has at that moment: its
//     client.Config.Signer, fixed when the worker is made, so a worker
//     made with the new one (after Stop of the old) switches; or what its
//     client.Config.SignerFor returns, asked for every attempt, so a
//     SignerFor that returns the key the process holds now switches a
//     running worker as soon as the key is swapped. Either way a delivery
//     first attempted under the old key goes under the new one at its
//     next attempt. Swap the key behind a name, not the name: a
//     delivery's key id (store.EnqueueParams.KeyID,
//     store.SubscriptionParams.KeyID) is the name SignerFor is asked
//     for, fixed for the delivery's life, so it names a signing setup
//     ("orders"), never a key's version. A delivery enqueued under a
//     name SignerFor no longer answers fails (signing_failed), and a
//     subscription whose KeyID is changed suppresses the deliveries
//     already enqueued for it (subscription_changed): neither rotates.
//  3. Drop the old key from every receiver (retire it from the JWK set)
//     once no sender process signs with it alone, and once the attempts
//     signed with it before the switch have ended: wait a worker's
//     Timeout (client.Config.Timeout, 15 seconds by default) after the
//     last sender switched. A request signed with
//     it alone is then refused, 401 with the scheme's code
//     ([courier.CodeSignatureMismatch];
//     [courier.CodeWebhookKeyUnknown] for RFC 9421), which a courier
//     worker does not retry: the delivery fails with
//     [courier.CodeSignatureRejected]. Redrive it (store.Outbox.Redrive,
//     or courier deliveries redrive) once its sender signs with the new
//     key.
//
// Keep the verifier's Sender through a rotation. Receivers dedupe by
// (Sender, dedupe key), not by key: a redelivery of a notification
// accepted under the old key (its answer lost on the way) is answered
// from its record when it comes signed with the new one, where under
// another Sender it would be processed again.
//
// Verifiers never parse the body: a body that passes verification still
// goes through the receiver's strict JSON decoding (which refuses duplicate
// keys) before anything acts on it.
//
// # Behind a proxy
//
// Standard Webhooks, AdCP HMAC and Bearer sign no URL: a receiver verifies
// them wherever it is mounted and whatever proxy stands in front, as long
// as the signature's headers and the body reach it unchanged. An RFC 9421
// signature covers the method, the target URI (scheme, authority, path,
// query), Content-Type and Content-Digest, so behind a reverse proxy:
//
//   - Origin is the public origin the senders sign for, the proxy's
//     ("https://buyer.example.com"), not the address the proxy forwards to
//     ("http://10.0.0.5:8080"). A proxy that terminates TLS changes nothing
//     else: the verifier rebuilds the target from Origin, not from the
//     scheme or Host it receives.
//   - The path and query are the request's as it arrives (its RequestURI):
//     the proxy must forward them as the sender sent them. Mounting the
//     receiver under a prefix in the process (http.StripPrefix, a
//     "POST /hooks/{tenant}" pattern, a router's sub-tree) is fine, since
//     none of them changes RequestURI; a proxy that strips or adds a prefix,
//     or re-encodes the query, is not.
//   - X-Forwarded-Host, X-Forwarded-Proto and Forwarded are never read, with
//     Origin or with TrustRequestHost: a client can send them through many
//     proxies, so trusting them would let it choose the origin a signature
//     is checked against. A receiver serving several public hosts builds one
//     verifier per host, each with its Origin, and routes to it by Host
//     (a ServeMux pattern "hooks.a.example/"), the proxy forwarding Host:
//     a Host a client forges only reaches a verifier that checks the
//     signature against that verifier's own origin.
//   - TrustRequestHost behind a proxy that terminates TLS derives http,
//     which no https signature matches: every request is refused 401
//     webhook_target_uri_malformed (a loopback upstream, where http is
//     allowed: webhook_signature_invalid). Set Origin.
//   - With Origin wrong, or a proxy that rewrites the path, query or a
//     covered header, every request is refused 401 with
//     webhook_signature_invalid in the problem and in WWW-Authenticate, as
//     a wrong key is: the signature covers what the receiver rebuilt, not
//     what it was told.
//   - Several processes behind one load balancer share one replay cache
//     ([RFC9421VerifierConfig].Replay: the store's), or a request replayed
//     to another process is accepted there once more.
package signature

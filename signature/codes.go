package signature

import "github.com/courier-go/courier"

// Codes of the Standard Webhooks, AdCP legacy HMAC and bearer verifiers.
// Each failure is a case of courier.ErrSignatureInvalid.
const (
	// CodeMissing: a required header (signature, timestamp, id or
	// Authorization) is absent or empty.
	CodeMissing courier.Code = "signature_missing"
	// CodeMalformed: a header is present but does not parse, repeats, or
	// exceeds its size bound.
	CodeMalformed courier.Code = "signature_malformed"
	// CodeTimestampOutOfRange: the signed timestamp is outside the
	// verifier's tolerance, in the past or in the future.
	CodeTimestampOutOfRange courier.Code = "signature_timestamp_out_of_range"
	// CodeMismatch: no signature or token matches any configured key.
	CodeMismatch courier.Code = "signature_mismatch"
)

// CodeDuplicateKeyInput is the code of the error an AdCP legacy HMAC signer
// returns, instead of signing, for a JSON body with a duplicate object key.
// AdCP fixes the identifier: "duplicate_key_input". It is not a verification
// failure.
const CodeDuplicateKeyInput courier.Code = "duplicate_key_input"

// Codes of the AdCP RFC 9421 webhook profile, exactly as AdCP's webhook
// error taxonomy and conformance vectors name them. Each failure is a case of
// courier.ErrSignatureInvalid.
const (
	// CodeWebhookHeaderMalformed: Signature or Signature-Input is malformed,
	// one is present without the other, or the signature value is not
	// unpadded base64url.
	CodeWebhookHeaderMalformed courier.Code = "webhook_signature_header_malformed"
	// CodeWebhookParamsIncomplete: created, expires, nonce, keyid, alg or tag
	// is absent.
	CodeWebhookParamsIncomplete courier.Code = "webhook_signature_params_incomplete"
	// CodeWebhookTagInvalid: tag is not exactly "adcp/webhook-signing/v1".
	CodeWebhookTagInvalid courier.Code = "webhook_signature_tag_invalid"
	// CodeWebhookAlgNotAllowed: alg is not ed25519 or ecdsa-p256-sha256, or
	// does not match the key.
	CodeWebhookAlgNotAllowed courier.Code = "webhook_signature_alg_not_allowed"
	// CodeWebhookWindowInvalid: expires <= created, the window is too long,
	// created is in the future or expires in the past (beyond clock skew).
	CodeWebhookWindowInvalid courier.Code = "webhook_signature_window_invalid"
	// CodeWebhookComponentsIncomplete: a required covered component is missing.
	CodeWebhookComponentsIncomplete courier.Code = "webhook_signature_components_incomplete"
	// CodeWebhookKeyUnknown: keyid names no key of the sender.
	CodeWebhookKeyUnknown courier.Code = "webhook_signature_key_unknown"
	// CodeWebhookKeyPurposeInvalid: the key's adcp_use, use or key_ops does
	// not allow verifying webhooks.
	CodeWebhookKeyPurposeInvalid courier.Code = "webhook_signature_key_purpose_invalid"
	// CodeWebhookKeyRevoked: the key is revoked.
	CodeWebhookKeyRevoked courier.Code = "webhook_signature_key_revoked"
	// CodeWebhookRevocationStale: the revocation data is older than its
	// refresh deadline plus grace, so no new signature is accepted.
	CodeWebhookRevocationStale courier.Code = "webhook_signature_revocation_stale"
	// CodeWebhookRateAbuse: the key reached its cap of live nonces.
	CodeWebhookRateAbuse courier.Code = "webhook_signature_rate_abuse"
	// CodeWebhookInvalid: the signature does not verify.
	CodeWebhookInvalid courier.Code = "webhook_signature_invalid"
	// CodeWebhookDigestMismatch: Content-Digest does not match the body.
	CodeWebhookDigestMismatch courier.Code = "webhook_signature_digest_mismatch"
	// CodeWebhookReplayed: (keyid, nonce) was already accepted.
	CodeWebhookReplayed courier.Code = "webhook_signature_replayed"
	// CodeWebhookTargetURIMalformed: the request's target URI or authority
	// cannot be canonicalized, is not https (http is allowed only to a
	// loopback host), or Host disagrees with the target URI.
	CodeWebhookTargetURIMalformed courier.Code = "webhook_target_uri_malformed"
)

package courier

// Code is a stable, content-free error code. Codes are data: they are stored
// in the attempts log, returned in problem+json bodies and matched by
// operators' alerts, so they never change meaning and never carry payload,
// header or secret content.
//
// A code has one form: a lowercase letter followed by at most 127
// lowercase letters, digits, '_', '.' or '-' (courier's own are all so).
// Courier keeps a code from outside it only in that form: a receiver's
// problem+json code in another is not kept as the sender's remote code,
// and a client.Verdict's is replaced by client.DefaultClassify's.
// contrib/promcourier counts any code not courier's own as "other".
//
// A Code is also an error, and the target every courier error is tested
// against: every error courier returns wraps its code, so
// errors.Is(err, courier.CodeNotFound) holds for any error whose code, or
// whose class, is not_found, and CodeOf reads the precise code. An error
// of an application's own that courier reads the code of (an
// admin.Config.Authorize refusal, a signature.Verifier's failure) wraps
// its code the same way: fmt.Errorf("%w: %s", courier.CodeForbidden,
// "operators only") prints "forbidden: operators only".
type Code string

// Error returns the code: a Code is an error, which every error with that
// code wraps.
func (c Code) Error() string { return string(c) }

// Codes of a delivery attempt's outcome, as the worker records them.
const (
	CodeAckInvalid           Code = "ack_invalid"           // the receiver's Ack does not bind the bytes sent
	CodeLeaseExpired         Code = "lease_expired"         // a worker's lease ran out before it settled
	CodeLeaseLost            Code = "lease_lost"            // a settle whose lease is no longer held
	CodeIdempotencyCollision Code = "idempotency_collision" // same identity, different content
	CodeDestinationForbidden Code = "destination_forbidden" // the SSRF guard refused the destination
	CodeIntegrity            Code = "integrity_mismatch"    // stored payload no longer matches its digest
	CodePayloadUnreadable    Code = "payload_unreadable"    // stored payload cannot be decrypted
	CodeExpired              Code = "expired"               // the retry horizon passed
	CodeSubscriptionChanged  Code = "subscription_changed"  // the subscription changed or was paused
	CodeContractChanged      Code = "contract_changed"      // the endpoint's pinned contract changed
	CodeEndpointGone         Code = "endpoint_gone"         // the receiver answered 410 Gone
	CodeEndpointDisabled     Code = "endpoint_disabled"     // the endpoint was disabled by an operator or its health
	CodeReceiverUnavailable  Code = "receiver_unavailable"  // 5xx
	CodeRateLimited          Code = "rate_limited"          // 429
	CodeRequestTimeout       Code = "request_timeout"       // 408 or 425
	CodeReceiverRejected     Code = "receiver_rejected"     // another 4xx: permanent
	CodeSignatureRejected    Code = "signature_rejected"    // 401: the receiver refused the signature
	CodeRedirect             Code = "redirect_refused"      // 3xx: redirects are never followed
	CodeNetwork              Code = "network_error"         // connection refused, reset, dropped
	CodeTimeout              Code = "timeout"               // the attempt exceeded its timeout
	CodeSigningFailed        Code = "signing_failed"        // no usable key to sign the attempt
	CodeCancelled            Code = "cancelled"             // an operator withdrew the delivery
	CodeWorkerStopped        Code = "worker_stopped"        // the worker stopped mid-attempt: retried at once, counted but not spent from the budget; Work after Stop returns it
)

// Codes a receiver answers with, in the problem+json body.
const (
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeBodyTooLarge         Code = "body_too_large"
	CodeMalformedJSON        Code = "malformed_json"
	CodeDuplicateKey         Code = "duplicate_json_key"
	CodeValidation           Code = "validation_failed"
	CodeSignatureInvalid     Code = "signature_invalid"
	CodeInProgress           Code = "in_progress"
	CodeMessageIDMissing     Code = "message_id_missing" // 400: the payload has no id and its scheme signs no message id to dedupe it by
	CodeHandlerFailed        Code = "handler_failed"
	CodeRejected             Code = "rejected"
	CodeUnauthorized         Code = "unauthorized"
	CodeForbidden            Code = "forbidden"
	CodeNotFound             Code = "not_found"
	CodeInternal             Code = "internal_error"
	CodeServerBusy           Code = "server_busy" // 503: the bytes buffered for bodies are at their budget; retry after Retry-After
	// CodeSourceAttemptsExhausted: 422 from a source (handler.NewSource) to
	// a new command received at an attempt beyond its source_max_attempts.
	CodeSourceAttemptsExhausted Code = "source_attempts_exhausted"
)

// Codes of the store and of its health.
const (
	CodePayloadInvalid Code = "payload_invalid"
	CodeSchemaOutdated Code = "schema_outdated" // migrations are pending
	CodeSchemaAltered  Code = "schema_altered"  // the tables are not what courier created
	CodeSchemaTooNew   Code = "schema_too_new"  // a newer courier migrated this database to a schema this one must not run on
	// CodeDatabaseCorrupt: health: the engine's own integrity check found
	// damage, or the database file was removed or replaced. An operation
	// that fails on a damaged file (SQLite: a malformed page, a header no
	// database has) fails with it too, as a case of
	// CodeDatabaseUnavailable (errors.Is holds for both): the operation
	// took no effect, and none passes until the file is restored.
	// Receivers answer such a failure 503, as any of the database's.
	CodeDatabaseCorrupt         Code = "database_corrupt"
	CodeFailedPresent           Code = "deliveries_failed" // health: failed deliveries need an operator
	CodeLeasesExpired           Code = "leases_expired"    // health: workers stopped without settling
	CodeConfigInvalid           Code = "config_invalid"
	CodeInvalidArgument         Code = "invalid_argument"
	CodeWriteOutsideTransaction Code = "write_outside_transaction" // a write through DB() while the request's transaction holds SQLite's writer
	CodeRequestInvalid          Code = "request_invalid"           // a command is not valid (JSON, members, values): names the field, never the content
	// CodeDatabaseUnavailable: the database failed the operation: a lock
	// or serialization conflict it ended, a lost connection, a read-only
	// or full file, a statement timeout. The operation took no effect
	// (a caller's transaction it ran in must roll back); retry later.
	CodeDatabaseUnavailable Code = "database_unavailable"
	// CodeDeliveriesOverdue: health: deliveries wait past their deadline,
	// never to be sent: no claim reached them to end them (workers stopped
	// or far behind).
	CodeDeliveriesOverdue Code = "deliveries_overdue"
)

// Codes of signature verification. Each failure a verifier reports is a case
// of CodeSignatureInvalid: errors.Is(err, CodeSignatureInvalid) holds and
// CodeOf gives one of these codes. The first four are the codes of the
// Standard Webhooks, AdCP legacy HMAC and bearer verifiers; the CodeWebhook*
// codes are those of the AdCP RFC 9421 webhook profile, spelled exactly as
// AdCP's webhook error taxonomy and conformance vectors spell them.
const (
	// CodeSignatureMissing: a required header (signature, timestamp, id or
	// Authorization) is absent or empty.
	CodeSignatureMissing Code = "signature_missing"
	// CodeSignatureMalformed: a header is present but does not parse,
	// repeats, exceeds its size bound, or (Standard Webhooks) the request
	// carries webhook-* and svix-* headers that disagree.
	CodeSignatureMalformed Code = "signature_malformed"
	// CodeSignatureTimestamp: the signed timestamp is outside the verifier's
	// tolerance, in the past or in the future.
	CodeSignatureTimestamp Code = "signature_timestamp_out_of_range"
	// CodeSignatureMismatch: no signature or token matches any configured
	// key.
	CodeSignatureMismatch Code = "signature_mismatch"

	// CodeWebhookHeaderMalformed: Signature or Signature-Input is malformed,
	// one is present without the other, or the signature value is not
	// base64 in one consistent form (unpadded base64url, or padded standard
	// base64).
	CodeWebhookHeaderMalformed Code = "webhook_signature_header_malformed"
	// CodeWebhookParamsIncomplete: created, expires, nonce, keyid, alg or tag
	// is absent.
	CodeWebhookParamsIncomplete Code = "webhook_signature_params_incomplete"
	// CodeWebhookTagInvalid: tag is not exactly "adcp/webhook-signing/v1".
	CodeWebhookTagInvalid Code = "webhook_signature_tag_invalid"
	// CodeWebhookAlgNotAllowed: alg is not ed25519 or ecdsa-p256-sha256, or
	// does not match the key.
	CodeWebhookAlgNotAllowed Code = "webhook_signature_alg_not_allowed"
	// CodeWebhookWindowInvalid: expires <= created, the window is too long,
	// created is in the future or expires in the past (beyond clock skew).
	CodeWebhookWindowInvalid Code = "webhook_signature_window_invalid"
	// CodeWebhookComponentsIncomplete: a required covered component is
	// missing.
	CodeWebhookComponentsIncomplete Code = "webhook_signature_components_incomplete"
	// CodeWebhookKeyUnknown: keyid names no key of the sender.
	CodeWebhookKeyUnknown Code = "webhook_signature_key_unknown"
	// CodeWebhookKeyPurposeInvalid: the key's adcp_use, use or key_ops does
	// not allow verifying webhooks.
	CodeWebhookKeyPurposeInvalid Code = "webhook_signature_key_purpose_invalid"
	// CodeWebhookKeyRevoked: the key is revoked.
	CodeWebhookKeyRevoked Code = "webhook_signature_key_revoked"
	// CodeWebhookRevocationStale: the revocation data is older than its
	// refresh deadline plus grace, so no new signature is accepted for
	// now: courier's receivers answer it 503, which a sender retries.
	CodeWebhookRevocationStale Code = "webhook_signature_revocation_stale"
	// CodeWebhookRateAbuse: the key reached its cap of live nonces:
	// courier's receivers answer it 429 with Retry-After, which a sender
	// retries.
	CodeWebhookRateAbuse Code = "webhook_signature_rate_abuse"
	// CodeWebhookInvalid: the signature does not verify.
	CodeWebhookInvalid Code = "webhook_signature_invalid"
	// CodeWebhookDigestMismatch: Content-Digest does not match the body.
	CodeWebhookDigestMismatch Code = "webhook_signature_digest_mismatch"
	// CodeWebhookReplayed: (keyid, nonce) was already accepted.
	CodeWebhookReplayed Code = "webhook_signature_replayed"
	// CodeWebhookTargetURIMalformed: the request's target URI or authority
	// cannot be canonicalized, is not https (http is allowed only to a
	// loopback host), or Host disagrees with the target URI.
	CodeWebhookTargetURIMalformed Code = "webhook_target_uri_malformed"
)

// CodeDuplicateKeyInput is the code of the error an AdCP legacy HMAC signer
// returns, instead of signing, for a JSON body with a duplicate object key.
// AdCP fixes the identifier: "duplicate_key_input". It is not a verification
// failure (compare CodeDuplicateKey, what a receiver answers for such a
// body).
const CodeDuplicateKeyInput Code = "duplicate_key_input"

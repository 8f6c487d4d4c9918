package courier

// Code is a stable, content-free error code. Codes are data: they are stored
// in the attempts log, returned in problem+json bodies and matched by
// operators' alerts, so they never change meaning and never carry payload,
// header or secret content.
type Code string

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
	CodeSubscriptionChanged  Code = "subscription_changed"  // the subscription changed or was disabled
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
	CodeHandlerFailed        Code = "handler_failed"
	CodeRejected             Code = "rejected"
	CodeUnauthorized         Code = "unauthorized"
	CodeForbidden            Code = "forbidden"
	CodeNotFound             Code = "not_found"
	CodeInternal             Code = "internal_error"
	CodeServerBusy           Code = "server_busy" // 503: the bytes buffered for bodies are at their budget; retry after Retry-After
)

// Codes of the store and of its health.
const (
	CodePayloadInvalid  Code = "payload_invalid"
	CodeSchemaOutdated  Code = "schema_outdated"   // migrations are pending
	CodeSchemaAltered   Code = "schema_altered"    // the tables are not what courier created
	CodeSchemaTooNew    Code = "schema_too_new"    // a newer courier migrated this database
	CodeFailedPresent   Code = "deliveries_failed" // health: failed deliveries need an operator
	CodeLeasesExpired   Code = "leases_expired"    // health: workers stopped without settling
	CodeConfigInvalid   Code = "config_invalid"
	CodeInvalidArgument Code = "invalid_argument"
)

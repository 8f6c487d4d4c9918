package signature

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
)

// Message is what a Signer signs for one delivery attempt.
type Message struct {
	ID   string // the notification id (Standard Webhooks webhook-id)
	Body []byte // the exact bytes sent
	// Time is the time of this attempt, which the signature carries.
	// The Standard Webhooks, AdCP HMAC and RFC 9421 signers refuse a
	// Time before 1970, the zero Time among them (signing_failed); the
	// bearer signer sends none. A courier worker always sets it.
	Time time.Time
}

// Signer adds a scheme's headers to an outgoing request for one attempt.
// req's method, URL and Content-Type are already final. The signers of
// this package fail with courier.CodeSigningFailed; when no retry can
// change the outcome (no key, a URL the scheme cannot sign, an invalid
// message id), the error also wraps courier.CodeConfigInvalid, which
// fails the delivery at once (see client.Config.SignerFor).
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
	return &coded.Error{Code: code, Msg: msg, Err: courier.CodeSignatureInvalid}
}

// checkSecrets checks what a shared-secret verifier's config named cfg
// must hold: a Sender (see checkSender) and a non-empty list, named field,
// of parsed secrets.
func checkSecrets(cfg, sender, field string, secrets []Secret) error {
	if err := checkSender(cfg, sender); err != nil {
		return err
	}
	if len(secrets) == 0 {
		return configError(cfg + "." + field + " is empty")
	}
	held := make(map[string][sha256.Size]byte, len(secrets)) // id: the digest of the secret under it
	for i, s := range secrets {
		if s.m == nil {
			return configError(fmt.Sprintf("%s.%s[%d] is not a parsed secret", cfg, field, i))
		}
		// Two secrets under one id would leave the Principal's KeyID
		// unable to say which verified.
		if was, ok := held[s.ID()]; ok && was != s.m().digest {
			return configError(fmt.Sprintf("%s.%s[%d]: secret id %q appears twice, over other secrets", cfg, field, i, printableID(s.ID())))
		}
		held[s.ID()] = s.m().digest
	}
	return nil
}

// maxSender is the longest Principal.Sender a verifier is configured
// with: the receivers record it as the sender of their Inbox records,
// which holds at most 256 bytes.
const maxSender = 256

// checkSender refuses a verifier's Sender that is empty, longer than
// maxSender bytes, not UTF-8 or holding a NUL: no receiver could record
// it, so every request from it would be refused. It refuses the other
// control characters too (C0, DEL and C1): a Sender names who signs, in
// receivers' records and logs, where one would read as the end of a line
// or a terminal's escape.
func checkSender(cfg, sender string) error {
	switch {
	case sender == "":
		return configError(cfg + `.Sender is empty: name who these keys prove sent a request ("orders"), the receivers' dedupe namespace`)
	case len(sender) > maxSender:
		return configError(fmt.Sprintf("%s.Sender is longer than %d bytes", cfg, maxSender))
	case !utf8.ValidString(sender):
		return configError(cfg + ".Sender is not UTF-8")
	case strings.ContainsFunc(sender, unicode.IsControl):
		return configError(cfg + ".Sender holds a control character")
	}
	return nil
}

// maxTolerance is the most a Standard Webhooks or AdCP HMAC verifier's
// Tolerance may be. Those requests carry no nonce: one replayed inside the
// tolerance is refused by the receiver's inbox record alone, which must
// outlive twice the tolerance, and store.Inbox.Prune keeps records at least
// 24 hours. An hour keeps that margin wide for any sender whose clock is
// merely wrong.
const maxTolerance = time.Hour

// checkTolerance refuses a verifier's Tolerance below one second or above
// maxTolerance.
func checkTolerance(cfg string, tolerance time.Duration) error {
	switch {
	case tolerance < time.Second:
		return configError(cfg + ".Tolerance is below one second")
	case tolerance > maxTolerance:
		return configError(cfg + ".Tolerance is above one hour")
	}
	return nil
}

// configError returns the error of a constructor or parser refusing its
// configuration: a case of courier.CodeConfigInvalid whose message names the
// field. msg never carries key or secret bytes.
func configError(msg string) error {
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "signature: " + msg}
}

// permanentSigningError returns a Sign failure with a content-free
// message, for what the request, the message or the signer decides: no
// retry changes it, so it wraps CodeConfigInvalid, and a courier worker
// fails the delivery at once.
func permanentSigningError(msg string) error {
	return &coded.Error{Code: courier.CodeSigningFailed, Msg: msg, Err: courier.CodeConfigInvalid}
}

// transientSigningError returns a Sign failure another attempt may not
// meet: a courier worker retries the delivery.
func transientSigningError(msg string) error {
	return &coded.Error{Code: courier.CodeSigningFailed, Msg: msg}
}

// nowFunc returns now, or time.Now when now is nil.
func nowFunc(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// oneHeader returns the single, non-empty, bounded field line of name:
// a repeated one is malformed, a missing or blank one missing, one over
// maxHeaderBytes malformed.
func oneHeader(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) > 1:
		return "", reject(courier.CodeSignatureMalformed, name+" header is repeated")
	case len(vs) == 0 || strings.TrimSpace(vs[0]) == "":
		return "", reject(courier.CodeSignatureMissing, name+" header is missing")
	case len(vs[0]) > maxHeaderBytes:
		return "", reject(courier.CodeSignatureMalformed, name+" header is too long")
	}
	return vs[0], nil
}

// sealed holds a value out of reach of fmt, slog and every other
// reflection-based printer or encoder: they see a func and print at most its
// address. Secret-holding types keep their material sealed, so that no verb,
// no nesting in a caller's struct and no log handler can show it.
type sealed[T any] func() T

func seal[T any](v T) sealed[T] { return func() T { return v } }

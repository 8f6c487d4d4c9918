package middleware

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/verified"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/signature"
)

// Verify checks each request's signature with v before next sees it. It
// reads the raw body once with [ReadBody], within limits (413
// body_too_large, 503 server_busy, 408 request_timeout, 400
// invalid_argument), and calls v.Verify over those exact bytes; nothing is
// parsed before the signature passes. The body's reservation from the
// Budget is held until next returns, as long as the bytes are in use.
//
// A signature failure (a case of courier.CodeSignatureInvalid) is answered
// 401 with the failure's precise code, falling back to signature_invalid,
// in the problem body and in `WWW-Authenticate: Signature error="<code>"`.
// Two failures of RFC 9421 (errors matching their codes, from any
// verifier) are the receiver's momentary inability to accept, not a bad
// signature, and are answered so that the sender comes
// back later (a courier sender retries a 503 and a 429, where it fails a
// 401 for good): with the code in the problem body (the 429 with
// Retry-After too), and without WWW-Authenticate, which challenges for
// credentials and belongs to a 401 alone:
//
//	503 webhook_signature_revocation_stale  the verifier's revocation data is past
//	                                        its refresh deadline and grace: no key
//	                                        is vouched for until it is refreshed
//	                                        (no Retry-After: the sender's own
//	                                        schedule spreads its attempts over the
//	                                        hours a refresher may take to mend)
//	429 webhook_signature_rate_abuse        the key holds its cap of live nonces in
//	                                        the replay cache, which frees as they
//	                                        expire (Retry-After: 421)
//
// Any other Verify error is the verifier's own trouble (a key or replay
// store that could not answer): it is answered 503 internal_error with
// Retry-After, so the sender retries, and logged at Error with the error,
// "middleware: signature could not be verified now", on the logger of the
// Recover around Verify (without one, slog.Default()'s handler from Warn
// up); at Info, "middleware: signature check ended by its client", when
// the request's client went away meanwhile, which needs a Recover with a
// Logger to be seen. On success next gets a request whose
// Body reads the same bytes again, with [PrincipalFromContext] set.
//
// The bytes are the body as it arrived: a body under a content coding
// (Content-Encoding: gzip) is verified and handed on coded, never decoded.
// The receivers of package handler refuse such a body, 415; a handler of
// your own that reads JSON should refuse it too, before Verify.
//
// Verify is for handlers of your own: keep it away from package handler's,
// which verify each request themselves. Around one of those, a request is
// verified twice, and under RFC 9421 the second check finds the nonce the
// first one recorded and refuses the request as a replay (401
// webhook_signature_replayed, which a courier sender does not retry).
//
// Zero fields of limits take their defaults (see [BodyLimits]): with a nil
// Budget, each call of Verify makes a Budget of its own.
// Verify panics if v is nil or limits are invalid ([BodyLimits.Validate]).
func Verify(v signature.Verifier, limits BodyLimits) func(http.Handler) http.Handler {
	if nilcheck.Nil(v) {
		panic("middleware: Verify verifier is nil")
	}
	mustValidate(limits)
	limits = limits.defaulted()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, reserved, ok := readBody(w, r, limits)
			if !ok {
				return
			}
			defer limits.Budget.Release(reserved)
			p, err := v.Verify(r.Context(), r, body)
			switch {
			case errors.Is(err, courier.CodeWebhookRevocationStale):
				// When the data is refreshed is the receiver's schedule, which
				// Verify does not know, and a refresher that fails may take
				// hours to mend: a Retry-After would have the sender spend its
				// attempts at that pace, where its own schedule spreads them.
				problem.Error(w, http.StatusServiceUnavailable, courier.CodeWebhookRevocationStale,
					"the receiver's key revocation data is stale; retry once it is refreshed")
				return
			case errors.Is(err, courier.CodeWebhookRateAbuse):
				problem.RetryAfter(w, http.StatusTooManyRequests, courier.CodeWebhookRateAbuse,
					"the signing key holds its cap of live nonces; retry once they expire", retryNonceCap)
				return
			case errors.Is(err, courier.CodeSignatureInvalid):
				code := courier.CodeOf(err)
				if !isToken(code) {
					code = courier.CodeSignatureInvalid
				}
				w.Header().Set("WWW-Authenticate", `Signature error="`+string(code)+`"`)
				problem.Error(w, http.StatusUnauthorized, code, "signature verification failed")
				return
			case err != nil:
				// The verifier's own trouble: the handler serving the
				// answer logs it with its cause, or Verify does.
				if !problem.NoteCause(w, err) {
					logVerifyFailure(r, err)
				}
				problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInternal, "signature could not be verified now", time.Second)
				return
			}
			ctx := context.WithValue(verified.WithBody(r.Context(), body), principalKey, p)
			r = r.WithContext(ctx)
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
			next.ServeHTTP(w, r)
		})
	}
}

// logVerifyFailure logs why the verifier could not check r: at Error with
// err, or at Info for a request whose client went away meanwhile (a
// verifier that asks a store with r's context fails with its end), as
// Transaction logs one.
func logVerifyFailure(r *http.Request, err error) {
	ctx := r.Context()
	if writerctx.EndedByClient(ctx, err) {
		loggerFrom(ctx).InfoContext(ctx, "middleware: signature check ended by its client")
		return
	}
	loggerFrom(ctx).ErrorContext(ctx, "middleware: signature could not be verified now", slog.Any(logkey.Error, err))
}

// retryNonceCap is the Retry-After of a request refused because its key
// holds its cap of live nonces. How soon one of them expires is the replay
// cache's to know, not Verify's. A nonce is held for its signature's
// window, at most 300 seconds under AdCP (the signer's default), and the
// verifier's clock skew past it, 60 seconds by default
// (signature.RFC9421VerifierConfig.ClockSkew), and a second more (the
// window compares whole seconds); store.Store.Replay, the cache for
// several processes, counts a key's nonces by the minute they expire in,
// and frees a minute's count once that minute has passed, up to 60
// seconds later still. 421 seconds on, every nonce of a signature
// created by now has expired under those defaults, in either cache, and
// the key's cap has room again unless its signer keeps minting nonces as
// fast. A shorter wait would mostly meet the cap again.
const retryNonceCap = 300*time.Second + 60*time.Second + time.Second + time.Minute

// isToken reports whether c is a non-empty code of [a-z0-9_], safe to quote
// in WWW-Authenticate as it is. Every courier code is.
func isToken(c courier.Code) bool {
	for _, b := range []byte(c) {
		if (b < 'a' || b > 'z') && (b < '0' || b > '9') && b != '_' {
			return false
		}
	}
	return c != ""
}

package middleware

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/problem"
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
// Any other Verify error is the verifier's own trouble (a key or replay
// store that could not answer): it is answered 503 internal_error with
// Retry-After, so the sender retries. On success next gets a request whose
// Body reads the same bytes again, with [BodyFromContext] and
// [PrincipalFromContext] set.
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
			case errors.Is(err, courier.CodeSignatureInvalid):
				code := courier.CodeOf(err)
				if !isToken(code) {
					code = courier.CodeSignatureInvalid
				}
				w.Header().Set("WWW-Authenticate", `Signature error="`+string(code)+`"`)
				problem.Error(w, http.StatusUnauthorized, code, "signature verification failed")
				return
			case err != nil:
				problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInternal, "signature could not be verified now", time.Second)
				return
			}
			ctx := context.WithValue(context.WithValue(r.Context(), bodyKey, body), principalKey, p)
			r = r.WithContext(ctx)
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
			r.TransferEncoding = nil
			next.ServeHTTP(w, r)
		})
	}
}

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

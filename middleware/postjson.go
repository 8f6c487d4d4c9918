package middleware

import (
	"net/http"

	"github.com/courier-go/courier/internal/jsonbody"
)

// PostJSON passes next only a POST whose body is JSON sent as it is, as
// every receiver of package handler takes them, and answers the rest
// before anything reads their bodies:
//
//   - 405 method_not_allowed, with Allow: POST, to any other method;
//   - 415 unsupported_media_type to a body not declared JSON on one
//     Content-Type line (application/json, in any case, with at most a
//     charset naming UTF-8);
//   - 415 unsupported_media_type, with Accept-Encoding: identity, to a
//     body under a content coding (any Content-Encoding but identity):
//     courier decodes none, as a signature covers the bytes as sent.
//
// Put it in front of [Verify] in a receiver of your own (see the package
// doc).
func PostJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if jsonbody.PostJSON(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

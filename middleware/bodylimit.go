package middleware

import (
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// BodyLimit bounds request bodies to n bytes. A request whose Content-Length
// already exceeds n is answered 413 (code body_too_large) and next is not
// called. Any other request reaches next with its Body behind
// http.MaxBytesReader, so reading past n fails with *http.MaxBytesError
// and the server closes the connection after the response; a body of
// unknown length (chunked) can only be found too large while next reads it,
// and [ReadBody] answers 413 for it then.
//
// BodyLimit panics if n <= 0.
func BodyLimit(n int64) func(http.Handler) http.Handler {
	if n <= 0 {
		panic("middleware: BodyLimit limit must be greater than zero")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				tooLarge(w)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}

// tooLarge answers 413 with code body_too_large.
func tooLarge(w http.ResponseWriter) {
	problem.Error(w, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge, "request body exceeds the limit")
}

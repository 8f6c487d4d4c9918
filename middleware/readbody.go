package middleware

import (
	"errors"
	"io"
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// ReadBody reads r's whole body, at most maxBody bytes, for a handler that
// needs the raw bytes (to verify or digest them) before it parses anything.
// A body over maxBody, whether its Content-Length says so up front or a body
// of unknown length runs past it (or past an outer [BodyLimit]), is answered
// 413 with code body_too_large; a body that cannot be read (the client went
// away, broken chunked encoding) is answered 400 with code invalid_argument.
// In both cases ReadBody has written the response and returns false.
//
// maxBody must be positive: ReadBody does not check it on each request, and
// a limit of zero or less admits only empty bodies.
func ReadBody(w http.ResponseWriter, r *http.Request, maxBody int64) ([]byte, bool) {
	if r.ContentLength > maxBody {
		tooLarge(w)
		return nil, false
	}
	if r.Body == nil { // only a hand-built request; a server's is never nil
		return []byte{}, true
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			tooLarge(w)
		} else {
			problem.Error(w, http.StatusBadRequest, courier.CodeInvalidArgument, "request body could not be read")
		}
		return nil, false
	}
	return body, true
}

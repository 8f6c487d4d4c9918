package middleware

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// ReadBody reads r's whole body into memory, within limits, for a handler
// that needs the raw bytes (to verify or digest them) before it parses
// anything. In order:
//
//   - a Content-Length over MaxBytes is answered 413 body_too_large before
//     any of the body is read;
//   - what the body will take — its Content-Length, or MaxBytes when the
//     length is unknown — is reserved from the Budget, and the request is
//     answered 503 server_busy with Retry-After at once if it does not fit;
//   - the body is read into a buffer of at most that size (past its first
//     MiB, grown as the bytes arrive), under a read deadline ReadTimeout
//     from now: a body still incomplete then is answered 408
//     request_timeout and its connection is closed;
//   - a body of unknown length that runs past MaxBytes (or past an outer
//     http.MaxBytesReader) is answered 413 body_too_large;
//   - a body that cannot be read (the client went away, broken chunked
//     encoding, a body that does not match its Content-Length) is answered
//     400 invalid_argument.
//
// After a 413 or a 503 the rest of the body is discarded within
// LingerBytes and LingerTimeout (see [BodyLimits]). Whenever it refuses,
// ReadBody has written the response and returns false. The deadline ends
// with a successful read; it does not bound the handler's own work.
//
// The reservation is given back when ReadBody returns; [Verify] holds it
// until its next handler returns, as long as the body is in use. Zero
// fields of limits take their defaults; with a nil Budget, ReadBody
// reserves from one Budget of 64 MiB shared by every call that
// leaves it nil. ReadBody panics on limits [BodyLimits.Validate]
// refuses, and on a MaxBytes over 64 MiB with a nil Budget, which the
// shared Budget could never hold: such a MaxBytes needs a Budget of its
// own.
//
// The deadlines need w to reach the server's writer through
// http.ResponseController (wrappers with Unwrap); where it cannot, the body
// is read without a deadline and a refused body is not discarded.
func ReadBody(w http.ResponseWriter, r *http.Request, limits BodyLimits) ([]byte, bool) {
	limits = limits.withDefaults(sharedBudget)
	mustValidate(limits)
	body, reserved, ok := readBody(w, r, limits)
	limits.Budget.Release(reserved)
	return body, ok
}

// sharedBudget is the Budget of ReadBody calls that give none.
var sharedBudget = NewBudget(defaultBudgetBytes)

// Errors of a body that does not end where it should.
var (
	errBodyTooLong  = errors.New("middleware: body longer than expected")
	errBodyTooShort = errors.New("middleware: body shorter than its Content-Length")
)

// readBody is ReadBody with complete limits. It returns the bytes reserved
// from limits.Budget, for the caller to release when it is done with the
// body (zero unless ok).
func readBody(w http.ResponseWriter, r *http.Request, l BodyLimits) (body []byte, reserved int64, ok bool) {
	if r.ContentLength > l.MaxBytes {
		refuse(w, r, l, http.StatusRequestEntityTooLarge, false)
		return nil, 0, false
	}
	if r.Body == nil || r.Body == http.NoBody { // a server's body is NoBody when empty
		return []byte{}, 0, true
	}
	size := r.ContentLength
	if size < 0 {
		size = l.MaxBytes
	}
	if !l.Budget.Reserve(size) {
		refuse(w, r, l, http.StatusServiceUnavailable, false)
		return nil, 0, false
	}
	held := true
	defer func() {
		if held && !ok { // a panic reading the body (a reader in front)
			l.Budget.Release(size)
		}
	}()
	rc := http.NewResponseController(w)
	set := setBodyDeadline(rc, r, l.ReadTimeout)
	body, err := readAll(r.Body, size, r.ContentLength >= 0)
	if err == nil {
		// net/http lifts the deadline when the connection's body ends, but
		// a body read in front of this one (by Verify, say) never reaches
		// it: left on the connection, the deadline would end net/http's
		// background read and cancel the request's context.
		if set {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return body, size, true
	}
	held = false
	l.Budget.Release(size)
	_, outer := errors.AsType[*http.MaxBytesError](err)
	switch {
	case outer || errors.Is(err, errBodyTooLong) && r.ContentLength < 0:
		refuse(w, r, l, http.StatusRequestEntityTooLarge, true)
	case errors.Is(err, os.ErrDeadlineExceeded):
		closeAfter(w, r)
		problem.Error(w, http.StatusRequestTimeout, courier.CodeRequestTimeout, "request body did not arrive in time")
	default:
		closeAfter(w, r)
		problem.Error(w, http.StatusBadRequest, courier.CodeInvalidArgument, "request body could not be read")
	}
	return nil, 0, false
}

// setBodyDeadline sets the connection's read deadline d from now, unless
// the server's own ReadTimeout, counted from the start of the request, is
// no longer than d and so ends first. It reports whether it set one.
func setBodyDeadline(rc *http.ResponseController, r *http.Request, d time.Duration) bool {
	if srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok && srv.ReadTimeout > 0 && srv.ReadTimeout <= d {
		return false
	}
	return rc.SetReadDeadline(time.Now().Add(d)) == nil
}

// preallocMax is the largest reservation read into a buffer of its whole
// size at once; past it (a large MaxBytes, a large Content-Length) the
// buffer grows as the bytes come, up to the reservation, so that a
// client's Content-Length or a large MaxBytes allocates no more than
// about twice what the client sends, and never more than is reserved.
const preallocMax = 1 << 20

// readAll reads body to its end: exactly size bytes when exact (its
// Content-Length), else at most size. A body that goes on past that is
// errBodyTooLong; one that ends short of its exact size, errBodyTooShort.
func readAll(body io.Reader, size int64, exact bool) ([]byte, error) {
	grow := size > preallocMax
	buf := make([]byte, 0, min(size, preallocMax))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) == size || !grow { // full: the body must end here
				return buf, expectEOF(body)
			}
			next := make([]byte, len(buf), min(2*int64(cap(buf)), size))
			copy(next, buf)
			buf = next
		}
		m, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		switch {
		case errors.Is(err, io.EOF) && exact && int64(len(buf)) < size:
			return nil, errBodyTooShort
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, err
		}
	}
}

// expectEOF reads one byte more: none (io.EOF) is success, one is
// errBodyTooLong.
func expectEOF(body io.Reader) error {
	var b [1]byte
	switch _, err := io.ReadFull(body, b[:]); {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return errBodyTooLong
	default:
		return err
	}
}

// closeAfter tells an HTTP/1 client the connection closes after this
// response: the rest of the request is not read.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

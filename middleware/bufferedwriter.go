package middleware

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// bufferedWriter holds a handler's whole response until send. Its header
// map starts as a copy of the real one, so headers set by outer middleware
// stay and headers set by the handler reach the client only with send. As
// from a server's writer, the headers sent are those set before the status
// (WriteHeader or the first Write); those set after it are sent only as
// trailers: those the response declares, and those of http.TrailerPrefix.
// A body written past the Content-Length declared with the status is
// refused with http.ErrContentLength, as net/http refuses it.
type bufferedWriter struct {
	w       http.ResponseWriter
	head    bool // a response to HEAD
	header  http.Header
	status  int         // 0 until WriteHeader or Write
	sent    http.Header // header as it stood when status was set
	length  int64       // the Content-Length sent declares, or -1
	written int64       // bytes written to the body, refused ones too
	body    bytes.Buffer
}

func newBufferedWriter(w http.ResponseWriter, r *http.Request) *bufferedWriter {
	return &bufferedWriter{w: w, head: r.Method == http.MethodHead, header: w.Header().Clone()}
}

// setStatus records the response's status and the header it goes with,
// and the body's length that header declares.
func (b *bufferedWriter) setStatus(code int) {
	b.status = code
	b.sent = b.header.Clone()
	b.length = -1
	if n, err := strconv.ParseInt(b.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		b.length = n
	}
}

func (b *bufferedWriter) Header() http.Header { return b.header }

// WriteHeader records the first final status; informational (1xx) ones are
// dropped, since nothing may reach the client before the transaction ends.
// Once the status is set, a WriteHeader is ignored whatever its code, as
// net/http's servers ignore it.
func (b *bufferedWriter) WriteHeader(code int) {
	if b.status != 0 {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	if code >= 200 {
		b.setStatus(code)
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.setStatus(http.StatusOK)
	}
	if !bodyAllowed(b.status) {
		return 0, http.ErrBodyNotAllowed
	}
	b.written += int64(len(p))
	if b.length >= 0 && b.written > b.length {
		return 0, http.ErrContentLength
	}
	return b.body.Write(p)
}

// Flush keeps the response held: it is sent when the transaction ends.
func (b *bufferedWriter) Flush() {}

// FlushError is Flush for http.ResponseController.
func (b *bufferedWriter) FlushError() error { return nil }

// Hijack refuses: a hijacked connection would take next's answer to the
// client before the transaction ends. http.ResponseController asks it
// before it unwraps.
func (b *bufferedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, fmt.Errorf("middleware: Transaction holds the response until its transaction ends: %w", http.ErrNotSupported)
}

// Unwrap lets http.ResponseController reach the server's writer (deadlines,
// full duplex).
func (b *bufferedWriter) Unwrap() http.ResponseWriter { return b.w }

// discard drops the status and body held so far, for Recover to answer
// in their place.
func (b *bufferedWriter) discard() {
	b.status = 0
	b.sent = nil
	b.written = 0
	b.body.Reset()
}

func (b *bufferedWriter) statusCode() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// send writes the held response to the real writer: the header as it
// stood at the status, the body, then the header as the handler left it,
// from which the server takes the trailers. The http.TrailerPrefix keys
// the handler set after the status go out with the status too (no server
// sends them as headers), so that the response leaves room for them, as
// a streamed one does. A body of known length is sent with its
// Content-Length, unless it has trailers or answers a HEAD without a byte
// (whose length is the GET's, not known).
func (b *bufferedWriter) send() {
	sent := b.sent
	if sent == nil { // nothing written: 200 now
		sent = b.header
	}
	h := b.w.Header()
	clear(h)
	maps.Copy(h, sent)
	for k, v := range b.header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			h[k] = v
		}
	}
	status := b.statusCode()
	if bodyAllowed(status) && h.Get("Content-Length") == "" && h.Get("Transfer-Encoding") == "" &&
		!hasTrailers(h) && (!b.head || b.body.Len() > 0) {
		h.Set("Content-Length", strconv.Itoa(b.body.Len()))
	}
	b.w.WriteHeader(status)
	if b.body.Len() > 0 {
		_, _ = b.w.Write(b.body.Bytes())
	}
	clear(h)
	maps.Copy(h, b.header)
}

// hasTrailers reports whether h declares trailers, in a Trailer header or
// with a key of http.TrailerPrefix.
func hasTrailers(h http.Header) bool {
	if _, ok := h["Trailer"]; ok {
		return true
	}
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

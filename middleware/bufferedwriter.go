package middleware

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strconv"
)

// bufferedWriter holds a handler's whole response until send. Its header
// map starts as a copy of the real one, so headers set by outer middleware
// stay and headers set by the handler reach the client only with send.
type bufferedWriter struct {
	w      http.ResponseWriter
	header http.Header
	status int // 0 until WriteHeader or Write
	body   bytes.Buffer
}

func newBufferedWriter(w http.ResponseWriter) *bufferedWriter {
	return &bufferedWriter{w: w, header: w.Header().Clone()}
}

func (b *bufferedWriter) Header() http.Header { return b.header }

// WriteHeader records the first final status; informational (1xx) ones are
// dropped, since nothing may reach the client before the transaction ends.
func (b *bufferedWriter) WriteHeader(code int) {
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code)) // as net/http does
	}
	if b.status == 0 && code >= 200 {
		b.status = code
	}
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if !bodyAllowed(b.status) {
		return 0, http.ErrBodyNotAllowed
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
	b.body.Reset()
}

func (b *bufferedWriter) statusCode() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// send writes the held response to the real writer.
func (b *bufferedWriter) send() {
	h := b.w.Header()
	clear(h)
	maps.Copy(h, b.header)
	status := b.statusCode()
	if bodyAllowed(status) && h.Get("Content-Length") == "" && h.Get("Transfer-Encoding") == "" {
		h.Set("Content-Length", strconv.Itoa(b.body.Len()))
	}
	b.w.WriteHeader(status)
	if b.body.Len() > 0 {
		_, _ = b.w.Write(b.body.Bytes())
	}
}

// bodyAllowed reports whether a response with status may have a body.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}

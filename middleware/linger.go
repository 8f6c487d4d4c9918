package middleware

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// retryBusy is the Retry-After of a 503 server_busy: bodies in flight are
// read within seconds, so room comes back soon.
const retryBusy = time.Second

// refuse answers a request whose body is not (all) read with 413
// body_too_large or 503 server_busy, then discards what the client still
// sends, within l's linger bounds, before the connection closes.
//
// Without that, net/http closes the connection with the unread body in its
// buffers, the kernel answers the client's next segment with a reset, and
// a client that sends its whole request before reading (Python's urllib,
// Node's http, anything with Connection: close) sees ECONNRESET instead of
// the answer; a sender takes that for a network failure. started says some
// of the body was read already (so a 100-continue, if asked for, was sent).
func refuse(w http.ResponseWriter, r *http.Request, l BodyLimits, status int, started bool) {
	rc := http.NewResponseController(w)
	linger := lingers(r, started) && rc.EnableFullDuplex() == nil
	var shutdown <-chan struct{}
	if linger {
		shutdown = shutdownOf(r) // before the answer, so a shutdown after it is seen
	}
	closeAfter(w, r)
	if status == http.StatusServiceUnavailable {
		problem.RetryAfter(w, status, courier.CodeServerBusy, "too many request bodies in flight; retry later", retryBusy)
	} else {
		tooLarge(w)
	}
	if !linger {
		return
	}
	_ = rc.Flush() // the answer goes out now, for clients that read while they send
	discard(rc, r.Body, l, shutdown)
}

// tooLarge answers 413 with code body_too_large.
func tooLarge(w http.ResponseWriter) {
	problem.Error(w, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge, "request body exceeds the limit")
}

// lingers reports whether a refused request's body is worth discarding:
// an HTTP/1 body the client is sending. A client that asked for
// 100-continue and was not told to go on sends no body; HTTP/2 resets one
// stream, never the connection.
func lingers(r *http.Request, started bool) bool {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody {
		return false
	}
	return started || !strings.EqualFold(r.Header.Get("Expect"), "100-continue")
}

// discard reads and drops the rest of body, at most l.LingerBytes of it and
// for at most l.LingerTimeout, and less if the server shuts down. A body
// not drained to its end is given up with a read deadline in the past, so
// net/http closes the connection without reading on.
func discard(rc *http.ResponseController, body io.Reader, l BodyLimits, shutdown <-chan struct{}) {
	if rc.SetReadDeadline(time.Now().Add(l.LingerTimeout)) != nil {
		return // unbounded in time: do not linger at all
	}
	stop := abortOn(shutdown, rc) // after the deadline above, which it overrides
	_, err := io.CopyN(io.Discard, body, l.LingerBytes)
	stop()
	if !errors.Is(err, io.EOF) {
		_ = rc.SetReadDeadline(time.Now())
	}
}

// abortOn sets rc's read deadline to now when shutdown is closed, until
// stop is called; stop returns once nothing of it runs.
func abortOn(shutdown <-chan struct{}, rc *http.ResponseController) (stop func()) {
	if shutdown == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-shutdown:
			_ = rc.SetReadDeadline(time.Now())
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// shutdowns maps every *http.Server a lingering request came through to a
// context canceled when that server's Shutdown begins. Keys are weak, and a
// server's entry goes when the server is collected.
var shutdowns sync.Map // weak.Pointer[http.Server] -> context.Context

// shutdownOf returns a channel closed when the server r came through begins
// to shut down, or nil when r came through none. The first call for a
// server registers with it (http.Server.RegisterOnShutdown) once.
func shutdownOf(r *http.Request) <-chan struct{} {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if !ok || srv == nil {
		return nil
	}
	key := weak.Make(srv)
	if ctx, ok := shutdowns.Load(key); ok {
		return ctx.(context.Context).Done()
	}
	ctx, cancel := context.WithCancel(context.Background())
	if prev, loaded := shutdowns.LoadOrStore(key, ctx); loaded {
		cancel()
		return prev.(context.Context).Done()
	}
	srv.RegisterOnShutdown(cancel) // cancel may run more than once: Shutdown twice
	runtime.AddCleanup(srv, func(key weak.Pointer[http.Server]) { shutdowns.Delete(key) }, key)
	return ctx.Done()
}

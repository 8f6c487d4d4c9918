package middleware

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"net/http"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logdefault"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/recovered"
)

// Recover turns a panic in next (panic(nil) too, whatever GODEBUG's
// panicnil says; not runtime.Goexit, which ends the goroutine and answers
// nothing) into a 500 problem (code internal_error) and logs it, with
// the panic value and stack, as "middleware: panic recovered" at error
// level; a nil logger is slog.Default(), its Warn and Error lines only
// (slog.New(slog.DiscardHandler) logs nothing). If next had already started its
// response (one a [Transaction] around Recover holds back has not
// started, also behind middleware between them whose ResponseWriter has
// an Unwrap method), a 500 can no longer be sent: Recover aborts the
// response with http.ErrAbortHandler instead, so the client sees a broken
// response rather than a truncated one that looks complete. A panic with
// http.ErrAbortHandler itself is re-panicked untouched. Headers next set
// are dropped from the 500; those set before it (by outer middleware) stay.
//
// A [Transaction] inside Recover logs through Recover's logger the
// transactions it could not begin or commit, which it answers 503.
func Recover(logger *slog.Logger) func(http.Handler) http.Handler {
	logger = logdefault.Or(logger)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(context.WithValue(r.Context(), loggerKey, logger))
			tw := &trackingWriter{ResponseWriter: w}
			outer := w.Header().Clone() // what next found, restored for the 500
			// After runtime.Goexit in next (t.FailNow, say) Run does not
			// return: only a panic, recovered, gets past it without next
			// returning, panic(nil) too (see recovered.Run).
			v, stack, panicked := recovered.Run(func() { next.ServeHTTP(tw, r) })
			if !panicked {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			//nolint:contextcheck // it logs with r.Context(); the answer needs none
			logger.ErrorContext(r.Context(), "middleware: panic recovered",
				slog.Any(logkey.Panic, v), slog.String(logkey.Stack, string(stack)))
			if held, ok := heldWriter(w); ok && tw.started {
				held.discard() // Transaction's: nothing reached the client
			} else if tw.started {
				panic(http.ErrAbortHandler)
			}
			h := w.Header()
			clear(h)
			maps.Copy(h, outer)
			problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "")
		})
	}
}

// heldWriter returns Transaction's held writer when w is one, or wraps
// one (through Unwrap, as http.ResponseController reaches the writer
// beneath): a middleware between Transaction and Recover that wraps the
// writer sends nothing past it either.
func heldWriter(w http.ResponseWriter) (*bufferedWriter, bool) {
	for {
		switch t := w.(type) {
		case *bufferedWriter:
			return t, true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil, false
		}
	}
}

// trackingWriter records whether the response has started.
type trackingWriter struct {
	http.ResponseWriter
	started bool
}

// WriteHeader counts a final status, or 101, as a start once it is
// written: a code the writer refuses with a panic (net/http's, over 999)
// sent nothing.
func (w *trackingWriter) WriteHeader(code int) {
	w.ResponseWriter.WriteHeader(code)
	w.started = w.started || code >= 200 || code == http.StatusSwitchingProtocols
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *trackingWriter) Flush() { _ = w.FlushError() }

// FlushError counts as a start unless flushing is not supported, which
// sent nothing.
func (w *trackingWriter) FlushError() error {
	err := http.NewResponseController(w.ResponseWriter).Flush()
	w.started = w.started || !errors.Is(err, http.ErrNotSupported)
	return err
}

// Hijack counts as a start only if it succeeds: a failed one sent nothing.
func (w *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	w.started = w.started || err == nil
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *trackingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

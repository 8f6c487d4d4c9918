package middleware

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/writerctx"
)

// Transaction runs each request in its own database transaction, begun by
// begin with the request's context and available to next through
// [TxFromContext]. Pass a Store's Begin (on PostgreSQL its transactions
// are READ COMMITTED, whatever the database's default): on SQLite they queue
// on the one connection courier writes through, so the application's
// writes never wait in SQLite's busy handler beside the worker's, nor fail
// with "database is locked":
//
//	middleware.Transaction(s.Begin)(app)
//
// Any other source of transactions fits too, e.g. for a *sqlx.DB:
//
//	func(ctx context.Context) (*sqlx.Tx, error) { return db.BeginTxx(ctx, nil) }
//
// Read the body before the transaction begins: put Transaction inside
// [Verify] (and call [ReadBody] before it, not in next). Otherwise, with a
// Store's Begin on SQLite, a client sending its body slowly, signed or
// not, holds the one writer from every other request and from the worker
// for as long as the read takes (up to BodyLimits.ReadTimeout).
//
// next's response (status, headers, body and trailers) is held back until
// the transaction is settled, then sent as the server would have sent it,
// so the client never sees a success whose effects were rolled back:
//
//   - status 400 or above: rolled back, then the response is sent;
//   - any other status: committed, and the response is sent only if the
//     commit succeeded, else it is answered as a transaction that cannot
//     begin (below);
//   - a panic in next: rolled back, and the panic goes on up unchanged.
//
// A transaction that cannot begin or commit is answered 503 (code
// internal_error) with Retry-After, as the receivers of package handler
// answer a store that failed: the sender tries again later. It is logged
// through the logger of the [Recover] around Transaction (without one,
// through slog.Default(), from Warn up): at Error, "middleware: transaction could not commit" (or
// begin), with the status, the code and the database's error, never the
// request's content; at Info, without the error, when the client went
// away, which ended the request's context and rolled the transaction
// back. next should leave the commit or rollback to Transaction; if it
// ends the transaction itself, it has decided what happened, and its
// response is sent as it wrote it. Flushing the held response (http.Flusher or
// http.ResponseController) is a no-op, and hijacking the connection fails
// with http.ErrNotSupported.
//
// The context next gets is marked as holding the Store's writer, as the
// one a receiver in package handler gives the application's function. On
// SQLite the request's transaction holds the database's one writer, so
// Store.Begin, a Store method that writes, or a write through Store.DB(),
// given that context, would wait for the request itself: each fails at
// once with code write_outside_transaction instead; write through the
// request's transaction. Reads, and read-only transactions through DB(),
// go on. So on SQLite, begin transactions on the Store's database: with
// a begin on another SQLite database the Store's own writes would be
// refused. Elsewhere the mark changes nothing.
//
// Serve courier's own handlers (package handler) beside Transaction, not
// inside it: each begins a transaction of its own, which inside one would
// wait for the writer the request holds (SQLite) or for a second
// connection of the pool (PostgreSQL), never free with as many such
// requests in flight as connections. They answer such a request 503 at
// once instead.
//
// A begin that returns no transaction and no error is answered as one
// that could not begin. Transaction panics if begin is nil.
func Transaction(begin func(ctx context.Context) (*sqlx.Tx, error)) func(http.Handler) http.Handler {
	if begin == nil {
		panic("middleware: Transaction begin is nil")
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx, err := begin(r.Context())
			if err != nil || tx == nil { // a begin of one's own may return neither
				if err == nil {
					err = errNoTx
				}
				unsettled(w, r, "begin", err)
				return
			}
			settled := false
			defer func() {
				if !settled { // next panicked: the panic continues after this
					_ = tx.Rollback()
				}
			}()
			bw := newBufferedWriter(w, r)
			ctx := writerctx.WithHeld(context.WithValue(r.Context(), txKey, tx))
			next.ServeHTTP(bw, r.WithContext(ctx))
			settled = true
			if bw.statusCode() >= http.StatusBadRequest {
				_ = tx.Rollback()
				bw.send()
				return
			}
			// A transaction next ended itself is next's answer; one
			// database/sql rolled back as the request's context ended
			// (ErrTxDone too) is not.
			if err := tx.Commit(); err != nil && (!errors.Is(err, sql.ErrTxDone) || r.Context().Err() != nil) {
				unsettled(w, r, "commit", writerctx.CommitFailure(r.Context(), err))
				return
			}
			bw.send()
		})
	}
}

// errNoTx is a begin that returned neither a transaction nor an error.
var errNoTx = errors.New("middleware: begin returned no transaction and no error")

// unsettled answers r, whose transaction could not begin or commit (what)
// with err, 503 with Retry-After, and logs it through the logger of the
// Recover around Transaction (see loggerFrom): at Error with err, which is the
// driver's or the store's and holds none of the request's content; at
// Info without it when r's client went away, which ended r's context and
// rolled the transaction back (no database failed); a context cancelled
// with a cause of its own (a server's BaseContext at shutdown) is logged
// at Error, its cause with err.
func unsettled(w http.ResponseWriter, r *http.Request, what string, err error) {
	problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInternal, "transaction could not "+what, time.Second)
	ctx := r.Context()
	attrs := []any{slog.Int(logkey.HTTPStatus, http.StatusServiceUnavailable), slog.String(logkey.Code, string(courier.CodeInternal))}
	if writerctx.ClientGone(ctx) {
		loggerFrom(ctx).InfoContext(ctx, "middleware: transaction ended by its client", attrs...)
		return
	}
	loggerFrom(ctx).ErrorContext(ctx, "middleware: transaction could not "+what, append(attrs, slog.Any(logkey.Error, writerctx.WithCause(ctx, err)))...)
}

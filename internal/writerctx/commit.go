package writerctx

import (
	"context"
	"errors"
	"fmt"
)

// errCommit says, in the log line of a request's transaction that could
// not commit, why it may not have: the driver's error alone may not
// (pgx's "commit unexpectedly resulted in rollback" for a transaction a
// failed statement aborted: SQLSTATE 25P02 for every statement after it,
// and COMMIT rolls back).
var errCommit = errors.New("the transaction could not commit and was rolled back " +
	"(the database failed, a deferred constraint was broken, or, on PostgreSQL, a statement in it failed and left it aborted: " +
	"the code that ran in it went on past a failed statement, whose error it should return)")

// CommitFailure is err, the failure to commit the transaction a request's
// code ran in, begun with ctx (a courier receiver's, or
// middleware.Transaction's), with its likely cause: ctx's end, when ctx
// ended (database/sql rolled the transaction back, and Commit may say no
// more than sql.ErrTxDone), or else what may have failed it.
func CommitFailure(ctx context.Context, err error) error {
	switch {
	case ctx.Err() == nil:
		return fmt.Errorf("%w: %w", errCommit, err)
	case !errors.Is(err, ctx.Err()):
		return fmt.Errorf("%w: rolled back as the request ended: %w", err, ctx.Err())
	}
	return err
}

// ClientGone reports whether ctx, a request's, was cancelled as net/http
// cancels it when the client goes away: with no cause of its own. One
// cancelled with a cause (context.WithCancelCause, as a server's
// BaseContext may be at shutdown) or past its deadline is not the
// client's doing, and its failure is the server's to hear of.
func ClientGone(ctx context.Context) bool {
	return context.Cause(ctx) == context.Canceled //nolint:errorlint // Canceled itself: a cause that wraps it is the canceller's
}

// EndedByClient reports whether err, why a request's work in ctx failed,
// is ctx's end as its client went away (ClientGone): a failure of no part
// of the server's, logged at Info, not Error.
func EndedByClient(ctx context.Context, err error) bool {
	return errors.Is(err, context.Canceled) && ClientGone(ctx)
}

// WithCause is err, why a request failed, with the cause its context was
// cancelled with when it has one of its own and err does not say it
// already (a server's BaseContext cancelled with context.WithCancelCause
// at shutdown): a log line says why the request ended, not only that its
// context did.
func WithCause(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if cause == nil || cause == ctx.Err() || errors.Is(err, cause) { //nolint:errorlint // a cause that is the context's own error adds nothing
		return err
	}
	if err == nil {
		return cause
	}
	return fmt.Errorf("%w (the request's context: %w)", err, cause)
}

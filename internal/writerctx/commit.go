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

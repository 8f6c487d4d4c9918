package handler

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/jsonbody"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/jmoiron/sqlx"
)

// Retry-After of the 503 answers.
const (
	// retryInProgress: a notification whose first delivery is still
	// being processed.
	retryInProgress = 2 * time.Second
	// retryStore: a store that could not answer.
	retryStore = time.Second
)

// errInProgress is a duplicate whose first delivery is still processing.
var errInProgress = errors.New("handler: in progress")

// errNoMessageID is a payload without an id of its own whose signature
// signs no message id: there is nothing to dedupe it by.
var errNoMessageID = errors.New("handler: no id in the payload and no signed message id")

// errForbidden is a publisher refused by PublishConfig.Authorize.
var errForbidden = errors.New("handler: not authorized for this target")

// errPublishedBefore is a publish whose delivery the outbox holds with
// other content: another payload, other delivery settings (the Store's
// attempt budget changed since a single delivery was enqueued, say), or
// a payload sealed under a key the Store no longer holds (or holds over
// other bytes), which it cannot compare. Not necessarily another request
// body, as a receiver's collision is.
var errPublishedBefore = errors.New("handler: published before with other content")

// errContractChanged is a new command built for another capabilities
// digest than the one its Source serves.
var errContractChanged = errors.New("handler: the command was built for another contract")

// storeFailure is the store failing (beginning, recording in the Inbox or
// Outbox, committing), told apart from the application's function failing:
// the store may come back, so it is answered 503 with Retry-After.
type storeFailure struct{ err error }

func (e storeFailure) Error() string { return "handler: store: " + e.err.Error() }
func (e storeFailure) Unwrap() error { return e.err }

// appFailure is the application's function failing. Its rejection, if it
// is one, is a refusal; any other error is answered 500 handler_failed.
type appFailure struct{ err error }

func (e appFailure) Error() string { return "handler: application: " + e.err.Error() }
func (e appFailure) Unwrap() error { return e.err }

// fromStore wraps err from a store call as a storeFailure, except the
// store's answers about the request itself: an idempotency collision and
// invalid input keep their meaning.
func fromStore(err error) error {
	var ve *ack.ValidationError
	switch {
	case err == nil, errors.Is(err, courier.CodeIdempotencyCollision), errors.As(err, &ve),
		courier.CodeOf(err) == courier.CodeInvalidArgument:
		return err
	}
	return storeFailure{err}
}

// fromInbox is fromStore for an Inbox call's error. What a receiver takes
// from the request for a key (its id) is checked first, so the Inbox's
// invalid_argument is no fault of the request's but of the receiver's
// setup (a Verifier whose Principal.Sender no record may hold, a
// Digester whose PayloadSHA256 is no SHA-256 in hex) or of courier's:
// answered 500 internal_error, logged with the Inbox's reason, not 400.
func fromInbox(err error) error {
	if courier.CodeOf(err) == courier.CodeInvalidArgument {
		return &coded.Error{Code: courier.CodeInternal, Msg: "handler: the Inbox refused the key to record (" + err.Error() + ")", Err: err}
	}
	return fromStore(err)
}

// errTxEnded is the function's failure to leave its transaction to the
// handler: it committed or rolled back tx itself.
var errTxEnded = errors.New("handler: the function committed or rolled back its transaction; it must leave that to the handler")

// commit commits tx, the transaction the application's function ran in
// with ctx. A transaction the function ended itself is its failure (500
// handler_failed); any other failure to commit is the store's, a
// transaction database/sql rolled back as ctx ended too, with its likely
// cause (writerctx.CommitFailure: ctx's error, which a client gone is
// logged by, or what may fail a commit).
func commit(ctx context.Context, tx *sqlx.Tx) error {
	switch err := tx.Commit(); {
	case endedByApp(ctx, err):
		return fromApp(errTxEnded)
	case err != nil:
		return fromStore(writerctx.CommitFailure(ctx, err))
	}
	return nil
}

// endedByApp reports whether err, from a statement or the commit of a
// transaction begun with ctx, says the application's function ended the
// transaction: it is done, and not because ctx ended (database/sql rolls
// a transaction back then, with the same error).
func endedByApp(ctx context.Context, err error) bool {
	return errors.Is(err, sql.ErrTxDone) && ctx.Err() == nil
}

// fromFunc wraps err, the failure of the application's function, as an
// appFailure, unless the database failed under the function, a
// storeFailure: its transaction (begun with ctx) could not be rolled back
// (rollback is what rolling it back returned: the server ended the
// connection, or went away), whatever err is, a rejection too; or err is
// no rejection and in says it is the database's (full, read-only, an I/O
// error, a lock conflict). A rejection's code is the application's to
// choose, a store's code too.
func fromFunc(ctx context.Context, in protocol.Inbox, err, rollback error) error {
	var rej *rejection
	switch {
	case err == nil:
		return nil
	case rollback != nil && !errors.Is(rollback, sql.ErrTxDone) && ctx.Err() == nil:
		return storeFailure{errors.Join(err, rollback)}
	case !errors.As(err, &rej) && in.Unavailable(err):
		return storeFailure{err}
	}
	return fromApp(err)
}

// fromApp wraps err from the application's function as an appFailure.
func fromApp(err error) error {
	if err == nil {
		return nil
	}
	return appFailure{err}
}

// answer is the one place that turns the error of processing a request
// into its answer, for every handler in this package; see the package
// documentation for the table. The cause of a 5xx goes to the log line.
func answer(w http.ResponseWriter, err error) {
	var (
		rej *rejection
		app appFailure
		sf  storeFailure
		ve  *ack.ValidationError
	)
	switch {
	case errors.Is(err, errNested): // a setup to mend, said in the answer as well as the log, which a Logger may silence
		noteCause(w, err)
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInternal,
			"served inside a request's transaction (middleware.Transaction): serve courier's handlers beside it", retryStore)
	case errors.As(err, &sf) && courier.CodeOf(sf.err) == courier.CodePayloadUnreadable:
		// A record kept under a payload key the store no longer holds (or
		// holds over other bytes): every redelivery fails so until an
		// operator puts the key back, which its own code tells them, in
		// the log line and the Event, apart from a database that is down.
		noteCause(w, err)
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodePayloadUnreadable,
			"the record of this notification cannot be read under the receiver's payload keys; retry later", retryStore)
	case errors.As(err, &sf): // first of the rest: a store that failed under the function answers for it, whatever the function returned
		noteCause(w, err)
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInternal, "the store could not answer; retry later", retryStore)
	case errors.As(err, &rej):
		problem.Error(w, http.StatusUnprocessableEntity, rej.code, rej.detail)
	case errors.As(err, &app):
		noteCause(w, err)
		problem.Error(w, http.StatusInternalServerError, courier.CodeHandlerFailed, "processing failed; retry later")
	case errors.Is(err, errPublishedBefore):
		problem.Error(w, http.StatusConflict, courier.CodeIdempotencyCollision,
			"this identity was published before with another payload or other delivery settings, or under a payload key the store no longer holds as it was")
	case errors.Is(err, courier.CodeIdempotencyCollision):
		problem.Error(w, http.StatusConflict, courier.CodeIdempotencyCollision, "this identity was received with another body")
	case errors.Is(err, errInProgress):
		problem.RetryAfter(w, http.StatusServiceUnavailable, courier.CodeInProgress, "this delivery is being processed", retryInProgress)
	case errors.Is(err, errNoMessageID):
		problem.Error(w, http.StatusBadRequest, courier.CodeMessageIDMissing, "the payload has no id and the signature signs no message id")
	case errors.Is(err, errForbidden):
		problem.Error(w, http.StatusForbidden, courier.CodeForbidden, "not allowed to publish to this target")
	case errors.Is(err, errContractChanged):
		problem.Error(w, http.StatusConflict, courier.CodeContractChanged, "the command was built for another contract")
	case errors.As(err, &ve):
		jsonbody.Invalid(w, ve)
	case courier.CodeOf(err) == courier.CodeInvalidArgument:
		problem.Error(w, http.StatusBadRequest, courier.CodeValidation, "the request was refused")
	default:
		noteCause(w, err)
		problem.Error(w, http.StatusInternalServerError, courier.CodeInternal, "the request failed")
	}
}

// answeredBy reports whether what the Inbox answered for a request's key
// already answers the request: a store failure, another request
// processing the key (in_progress), or a completed duplicate, whose
// stored answer it returns.
func answeredBy(receipt protocol.Receipt, err error) (stored []byte, answered bool, _ error) {
	switch {
	case err != nil:
		return nil, true, fromInbox(err)
	case receipt.InProgress:
		return nil, true, errInProgress
	case !receipt.Fresh:
		return receipt.Ack, true, nil
	}
	return nil, false, nil
}

package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/engine"
)

// Enqueue is store's Outbox.Enqueue inside tx, a transaction the
// application began on its pgx (v5) pool or connection rather than through
// database/sql, as applications built on pgxpool write their business rows:
// the delivery exists exactly when tx commits, and nothing of it when tx
// rolls back. Everything else is Outbox.Enqueue's, through the same code:
// validation, the row written, idempotency and collisions, the trace
// context captured (store.Config.Tracer), and the wake-up that reaches
// listening workers when tx commits.
//
// s is a Store on PostgreSQL, opened on the database tx belongs to (over
// database/sql, which the Store itself uses; see the package
// documentation): the worker delivers what tx committed.
func Enqueue(ctx context.Context, s *store.Store, tx pgx.Tx, p store.EnqueueParams) (store.Enqueued, error) {
	x, err := native(s, tx)
	if err != nil {
		return store.Enqueued{}, err
	}
	return s.Outbox.Enqueue(ctx, x, p)
}

// EnqueueMany is store's Outbox.EnqueueMany inside tx, with Enqueue's
// rules for each delivery. On error nothing is known to be written: the
// caller rolls tx back.
func EnqueueMany(ctx context.Context, s *store.Store, tx pgx.Tx, ps []store.EnqueueParams) ([]store.Enqueued, error) {
	x, err := native(s, tx)
	if err != nil {
		return nil, err
	}
	return s.Outbox.EnqueueMany(ctx, x, ps)
}

// Publish is store's Outbox.Publish inside tx: the event fans out to one
// delivery per matching subscription not paused, as one snapshot of the
// registry read in tx, and a rolled-back tx makes none.
func Publish(ctx context.Context, s *store.Store, tx pgx.Tx, p store.PublishParams) ([]store.Published, error) {
	x, err := native(s, tx)
	if err != nil {
		return nil, err
	}
	return s.Outbox.Publish(ctx, x, p)
}

// native checks the arguments of Enqueue, EnqueueMany and Publish and
// returns tx as the store runs its statements on it.
func native(s *store.Store, tx pgx.Tx) (pgxTx, error) {
	switch {
	case s == nil:
		return pgxTx{}, &coded.Error{Code: courier.CodeInvalidArgument, Msg: "postgres: the Store is required"}
	case s.Engine() != pgEngine.Name:
		return pgxTx{}, &coded.Error{Code: courier.CodeInvalidArgument, Msg: "postgres: the Store is on " + s.Engine() + ", not PostgreSQL"}
	case tx == nil:
		return pgxTx{}, &coded.Error{Code: courier.CodeInvalidArgument, Msg: "postgres: the pgx.Tx is required"}
	}
	return pgxTx{tx: tx}, nil
}

// pgxTx runs the store's statements on a pgx.Tx: it is an engine.Tx,
// which the store prefers to the store.DBTX it is handed as. The DBTX is
// embedded, nil, only to satisfy that type: the store never calls it on
// an engine.Tx, and the value never leaves this package's functions.
type pgxTx struct {
	store.DBTX
	tx pgx.Tx
}

var _ engine.Tx = pgxTx{}

func (t pgxTx) Exec(ctx context.Context, sql string, args []any) (int64, error) {
	tag, err := t.tx.Exec(ctx, sql, args...)
	return tag.RowsAffected(), err
}

func (t pgxTx) Query(ctx context.Context, sql string, args []any) (engine.Rows, error) {
	rows, err := t.tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgxRows{rows}, nil
}

// pgxRows reads pgx.Rows as database/sql's: the columns by name, and a
// Close that reports the rows' error.
type pgxRows struct{ pgx.Rows }

func (r pgxRows) Columns() ([]string, error) {
	fields := r.FieldDescriptions()
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return names, nil
}

func (r pgxRows) Close() error {
	r.Rows.Close()
	return r.Err()
}

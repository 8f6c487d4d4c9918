package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
)

// Inbox is the receiver side's dedupe table: one record per (sender,
// dedupe key), holding the payload digest and the Ack answered.
type Inbox struct{ s *Store }

// InboxKey identifies one received notification.
type InboxKey struct {
	Sender        string // the verified sender, never taken from the payload
	Key           string // the notification's dedupe key
	PayloadSHA256 string // digest of what was received under it
}

// Receipt says what the Inbox knew of a key when it was recorded.
type Receipt struct {
	// Fresh is true when this call recorded the key: the caller processes
	// the notification and then calls Complete in the same transaction.
	Fresh bool
	// InProgress is true when another request recorded the key and has not
	// completed it (only possible where processing runs outside a
	// transaction): the caller answers 503 and the sender retries.
	InProgress bool
	// Ack is the stored Ack of a completed duplicate, to answer byte for
	// byte.
	Ack []byte
}

// Record records k inside the caller's transaction tx, or reports what is
// already recorded. A key recorded with another payload digest is
// ErrIdempotencyCollision, with nothing written. A concurrent duplicate
// waits for the first transaction (the engines' write locks) and then sees
// it completed.
func (in *Inbox) Record(ctx context.Context, tx DBTX, k InboxKey) (Receipt, error) {
	return in.record(ctx, tx, k, in.s.now(), nil)
}

// RecordCompleted is Record and Complete in one statement, for a receiver
// whose Ack does not depend on what processing does: a fresh key is
// recorded already completed with ack. The caller then processes the
// notification in tx; its effects and the record commit together, or a
// rollback removes both. A key already recorded is reported as Record
// reports it, with nothing written.
func (in *Inbox) RecordCompleted(ctx context.Context, tx DBTX, k InboxKey, ack []byte) (Receipt, error) {
	if ack == nil {
		ack = []byte{} // profiles without an Ack store an empty one
	}
	return in.record(ctx, tx, k, in.s.now(), ack)
}

// record is Record at the time now, which a fresh record is stamped with;
// with a non-nil ack the record is stored completed.
func (in *Inbox) record(ctx context.Context, tx DBTX, k InboxKey, now int64, ack []byte) (Receipt, error) {
	if k.Sender == "" || len(k.Sender) > 256 || !validToken(k.Key) || len(k.PayloadSHA256) != 64 {
		return Receipt{}, invalidArgument("InboxKey needs a sender, a token key and a SHA-256 digest")
	}
	status := "processing"
	if ack != nil {
		status = "completed"
	}
	args := map[string]any{"sender": k.Sender, "dedupe_key": k.Key, "payload_sha256": k.PayloadSHA256, "now": now,
		"status": status, "ack": ack}
	res, err := in.s.exec(ctx, tx, "inbox_insert", args)
	if err != nil {
		return Receipt{}, err
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return Receipt{Fresh: true}, nil
	}
	q := in.s.q("inbox_get")
	var (
		sum, got         string
		stored           []byte
		created, updated int64
	)
	err = tx.QueryRowContext(ctx, q.text, q.args(args)...).Scan(&sum, &got, &stored, &created, &updated)
	if err != nil {
		if err == sql.ErrNoRows { // released between the insert and the read
			return in.record(ctx, tx, k, now, ack)
		}
		return Receipt{}, in.s.dialect.interpret("inbox_get", err)
	}
	switch {
	case sum != k.PayloadSHA256:
		return Receipt{}, courier.ErrIdempotencyCollision
	case got != "completed":
		return Receipt{InProgress: true}, nil
	}
	return Receipt{Ack: stored}, nil
}

// Complete stores the Ack for a key this transaction recorded fresh.
func (in *Inbox) Complete(ctx context.Context, tx DBTX, k InboxKey, ack []byte) error {
	if len(ack) == 0 {
		ack = []byte{} // profiles without an Ack store an empty one
	}
	res, err := in.s.exec(ctx, tx, "inbox_complete", map[string]any{"sender": k.Sender, "dedupe_key": k.Key, "ack": ack, "now": in.s.now()})
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return courier.NewError(courier.CodeInvalidArgument, "store: inbox key is not being processed")
	}
	return nil
}

// Release forgets a key that was recorded but not completed, so that the
// sender's retry processes it again. For receivers that process outside
// the Inbox's transaction.
func (in *Inbox) Release(ctx context.Context, tx DBTX, k InboxKey) error {
	_, err := in.s.exec(ctx, tx, "inbox_release", map[string]any{"sender": k.Sender, "dedupe_key": k.Key})
	return err
}

// PruneParams bounds a retention pass.
type PruneParams struct {
	OlderThan time.Duration     // records last updated before now minus this go
	BatchSize int               // rows per statement; defaults to 1000
	MaxRows   int               // stop after this many; 0 means until done
	OnBatch   func(deleted int) // called after each statement, for progress and metrics
}

// Prune deletes completed records older than p.OlderThan, at most
// p.BatchSize per statement (each its own short transaction), and returns
// how many it deleted. Safe to run from many instances at once.
func (in *Inbox) Prune(ctx context.Context, p PruneParams) (int, error) {
	return in.s.prune(ctx, "inbox_prune", map[string]any{"before": in.s.now() - p.OlderThan.Microseconds()}, p)
}

func (s *Store) prune(ctx context.Context, name string, args map[string]any, p PruneParams) (int, error) {
	if p.BatchSize <= 0 {
		p.BatchSize = 1000
	}
	if p.OlderThan < 0 {
		return 0, invalidArgument("PruneParams.OlderThan must not be negative")
	}
	total := 0
	for p.MaxRows == 0 || total < p.MaxRows {
		limit := p.BatchSize
		if p.MaxRows > 0 {
			limit = min(limit, p.MaxRows-total)
		}
		args["limit"] = limit
		res, err := s.exec(ctx, s.writer, name, args)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, wrapf(err, name)
		}
		total += int(n)
		if p.OnBatch != nil {
			p.OnBatch(int(n))
		}
		if n < int64(limit) {
			break
		}
	}
	return total, nil
}

// Claim is the first phase of a two-phase receipt, for receivers that
// answer a concurrent duplicate at once (503, in progress) rather than
// making it wait for the first request's transaction. It records k as
// processing in a short transaction of its own. Fresh means the caller
// holds the claim: it processes the notification and then calls
// CompleteClaim in the transaction of its effects, or ReleaseClaim if
// processing failed. A claim left processing for longer than stale (its
// receiver died) is taken over; the claims are fenced, so only one
// completes.
func (in *Inbox) Claim(ctx context.Context, k InboxKey, stale time.Duration) (Receipt, InboxClaim, error) {
	var r Receipt
	var c InboxClaim
	err := in.s.inTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		now := in.s.now()
		r, err = in.record(ctx, tx, k, now, nil)
		switch {
		case err != nil:
			return err
		case r.Fresh:
			c = InboxClaim{key: k, token: now} // the record's updated_at
			return nil
		case !r.InProgress:
			return nil // a completed duplicate: r carries its Ack
		}
		rows, err := in.s.query(ctx, tx, "inbox_take_over", map[string]any{
			"sender": k.Sender, "dedupe_key": k.Key, "payload_sha256": k.PayloadSHA256,
			"now": now, "stale_before": now - stale.Microseconds(),
		})
		if err != nil {
			return err
		}
		defer rows.Close()
		if rows.Next() {
			c = InboxClaim{key: k}
			if err := rows.Scan(&c.token); err != nil {
				return err
			}
			r = Receipt{Fresh: true}
		}
		return rows.Err()
	})
	return r, c, err
}

// InboxClaim is a held two-phase claim; see Inbox.Claim.
type InboxClaim struct {
	key   InboxKey
	token int64
}

// CompleteClaim stores the Ack for a claim inside tx, the transaction of
// the application's effects. If the claim was taken over meanwhile it
// returns ErrLeaseLost: roll tx back.
func (in *Inbox) CompleteClaim(ctx context.Context, tx DBTX, c InboxClaim, ack []byte) error {
	if ack == nil {
		ack = []byte{}
	}
	res, err := in.s.exec(ctx, tx, "inbox_complete_claimed", map[string]any{
		"sender": c.key.Sender, "dedupe_key": c.key.Key, "ack": ack, "now": in.s.now(), "token": c.token,
	})
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return courier.ErrLeaseLost
	}
	return nil
}

// ReleaseClaim gives a claim back after processing failed, so that the
// sender's retry processes the notification again.
func (in *Inbox) ReleaseClaim(ctx context.Context, c InboxClaim) error {
	_, err := in.s.exec(ctx, in.s.writer, "inbox_release_claimed", map[string]any{"sender": c.key.Sender, "dedupe_key": c.key.Key, "token": c.token})
	return err
}

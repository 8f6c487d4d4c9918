package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
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
func (in *Inbox) RecordCompleted(ctx context.Context, tx DBTX, k InboxKey, answer []byte) (Receipt, error) {
	if answer == nil {
		answer = []byte{} // profiles without an Ack store an empty one
	}
	return in.record(ctx, tx, k, in.s.now(), answer)
}

// record is Record at the time now, which a fresh record is stamped with;
// with a non-nil answer the record is stored completed.
func (in *Inbox) record(ctx context.Context, tx DBTX, k InboxKey, now int64, answer []byte) (Receipt, error) {
	if k.Sender == "" || len(k.Sender) > 256 || !ack.IsToken(k.Key) || !ack.IsDigest(k.PayloadSHA256) {
		return Receipt{}, invalidArgument("InboxKey needs a sender, a token key and a SHA-256 digest")
	}
	status := "processing"
	if answer != nil {
		status = "completed"
	}
	args := map[string]any{"sender": k.Sender, "dedupe_key": k.Key, "payload_sha256": k.PayloadSHA256, "now": now,
		"status": status, "ack": answer}
	res, err := in.s.exec(ctx, tx, "inbox_insert", args)
	if err != nil {
		return Receipt{}, err
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return Receipt{Fresh: true}, nil
	}
	r, err := getRow[inboxRow](ctx, in.s, tx, "inbox_get", args)
	if err != nil {
		if courier.CodeOf(err) == courier.CodeNotFound { // released between the insert and the read
			return in.record(ctx, tx, k, now, answer)
		}
		return Receipt{}, err
	}
	switch {
	case r.PayloadSHA256 != k.PayloadSHA256:
		return Receipt{}, courier.ErrIdempotencyCollision
	case r.Status != "completed":
		return Receipt{InProgress: true}, nil
	}
	return Receipt{Ack: r.Ack}, nil
}

// Complete stores the Ack for a key this transaction recorded fresh.
func (in *Inbox) Complete(ctx context.Context, tx DBTX, k InboxKey, answer []byte) error {
	if len(answer) == 0 {
		answer = []byte{} // profiles without an Ack store an empty one
	}
	res, err := in.s.exec(ctx, tx, "inbox_complete", map[string]any{"sender": k.Sender, "dedupe_key": k.Key, "ack": answer, "now": in.s.now()})
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

// Prune deletes completed records older than p.OlderThan, at most
// p.BatchSize per statement (each its own short transaction), and returns
// how many it deleted. Safe to run from many instances at once.
func (in *Inbox) Prune(ctx context.Context, p PruneParams) (int, error) {
	return in.s.prune(ctx, "inbox_prune", map[string]any{"before": in.s.now() - p.OlderThan.Microseconds()}, p)
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
		var tokens []int64
		err = in.s.selectRows(ctx, tx, "inbox_take_over", map[string]any{
			"sender": k.Sender, "dedupe_key": k.Key, "payload_sha256": k.PayloadSHA256,
			"now": now, "stale_before": now - stale.Microseconds(),
		}, &tokens)
		if err != nil || len(tokens) == 0 {
			return err
		}
		c, r = InboxClaim{key: k, token: tokens[0]}, Receipt{Fresh: true}
		return nil
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
func (in *Inbox) CompleteClaim(ctx context.Context, tx DBTX, c InboxClaim, answer []byte) error {
	if answer == nil {
		answer = []byte{}
	}
	res, err := in.s.exec(ctx, tx, "inbox_complete_claimed", map[string]any{
		"sender": c.key.Sender, "dedupe_key": c.key.Key, "ack": answer, "now": in.s.now(), "token": c.token,
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

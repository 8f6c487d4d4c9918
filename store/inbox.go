package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
)

// Inbox is the receiver side's dedupe table: one record per (verified
// sender, dedupe key), holding the payload digest and the Ack answered.
// The receivers of package handler write it (their docs say when); an
// application only prunes it (Prune).
// Its writes are courier's own, of keys courier has validated: one the
// database refuses by a rule of its own (an application's trigger on the
// table) is CodeInternal, a store failure a receiver answers 503 for.
// A key no record may hold (a sender out of bounds, from a Verifier's
// Principal) is CodeInvalidArgument, which a receiver answers as its own
// failure, 500, the request being none of its cause.
type Inbox struct {
	s *Store

	// commitWindow (tests): called as a claim's COMMIT begins to run on
	// past its request's end, it returns what ends that window in place
	// of claimCommitWindow's timer.
	commitWindow func() <-chan time.Time
}

// record (protocol.Inbox's Record) records k inside the caller's
// transaction tx, or reports what is already recorded. A key recorded with another payload digest is
// CodeIdempotencyCollision, with nothing written. A concurrent duplicate
// waits for the first transaction (the engines' write locks) and then sees
// it completed.
func (in *Inbox) record(ctx context.Context, tx DBTX, k protocol.InboxKey) (protocol.Receipt, error) {
	r, _, err := in.recordAt(ctx, tx, k, in.s.now(), nil)
	return r, err
}

// recordCompleted (protocol.Inbox's RecordCompleted) is record and
// complete in one statement, for a receiver whose Ack does not depend on
// what processing does: a fresh key is
// recorded already completed with ack. The caller then processes the
// notification in tx; its effects and the record commit together, or a
// rollback removes both. A key already recorded is reported as Record
// reports it, with nothing written.
func (in *Inbox) recordCompleted(ctx context.Context, tx DBTX, k protocol.InboxKey, answer []byte) (protocol.Receipt, error) {
	if answer == nil {
		answer = []byte{} // profiles without an Ack store an empty one
	}
	r, _, err := in.recordAt(ctx, tx, k, in.s.now(), answer)
	return r, err
}

// recordAt is record at the time now, which a fresh record is stamped with;
// with a non-nil answer the record is stored completed. For a key already
// recorded and still processing it also returns the digest its record
// stores, which a take-over compares.
func (in *Inbox) recordAt(ctx context.Context, tx DBTX, k protocol.InboxKey, now int64, answer []byte) (protocol.Receipt, string, error) {
	if err := checkKey(k); err != nil {
		return protocol.Receipt{}, "", err
	}
	status := "processing"
	if answer != nil {
		status = "completed"
	}
	args, err := in.recordArgs(k, answer)
	if err != nil {
		return protocol.Receipt{}, "", err
	}
	args["status"], args["now"] = status, now
	res, err := in.s.exec(ctx, tx, "inbox_insert", args)
	if err != nil {
		return protocol.Receipt{}, "", refusedByTheDatabase(err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return protocol.Receipt{Fresh: true, Token: now}, "", nil
	}
	row, err := getRow[inboxRow](ctx, in.s, tx, "inbox_get", args)
	if err != nil {
		if courier.CodeOf(err) == courier.CodeNotFound { // released between the insert and the read
			return in.recordAt(ctx, tx, k, now, answer)
		}
		return protocol.Receipt{}, "", err
	}
	receipt, same, err := in.receiptOf(k, row)
	switch {
	case err != nil:
		return protocol.Receipt{}, "", err
	case !same:
		return protocol.Receipt{}, "", errIdempotencyCollision
	case receipt.InProgress:
		return receipt, row.PayloadSHA256, nil
	}
	return receipt, "", nil
}

// receiptOf is what row, the record of k's sender and key, answers for
// k: whether it was recorded with k's payload digest (same), and if so
// its receipt, the stored answer opened, or in progress.
func (in *Inbox) receiptOf(k protocol.InboxKey, row inboxRow) (r protocol.Receipt, same bool, err error) {
	same, stored, err := in.s.cfg.Encryption.openRecord(k, record{digest: row.PayloadSHA256, keyID: row.PayloadKeyID, answer: row.Ack})
	switch {
	case err != nil || !same:
		return protocol.Receipt{}, same, err
	case row.Status != "completed":
		return protocol.Receipt{InProgress: true}, true, nil
	}
	return protocol.Receipt{Ack: stored}, true, nil
}

// find reports what is recorded for k inside tx, writing nothing: a
// receipt as recordAt's for a record of k's digest, and found false for
// one of another digest or none.
func (in *Inbox) find(ctx context.Context, tx DBTX, k protocol.InboxKey) (_ protocol.Receipt, found bool, _ error) {
	if err := checkKey(k); err != nil {
		return protocol.Receipt{}, false, err
	}
	row, err := getRow[inboxRow](ctx, in.s, tx, "inbox_get", map[string]any{"sender": k.Sender, "dedupe_key": k.Key})
	switch {
	case courier.CodeOf(err) == courier.CodeNotFound:
		return protocol.Receipt{}, false, nil
	case err != nil:
		return protocol.Receipt{}, false, err
	}
	return in.receiptOf(k, row)
}

// recordArgs returns the parameters that identify k's record and say what
// it stores (Encryption.sealRecord): sender, dedupe_key, payload_sha256,
// payload_key_id and ack, the answer (nil for none yet).
func (in *Inbox) recordArgs(k protocol.InboxKey, answer []byte) (map[string]any, error) {
	r, err := in.s.cfg.Encryption.sealRecord(k, answer)
	if err != nil {
		return nil, err
	}
	return map[string]any{"sender": k.Sender, "dedupe_key": k.Key, "payload_sha256": r.digest,
		"payload_key_id": r.keyID, "ack": r.answer}, nil
}

// checkKey refuses a key no record could have: a sender that is not 1-256
// bytes of UTF-8 without NUL (PostgreSQL's text stores no other), a key
// that is not a token, a digest that is not one.
func checkKey(k protocol.InboxKey) error {
	if !validText(k.Sender, maxName) || !wire.IsToken(k.Key) || !wire.IsDigest(k.PayloadSHA256) {
		return invalidArgument("protocol.InboxKey needs a sender (1-256 bytes of UTF-8 without NUL), a token key and a SHA-256 digest")
	}
	return nil
}

// complete (protocol.Inbox's Complete) stores the Ack for a key this
// transaction recorded fresh.
func (in *Inbox) complete(ctx context.Context, tx DBTX, k protocol.InboxKey, answer []byte) error {
	if len(answer) == 0 {
		answer = []byte{} // profiles without an Ack store an empty one
	}
	args, err := in.recordArgs(k, answer)
	if err != nil {
		return err
	}
	args["now"] = in.s.now()
	res, err := in.s.exec(ctx, tx, "inbox_complete", args)
	if err != nil {
		return refusedByTheDatabase(err)
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return &coded.Error{Code: courier.CodeInvalidArgument, Msg: "store: inbox key is not being processed"}
	}
	return nil
}

// Prune deletes records older than p.OlderThan, at most p.BatchSize per
// statement (each its own short transaction), and returns how many it
// deleted: completed ones, and a reporting receiver's claims left
// processing that long (its process died before it answered, and no
// retry came to take the claim over). Safe to run from many instances at
// once.
//
// p.OlderThan is required, and at least 24 hours (CodeInvalidArgument
// under that, nothing deleted): a Standard Webhooks or AdCP HMAC request
// replayed while its timestamp is inside the verifier's tolerance is
// refused as a duplicate by its record alone, so a record must outlive
// twice the tolerance (keep a verifier's Tolerance well under 12
// hours). That floor guards against replays alone, not redeliveries: keep
// records longer than the senders retry too, for a redelivery whose
// record is gone is processed again, and 24 hours is shorter than a
// courier sender on its defaults retries. A courier
// sender starts attempts until 72 hours after the first attempt is due,
// unless its Config.RetryHorizon or the delivery's Deadline (at most
// MaxHorizon) says otherwise, and the last one may arrive as much later
// as its worker's Timeout (at most an hour): keep records for the horizon
// and an hour more. Outbox.Redrive sends a failed delivery again, under the
// same notification id, with its horizon counted anew, however long
// after: a receiver that processed it once (a failed delivery may have
// been, its answer lost) and has pruned its record since processes it
// again.
//
// Records are pruned by age alone, whoever their sender and whichever
// receiver recorded them: where several receivers share the Store, prune
// with the longest retention any of them needs. A record left processing
// is pruned by the same age (its receiver died, or its claim was never
// given back); a claim pruned while its receiver still holds it cannot be
// completed (the receiver rolls its effects back), and the sender's next
// attempt processes the notification anew.
func (in *Inbox) Prune(ctx context.Context, p PruneParams) (int, error) {
	return in.prune(ctx, in.s.prune, p)
}

// prune is Prune, its statement run by run.
func (in *Inbox) prune(ctx context.Context, run pruner, p PruneParams) (int, error) {
	if p.OlderThan < minInboxRetention {
		return 0, invalidArgument("PruneParams.OlderThan must be at least 24h for the inbox: a record must outlive a replay of its request within the signature's tolerance")
	}
	return in.s.pruneOlder(ctx, run, "inbox_prune", nil, p)
}

// claimCommitWindow is how long a claim's COMMIT may run on once its
// request has ended: ample for a one-row commit, and a bound on a request
// held by a database that does not answer.
const claimCommitWindow = 5 * time.Second

// claim (protocol.Inbox's Claim) is the first phase of a two-phase
// receipt, for receivers that answer a concurrent duplicate at once (503, in progress) rather than
// making it wait for the first request's transaction. It records k as
// processing in a short transaction of its own. Fresh means the caller
// holds the claim: it processes the notification and then calls
// CompleteClaim in the transaction of its effects, or ReleaseClaim if
// processing failed. A claim left processing for longer than stale (its
// receiver died) is taken over; the claims are fenced, so only one
// completes.
func (in *Inbox) claim(ctx context.Context, k protocol.InboxKey, stale time.Duration) (protocol.Receipt, protocol.InboxClaim, error) {
	var r protocol.Receipt
	var c protocol.InboxClaim
	if err := checkKey(k); err != nil { // before the transaction takes SQLite's writer
		return r, c, err
	}
	// The claim's transaction ends with ctx until it commits, but not
	// as soon as ctx ends while it commits: the driver gives a COMMIT up
	// when its context ends (pgx does), and the server may commit it all
	// the same, leaving a claim its request never heard of and so never
	// gives back, which would answer the sender's retries in progress
	// until it went stale. Committed, the claim is the caller's, to give
	// back when ctx has ended (the caller's next step fails with ctx).
	// A COMMIT that hangs on (a synchronous standby away) is given up
	// claimCommitWindow after ctx ended, rather than hold the request and
	// its connection until the database answers: the claim it may leave
	// goes stale.
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer func() { stop() }() // before cancel, which ends the wait below
	err := in.s.inTx(txCtx, func(tx *sqlx.Tx) error {
		var err error
		if r, c, err = in.claimIn(ctx, tx, k, stale); err != nil {
			return err
		}
		if !stop() { // ctx ended before the commit: roll back
			return ctx.Err()
		}
		stop = context.AfterFunc(ctx, func() {
			select {
			case <-in.windowEnd():
				cancel()
			case <-txCtx.Done(): // the commit is over
			}
		})
		return nil
	})
	return r, c, err
}

// windowEnd begins the window a claim's COMMIT runs on in once its
// request has ended, and returns what is ready when it ends:
// claimCommitWindow's timer, unless a test has set commitWindow.
func (in *Inbox) windowEnd() <-chan time.Time {
	if in.commitWindow != nil {
		return in.commitWindow()
	}
	return time.After(claimCommitWindow)
}

// claimIn is claim's work in its transaction tx: what the Inbox answers
// for k and, when the caller now holds k's claim, that claim.
func (in *Inbox) claimIn(ctx context.Context, tx *sqlx.Tx, k protocol.InboxKey, stale time.Duration) (protocol.Receipt, protocol.InboxClaim, error) {
	now := in.s.now()
	r, stored, err := in.recordAt(ctx, tx, k, now, nil) // stored: the digest a record still processing stores
	switch {
	case err != nil:
		return r, protocol.InboxClaim{}, err
	case r.Fresh:
		return r, protocol.InboxClaim{Key: k, Token: now}, nil // the record's updated_at
	case !r.InProgress:
		return r, protocol.InboxClaim{}, nil // a completed duplicate: r carries its Ack
	}
	var tokens []int64
	err = in.s.selectRows(ctx, tx, "inbox_take_over", map[string]any{
		"sender": k.Sender, "dedupe_key": k.Key, "payload_sha256": stored,
		"now": now, "stale_before": now - stale.Microseconds(),
	}, &tokens)
	switch {
	case err != nil:
		return protocol.Receipt{}, protocol.InboxClaim{}, refusedByTheDatabase(err)
	case len(tokens) == 0:
		return r, protocol.InboxClaim{}, nil // held by another request, not stale: r says InProgress
	}
	return protocol.Receipt{Fresh: true}, protocol.InboxClaim{Key: k, Token: tokens[0]}, nil
}

// completeClaim (protocol.Inbox's CompleteClaim) stores the Ack for a claim inside tx, the transaction of
// the application's effects. If the claim was taken over meanwhile it
// returns CodeLeaseLost: roll tx back.
func (in *Inbox) completeClaim(ctx context.Context, tx DBTX, c protocol.InboxClaim, answer []byte) error {
	if answer == nil {
		answer = []byte{}
	}
	args, err := in.recordArgs(c.Key, answer)
	if err != nil {
		return err
	}
	args["now"], args["token"] = in.s.now(), c.Token
	res, err := in.s.exec(ctx, tx, "inbox_complete_claimed", args)
	if err != nil {
		return refusedByTheDatabase(err)
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return errLeaseLost
	}
	return nil
}

// releaseClaim (protocol.Inbox's ReleaseClaim) gives a claim back after processing failed, so that the
// sender's retry processes the notification again.
func (in *Inbox) releaseClaim(ctx context.Context, c protocol.InboxClaim) error {
	_, err := in.s.exec(ctx, in.s.writer, "inbox_release_claimed", map[string]any{"sender": c.Key.Sender, "dedupe_key": c.Key.Key, "token": c.Token})
	return refusedByTheDatabase(err)
}

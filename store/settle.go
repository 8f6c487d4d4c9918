package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/courier-go/courier/internal/wire"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
)

// settle implements protocol.Outbox.Settle: the outcomes are applied by
// one statement and logged by another, however many there are, in one
// transaction; on PostgreSQL, those of a healthy endpoint by one
// statement alone (settlePlain). Whether a
// retry still fits the delivery's budget and deadline is decided by the
// statement, against the row; a retry that spares the budget
// (Outcome.SpareBudget) raises it there by one, up to its bound. An
// invalid outcome is refused alone, in its Settled.Err: the outcomes of
// other deliveries settled with it do not depend on it.
//
// A transaction outside courier may hold one of the rows (an
// application's Cancel in a long transaction of its own, an operator's
// SELECT ... FOR UPDATE): the settle's transaction waits for it a short
// while only (outbox_settle_lock_timeout) and fails busy. The outcomes
// are then settled again one per transaction, so those whose rows are
// free are settled and only the one waiting for the held row fails,
// alone, in its Settled.Err (courier.CodeDatabaseUnavailable), for its
// worker to try again: a held row holds up its own outcome, not the
// batch's.
func (o *Outbox) settle(ctx context.Context, outcomes ...protocol.Outcome) ([]protocol.Settled, error) {
	out := make([]protocol.Settled, len(outcomes))
	var valid []int
	for i, oc := range outcomes {
		if out[i].Err = validateOutcome(oc); out[i].Err == nil {
			valid = append(valid, i)
		}
	}
	var now int64 // every statement fences leases at the time the settle began
	rest := o.settlePlain(ctx, &now, outcomes, valid, out)
	var err error
	if len(rest) > 0 {
		var lockWait bool
		lockWait, err = o.settleTx(ctx, &now, outcomes, rest, out)
		if lockWait && len(rest) > 1 {
			err = nil
			for _, i := range rest {
				if _, err := o.settleTx(ctx, &now, outcomes, []int{i}, out); err != nil {
					out[i].Err = err
				}
			}
		}
	}
	if err != nil {
		if len(rest) == len(valid) {
			return nil, err // nothing was applied
		}
		// outbox_settle_plain committed the others: they are settled, and
		// reported so (a worker trying them again would hear lease_lost).
		// The outcomes the transaction did not take fail alone, as one
		// whose row is held does, for their workers to try again.
		for _, i := range rest {
			out[i] = protocol.Settled{Err: err}
		}
	}
	for _, st := range out {
		if st.Err == nil {
			o.s.observe(Event{Kind: EventSettled, N: 1, Status: st.Status, Code: st.Code})
		}
	}
	return out, nil
}

// settlePlain settles, in one statement outside any transaction of
// courier's (outbox_settle_plain, on PostgreSQL), the outcomes among
// outcomes[idx] that change nothing but their row and the attempts log:
// their endpoint has no breaker row and the outcome would give it none
// (speaksOfHealth), and their row has no ordering key (Lease.Keyed; the
// statement checks it as well). Five round trips to the server become
// one for a healthy endpoint's batch. It fills out[i] for those it
// settled and returns the indexes left for settleTx, in the batch's
// order: every outcome from the first that speaks of health on (the
// breakers take an endpoint's outcomes in order), those of a delivery
// settled twice, and those the statement did not settle (a lost lease,
// a breaker row, an ordering key). On an engine without the statement
// (SQLite), or when it fails (a row another transaction holds, busy at
// once, or the database), it leaves them all: settleTx then settles them
// as it would have, and reports what failed.
func (o *Outbox) settlePlain(ctx context.Context, now *int64, outcomes []protocol.Outcome, idx []int, out []protocol.Settled) []int {
	if o.s.q("outbox_settle_plain").text == "" {
		return idx
	}
	type plainArg struct {
		settleArg
		attemptArg
	}
	times := make(map[int64]int, len(idx)) // outcomes by delivery
	for _, i := range idx {
		times[outcomes[i].Lease.DeliveryID]++
	}
	*now = o.s.now()
	var plain []plainArg
	var plainIdx, rest []int
	health := false // an outcome so far speaks of its endpoint's health
	for _, i := range idx {
		oc := outcomes[i]
		// One that speaks of health goes to settleTx, and so does every
		// outcome after it: settleTx applies an endpoint's outcomes to its
		// breaker in the batch's order, and a success or a 4xx after a
		// 503 of the same endpoint (which may be any of them) closes the
		// breaker the 503 moved; settled here first, it would find none
		// and leave the 503's move standing.
		health = health || speaksOfHealth(oc)
		// A delivery settled twice (a lease that ran out, and the one it
		// was claimed again with) goes to settleTx whole, which matches
		// each row once per statement; a keyed one (Lease.Keyed) goes
		// there without a statement here that would settle nothing.
		if health || oc.Lease.Keyed || times[oc.Lease.DeliveryID] > 1 {
			rest = append(rest, i)
			continue
		}
		plain = append(plain, plainArg{o.settleArg(*now, oc), newAttemptArg(oc, "")})
		plainIdx = append(plainIdx, i)
	}
	if len(plain) == 0 {
		return idx
	}
	changed := make(map[int]settledRow, len(plain))
	if err := o.settleRows(ctx, o.s.db, "outbox_settle_plain", *now, plain, outcomes, plainIdx, changed); err != nil {
		return idx
	}
	for _, i := range plainIdx {
		if r, ok := changed[i]; ok {
			out[i] = protocol.Settled{Status: r.Status, Code: courier.Code(r.LastErrorCode.String)}
		} else {
			rest = append(rest, i)
		}
	}
	slices.Sort(rest) // in the batch's order, as settleTx applies them
	return rest
}

// settleTx settles outcomes[i] for every i in idx (outcomes that are
// valid) in one transaction, filling out[i]. When the transaction fails,
// out[idx] are left empty, and lockWait reports whether a statement in it
// failed busy: on PostgreSQL, it waited for a lock another transaction
// held past outbox_settle_lock_timeout (or lost a deadlock). On SQLite it
// never does: a settle's transaction holds the one writer from its BEGIN
// IMMEDIATE, and a BEGIN or COMMIT that finds the database busy is not a
// statement. *now is the time leases are fenced at: set by the first
// transaction, kept by those after it.
func (o *Outbox) settleTx(ctx context.Context, now *int64, outcomes []protocol.Outcome, idx []int, out []protocol.Settled) (lockWait bool, err error) {
	var stmtErr error
	err = o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		if *now == 0 {
			*now = o.s.now()
		}
		stmtErr = o.settleIn(ctx, tx, *now, outcomes, idx, out)
		return stmtErr
	})
	if err != nil {
		for _, i := range idx {
			out[i] = protocol.Settled{} // rolled back: what the transaction read is void
		}
	}
	return isBusy(stmtErr), err
}

// isBusy reports whether err is a statement's failure busy (errBusy): a
// lock it waited for past its bound, or a deadlock. Other failures of the
// database share its code, not its cause: settling again, one outcome at
// a time, would not help them.
func isBusy(err error) bool {
	return errors.Is(err, errBusy)
}

// settleIn is settleTx's transaction: the bound on its lock waits, then
// one settleBatch per batch of distinct deliveries.
func (o *Outbox) settleIn(ctx context.Context, tx *sqlx.Tx, now int64, outcomes []protocol.Outcome, idx []int, out []protocol.Settled) error {
	if _, err := o.s.exec(ctx, tx, "outbox_settle_lock_timeout", nil); err != nil {
		return err
	}
	// Each batch's statement first, then the breakers of all of them, in
	// one lock order: recorded batch by batch, those of a delivery settled
	// twice (a lease that ran out, and the one it was claimed again with)
	// would be taken in a second round, out of order.
	changed := make(map[int]settledRow, len(idx)) // by outcome
	for _, batch := range distinctDeliveries(outcomes, idx) {
		if err := o.settleBatch(ctx, tx, now, outcomes, batch, changed); err != nil {
			return err
		}
	}
	return o.recordSettled(ctx, tx, now, outcomes, idx, changed, out)
}

func validateOutcome(oc protocol.Outcome) error {
	switch {
	case !wire.IsToken(oc.Lease.Token): // claims hand out tokens: no lease holds anything else
		return invalidArgument("Outcome.Lease.Token must be a lease token")
	case oc.RemoteCode != "" && !wire.IsCode(oc.RemoteCode):
		return invalidArgument("Outcome.RemoteCode must be a code or empty")
	case oc.HTTPStatus < 0 || oc.HTTPStatus > 999:
		// An HTTP/1 status line holds three digits; a larger number does
		// not fit PostgreSQL's integer columns (SQLite would keep it),
		// and would fail the settle of every outcome batched with it.
		return invalidArgument("Outcome.HTTPStatus must be 0 (none) or of three digits")
	case oc.SpareBudget && oc.Result != protocol.Retry:
		return invalidArgument("Outcome.SpareBudget must be false for " + string(oc.Result))
	}
	switch oc.Result {
	case protocol.Succeeded:
		return nil
	case protocol.Retry, protocol.Failed, protocol.Suppressed:
		if !wire.IsCode(oc.Code) {
			return invalidArgument("Outcome.Code must be a code for " + string(oc.Result))
		}
		if oc.RetryDelay < 0 {
			return invalidArgument("Outcome.RetryDelay must not be negative")
		}
		return nil
	}
	return invalidArgument("Outcome.Result is unknown")
}

// distinctDeliveries splits the indexes idx of outcomes into batches in
// which no delivery appears twice (one statement settles a batch, and
// matches its rows by delivery). Almost always there is one batch.
func distinctDeliveries(outcomes []protocol.Outcome, idx []int) [][]int {
	var batches [][]int
	seen := make(map[int64]int, len(idx)) // delivery -> outcomes so far
	for _, i := range idx {
		oc := outcomes[i]
		n := seen[oc.Lease.DeliveryID]
		seen[oc.Lease.DeliveryID] = n + 1
		if n == len(batches) {
			batches = append(batches, nil)
		}
		batches[n] = append(batches[n], i)
	}
	return batches
}

// settleArg is one outcome as outbox_settle reads it from its JSON :batch
// parameter.
type settleArg struct {
	ID     int64   `json:"id"`
	Token  string  `json:"token"`
	Result string  `json:"result"`
	Code   *string `json:"code"`
	NextAt int64   `json:"next_at"`
	HTTP   *int    `json:"http"`
	Ack    *string `json:"ack"`
	Remote *string `json:"remote"`
	// Sealed is the payload key the attempt was claimed under: an Ack
	// is kept only while the row is still sealed under it.
	Sealed string `json:"sealed"`
	// Spare is the attempts the outcome gives back to the delivery's
	// budget: 1 for one that spares it (Outcome.SpareBudget), else 0.
	Spare int `json:"spare"`
}

// settleArg is oc as outbox_settle reads it, settled at now.
func (o *Outbox) settleArg(now int64, oc protocol.Outcome) settleArg {
	a := settleArg{ID: oc.Lease.DeliveryID, Token: oc.Lease.Token, Result: string(oc.Result), Sealed: oc.Lease.Sealed}
	if oc.Code != "" {
		a.Code = ptr(string(oc.Code))
	}
	if oc.SpareBudget {
		a.Spare = 1
	}
	if oc.HTTPStatus != 0 {
		a.HTTP = ptr(oc.HTTPStatus)
	}
	if oc.RemoteCode != "" {
		a.Remote = ptr(string(oc.RemoteCode))
	}
	switch oc.Result {
	case protocol.Retry:
		a.NextAt = now + oc.RetryDelay.Microseconds()
	case protocol.Succeeded:
		a.Ack = ptr(o.s.cfg.Encryption.ackDigest(oc.AckSHA256, oc.Lease.Sealed, oc.Lease.DeliveryID)) // "" for profiles without an Ack
	}
	return a
}

// settledRow is a row outbox_settle (or the reclaim of expired leases)
// changed.
type settledRow struct {
	keyed
	LastErrorCode sql.NullString `db:"last_error_code"`
	Tracked       bool           `db:"tracked"`  // the endpoint has a breaker row (outbox_settle's)
	LockKey       int64          `db:"lock_key"` // its endpoint's breaker's lock's (outbox_settle's; lockOrder)
}

// settleBatch applies outcomes[i] for every i in batch (distinct
// deliveries) and notes in changed each row it changed, by outcome.
func (o *Outbox) settleBatch(ctx context.Context, tx *sqlx.Tx, now int64, outcomes []protocol.Outcome, batch []int, changed map[int]settledRow) error {
	args := make([]settleArg, len(batch))
	for j, i := range batch {
		args[j] = o.settleArg(now, outcomes[i])
	}
	return o.settleRows(ctx, tx, "outbox_settle", now, args, outcomes, batch, changed)
}

// settleRows runs name, a settle statement, on x with args, its :batch
// (one element for each outcomes[i], i in idx, of distinct deliveries),
// and notes in changed each row it changed, by outcome.
func (o *Outbox) settleRows(ctx context.Context, x DBTX, name string, now int64, args any, outcomes []protocol.Outcome, idx []int, changed map[int]settledRow) error {
	var rows []settledRow
	if err := o.s.selectRows(ctx, x, name, map[string]any{"batch": jsonArg(args), "now": now}, &rows); err != nil {
		return err
	}
	byID := make(map[int64]settledRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	for _, i := range idx {
		if r, ok := byID[outcomes[i].Lease.DeliveryID]; ok {
			changed[i] = r
		}
	}
	return nil
}

// recordSettled fills out[i] for every i in idx, given the rows the
// outcomes changed, updates the endpoints' breakers, logs the attempts
// and moves the ordering keys on.
func (o *Outbox) recordSettled(ctx context.Context, tx *sqlx.Tx, now int64, outcomes []protocol.Outcome, idx []int, changed map[int]settledRow, out []protocol.Settled) error {
	// Breakers are recorded endpoint by endpoint in one order (lockOrder),
	// each under its lock (endpoint_lock): two settles whose outcomes share
	// endpoints take their locks in the same order, and neither waits for
	// the other while holding what it waits for.
	idx = slices.Clone(idx)
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := changed[i], changed[j]
		return lockOrder(a.LockKey, a.Endpoint, b.LockKey, b.Endpoint)
	})

	logged := make([]attemptArg, 0, len(idx))
	var keys []keyed                 // settled rows with an ordering key
	written := make(map[string]bool) // endpoints given a breaker row by this settle
	for _, i := range idx {
		oc := outcomes[i]
		r, ok := changed[i]
		if !ok {
			out[i] = protocol.Settled{Err: fmt.Errorf("store: delivery %d attempt %d: %w", oc.Lease.DeliveryID, oc.Lease.Attempt, courier.CodeLeaseLost)}
			continue
		}
		out[i] = protocol.Settled{Status: r.Status, Code: courier.Code(r.LastErrorCode.String)}
		if r.OrderingKey.Valid {
			keys = append(keys, r.keyed)
		}
		wrote, moved, err := o.s.Endpoints.record(ctx, tx, now, r.Endpoint, r.Tracked || written[r.Endpoint], oc)
		if err != nil {
			return err
		}
		out[i].Breaker = moved
		written[r.Endpoint] = written[r.Endpoint] || wrote
		outcome := AttemptOutcome(oc.Result)
		switch r.Status {
		case courier.StatusRetryWait:
			outcome = AttemptRetry
		case courier.StatusFailed:
			outcome = AttemptFailed
		}
		// The attempt's own code, though the delivery's is expired where
		// the retry it asked for would be due at or past its deadline:
		// the log keeps why the last attempt failed.
		logged = append(logged, newAttemptArg(oc, outcome))
	}
	if err := o.logAttempts(ctx, tx, now, logged...); err != nil {
		return err
	}
	return o.advanceOrLeave(ctx, tx, now, keys)
}

// releasedRow is a row whose lease a release gives back
// (outbox_release_leases).
type releasedRow struct {
	ID       int64  `db:"id"`
	Endpoint string `db:"endpoint"`
	LockKey  int64  `db:"lock_key"` // its endpoint's breaker's lock's (lockOrder)
}

// leaseArg is a lease as the release statements read it from their JSON
// :batch parameter.
type leaseArg struct {
	ID    int64  `json:"id"`
	Token string `json:"token"`
}

// release implements protocol.Outbox.Release.
func (o *Outbox) release(ctx context.Context, leases ...protocol.Lease) (int, error) {
	args := make([]leaseArg, 0, len(leases))
	for _, l := range leases {
		if wire.IsToken(l.Token) { // another holds no lease: nothing to release
			args = append(args, leaseArg{ID: l.DeliveryID, Token: l.Token})
		}
	}
	n := 0
	for len(args) > 0 {
		released, held, err := o.releaseFree(ctx, args)
		n += released
		if err != nil || len(held) == 0 {
			return n, wrapf(err, "release")
		}
		// Another transaction holds a row: wait for it alone, holding
		// nothing, then give back the leases of the rows it held.
		if err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
			_, err := o.s.exec(ctx, tx, "outbox_release_wait", map[string]any{"id": held[0].ID})
			return err
		}); err != nil {
			return n, wrapf(err, "release")
		}
		args = held
	}
	return n, nil
}

// releaseFree gives back the leases of args whose rows no other
// transaction holds, in one transaction, and returns how many it released
// and the leases whose rows another held.
func (o *Outbox) releaseFree(ctx context.Context, args []leaseArg) (int, []leaseArg, error) {
	var n int64
	var held []leaseArg
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		held = nil
		batch, now := jsonArg(args), o.s.now()
		var rows []releasedRow
		if err := o.s.selectRows(ctx, tx, "outbox_release_leases", map[string]any{"batch": batch}, &rows); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		// A probe given back unsent leaves its endpoint half open with
		// nothing in flight: the next claim probes again, rather than wait
		// out the lease. Under the locks of the endpoints' breakers, taken
		// in lock order (lockOrder) as a settle takes them: a settle reads a
		// breaker under its lock and writes it back whole, and would undo a
		// change made meanwhile. They come first: while the release waits
		// for one, it holds no delivery's row (see outbox_release_lock).
		slices.SortFunc(rows, func(a, b releasedRow) int { return lockOrder(a.LockKey, a.Endpoint, b.LockKey, b.Endpoint) })
		for i, r := range rows {
			if i > 0 && r.Endpoint == rows[i-1].Endpoint {
				continue
			}
			if err := o.s.lockBreaker(ctx, tx, r.Endpoint); err != nil {
				return err
			}
		}
		var locked []int64
		if err := o.s.selectRows(ctx, tx, "outbox_release_lock", map[string]any{"batch": batch}, &locked); err != nil {
			return err
		}
		free := make([]leaseArg, 0, len(args))
		for _, a := range args {
			switch {
			case slices.Contains(locked, a.ID):
				free = append(free, a)
			case slices.ContainsFunc(rows, func(r releasedRow) bool { return r.ID == a.ID }):
				held = append(held, a)
			}
		}
		if len(free) == 0 {
			return nil
		}
		// Then, while the leases are still there to match, the probes.
		batch = jsonArg(free)
		if _, err := o.s.exec(ctx, tx, "endpoint_probe_released", map[string]any{"batch": batch, "now": now}); err != nil {
			return err
		}
		res, err := o.s.exec(ctx, tx, "outbox_release", map[string]any{"batch": batch, "now": now})
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	return int(n), held, nil
}

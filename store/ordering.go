package store

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"sync"
	"time"

	"github.com/courier-go/courier"
)

// OrderingOnFailure says what becomes of an ordering key whose head (the
// delivery of the key being sent) fails for good: permanently refused,
// out of attempts or past its deadline, or quarantined.
type OrderingOnFailure int

// What a failed head does.
const (
	// OrderingHoldKey keeps the key blocked: the deliveries behind the failed
	// head wait until an operator redrives the head (Outbox.Redrive: it
	// is sent again, still first) or cancels it (Outbox.Cancel: the next
	// one goes). A quarantined head is redriven only if its payload could
	// not be opened (payload_unreadable); an altered one can only be
	// cancelled. Nothing is ever delivered out of order. The default.
	OrderingHoldKey OrderingOnFailure = iota
	// OrderingSkipFailed lets the next delivery of the key go: the failed one
	// stays failed, and a later Redrive sends it after the key's current
	// head.
	OrderingSkipFailed
)

// maxOrderingKey bounds EnqueueParams.OrderingKey, in bytes.
const maxOrderingKey = 256

// inKeyOrder returns rows sorted by endpoint, ordering key and id: the
// one order in which every transaction of courier's takes the ordering
// keys' row locks (courier_ordering_keys) it needs, all in one group, so
// that two transactions sharing keys never wait for each other in a
// circle (PostgreSQL would abort one of them). Within a key, id order is
// enqueue order.
func inKeyOrder(rows []keyed) []keyed {
	if len(rows) < 2 {
		return rows
	}
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), cmp.Compare(a.OrderingKey.String, b.OrderingKey.String), cmp.Compare(a.ID, b.ID))
	})
	return rows
}

// keyed is a delivery a statement changed that may concern its ordering
// key: what the statements that finish, fail or redrive deliveries
// return.
type keyed struct {
	ID          int64          `db:"id"`
	Endpoint    string         `db:"endpoint"`
	OrderingKey sql.NullString `db:"ordering_key"`
	Status      courier.Status `db:"status"`
}

// join makes a delivery just inserted waiting for its key (id) its key's
// head, when the key has no other unfinished delivery. Enqueues of one key
// are serialized on the key's row until their transactions end.
// It returns the key's head.
func (o *Outbox) join(ctx context.Context, tx DBTX, now int64, id int64, endpoint, key string) (head int64, err error) {
	args := map[string]any{"endpoint": endpoint, "ordering_key": key, "id": id, "now": now}
	if err := o.s.scan(ctx, tx, "ordering_key_join", args, &head); err != nil {
		return 0, err
	}
	if head != id {
		return head, nil // it waits behind head
	}
	_, err = o.s.exec(ctx, tx, "outbox_hold", map[string]any{"id": id, "hold": nil})
	return head, err
}

// advance moves the ordering keys of deliveries that just left the
// unfinished states (or failed) on: a finished head makes way for the
// next delivery of its key, in enqueue order; a failed head holds its key
// under OrderingHoldKey. A delivery that was not its key's head (cancelled while
// waiting) changes nothing. The keys are locked in key order (see
// inKeyOrder), each waiting for any transaction that holds it: what an
// operator's Cancel and Redrive do. The worker's transactions use
// advanceOrLeave.
func (o *Outbox) advance(ctx context.Context, tx DBTX, now int64, rows []keyed) error {
	_, err := o.advanceKeys(ctx, tx, now, rows, true)
	return err
}

// advanceOrLeave is advance for the worker's settles and claims, which
// never wait for a key's row: an application's transaction that joined
// the key holds it until it ends, and a settle waiting for it would hold
// up every outcome of its batch. A key another transaction holds is left
// stale, its head finished, for a later claim (staleKeys).
func (o *Outbox) advanceOrLeave(ctx context.Context, tx DBTX, now int64, rows []keyed) error {
	left, err := o.advanceKeys(ctx, tx, now, rows, false)
	if left {
		o.keys.left(now)
	}
	return err
}

// advanceKeys is advance; unless wait, it leaves the keys another
// transaction holds, and reports whether it left any.
func (o *Outbox) advanceKeys(ctx context.Context, tx DBTX, now int64, rows []keyed, wait bool) (left bool, err error) {
	lock := "ordering_key_lock"
	if !wait {
		lock = "ordering_key_try_lock"
	}
	for _, r := range inKeyOrder(rows) {
		if !r.OrderingKey.Valid {
			continue
		}
		switch r.Status {
		case courier.StatusPending, courier.StatusRetryWait, courier.StatusLeased:
			continue // still unfinished: it keeps the key
		}
		args := map[string]any{"endpoint": r.Endpoint, "ordering_key": r.OrderingKey.String, "now": now}
		var head int64
		switch err := o.s.scan(ctx, tx, lock, args, &head); {
		case isNoRows(err) && !wait:
			// The key has no row, or another transaction holds it.
			switch err := o.s.scan(ctx, tx, "ordering_key_get", args, &head); {
			case err == nil:
				left = true
			case !isNoRows(err):
				return left, err
			}
			continue
		case isNoRows(err):
			continue
		case err != nil:
			return left, err
		case head != r.ID:
			continue
		}
		// The key moves on only if its head is finished now. A look's row
		// (stale) has no status: ordering_key_stale can report a head that
		// another transaction moved on or redrove as finished, so a
		// statement of its own, run once the key's row is locked, reads it.
		// A row this transaction ended has its status already.
		status := r.Status
		if status == "" {
			if err := o.s.scan(ctx, tx, "ordering_key_head_status", map[string]any{"head_id": head}, &status); err != nil {
				return left, err
			}
		}
		switch status {
		case courier.StatusPending, courier.StatusRetryWait, courier.StatusLeased:
			continue // another transaction moved the key on, or redrove its head
		}
		if err := o.moveKeyOn(ctx, tx, args, status); err != nil {
			return left, err
		}
	}
	return left, nil
}

// moveKeyOn moves on the ordering key args names, locked, whose head
// finished with status: a head that failed blocks the key under
// OrderingHoldKey; otherwise the key's next delivery is promoted to its
// head, or the key is deleted when none waits.
func (o *Outbox) moveKeyOn(ctx context.Context, tx DBTX, args map[string]any, status courier.Status) error {
	failed := status == courier.StatusFailed || status == courier.StatusQuarantined
	if failed && o.s.cfg.OrderingOnFailure == OrderingHoldKey {
		_, err := o.s.exec(ctx, tx, "ordering_key_block", args)
		return err
	}
	var next []int64
	if err := o.s.selectRows(ctx, tx, "outbox_promote", args, &next); err != nil {
		return err
	}
	if len(next) == 0 {
		_, err := o.s.exec(ctx, tx, "ordering_key_delete", args)
		return err
	}
	args["head_id"] = next[0]
	_, err := o.s.exec(ctx, tx, "ordering_key_advance", args)
	return err
}

// staleKeys tells a claim when to look for stale ordering keys (see
// ordering_key_stale): soon after this process left one, again while one
// it left is still held, and every staleKeysEvery in any case, for keys
// a process left before it ended.
type staleKeys struct {
	mu     sync.Mutex
	dirty  bool  // this process left a key since the last look
	lookAt int64 // when the next look is due, µs; 0: the first claim looks
}

// How often a claim looks for stale keys: with no reason to think there
// are any, and while one this process left is held. maxStaleKeys bounds
// the keys one claim moves on.
const (
	staleKeysEvery = 30 * time.Second
	staleKeysRetry = 250 * time.Millisecond
	maxStaleKeys   = 100
)

// left notes that a settle or claim left a key at now.
func (k *staleKeys) left(now int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dirty = true
	k.lookAt = min(k.lookAt, now)
}

// due reports whether a claim at now looks, and whether this process left
// a key since the last look; it schedules the next look.
func (k *staleKeys) due(now int64) (look, dirty bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now < k.lookAt {
		return false, false
	}
	dirty, k.dirty = k.dirty, false
	k.lookAt = now + staleKeysEvery.Microseconds()
	return true, dirty
}

// stale returns, when a look is due, the ordering keys whose head finished
// without them moving on, as their heads' rows, locked on PostgreSQL (the
// ones another transaction holds are skipped), for the claim to advance
// with the rows it ended. A row's head is the look's, which on PostgreSQL
// may be out of date, and its status is left empty: advanceKeys checks the
// head and reads its status once it holds the key. looked says whether it
// looked.
func (o *Outbox) stale(ctx context.Context, tx DBTX, now int64) (rows []keyed, looked bool, err error) {
	look, dirty := o.keys.due(now)
	if !look {
		return nil, false, nil
	}
	if err := o.s.selectRows(ctx, tx, "ordering_key_stale", map[string]any{"limit": maxStaleKeys}, &rows); err != nil {
		o.keys.left(now) // look again at the next claim
		return nil, true, err
	}
	more := len(rows) == maxStaleKeys
	if dirty && !more { // are some it left still held?
		var n int
		if err := o.s.scan(ctx, tx, "ordering_key_stale_count", nil, &n); err != nil {
			o.keys.left(now)
			return nil, true, err
		}
		more = n > len(rows)
	}
	if more {
		o.keys.left(now + staleKeysRetry.Microseconds())
	}
	for i := range rows {
		rows[i].Status = "" // only a lead: advanceKeys reads it again (see ordering_key_stale)
	}
	return rows, true, nil
}

// rejoin puts redriven deliveries with an ordering key (returned waiting
// for it) back in their keys' order: each heads its key again when it
// held it, or when the key has no other unfinished delivery; otherwise it
// waits, and goes next (promotion is by enqueue order).
func (o *Outbox) rejoin(ctx context.Context, tx DBTX, now int64, rows []keyed) error {
	for _, r := range inKeyOrder(rows) {
		if !r.OrderingKey.Valid {
			continue
		}
		head, err := o.join(ctx, tx, now, r.ID, r.Endpoint, r.OrderingKey.String)
		switch {
		case err != nil:
			return err
		case head != r.ID:
			continue // it waits, and goes next
		}
		// It heads its key: a key it held blocked is unblocked.
		args := map[string]any{"endpoint": r.Endpoint, "ordering_key": r.OrderingKey.String, "now": now, "head_id": r.ID}
		if _, err := o.s.exec(ctx, tx, "ordering_key_advance", args); err != nil {
			return err
		}
	}
	return nil
}

// BlockedKey is an ordering key held by its failed head (OrderingHoldKey): the
// deliveries behind it wait until an operator redrives or cancels Head.
type BlockedKey struct {
	Endpoint    string
	OrderingKey string
	Head        int64 // the failed delivery holding the key
	Since       time.Time
}

// BlockedKeys lists the ordering keys a failed head holds, of endpoint
// ("" for every endpoint; otherwise an absolute http or https URL), at
// most limit (1..1000), by endpoint and key.
func (e *Endpoints) BlockedKeys(ctx context.Context, endpoint string, limit int) ([]BlockedKey, error) {
	spelled := endpoint // what is stored under it too, see Endpoints
	endpoint = normalEndpoint(endpoint)
	switch {
	case limit < 1 || limit > 1000:
		return nil, invalidArgument("BlockedKeys limit must be within 1..1000")
	case endpoint != "" && !validEndpoint(endpoint):
		return nil, invalidEndpoint("BlockedKeys endpoint")
	}
	var rows []struct {
		Endpoint    string `db:"endpoint"`
		OrderingKey string `db:"ordering_key"`
		HeadID      int64  `db:"head_id"`
		BlockedAt   int64  `db:"blocked_at"`
	}
	if err := e.s.selectRows(ctx, e.s.db, "ordering_key_blocked", map[string]any{"endpoint": endpoint, "endpoint_spelled": spelled, "limit": limit}, &rows); err != nil {
		return nil, err
	}
	out := make([]BlockedKey, len(rows))
	for i, r := range rows {
		out[i] = BlockedKey{Endpoint: r.Endpoint, OrderingKey: r.OrderingKey, Head: r.HeadID, Since: fromMicros(r.BlockedAt)}
	}
	return out, nil
}

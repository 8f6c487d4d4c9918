package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/wire"
)

// Delivery is one row of the outbox, as operators see it.
type Delivery struct {
	ID             int64
	NotificationID string
	Endpoint       string
	Payload        []byte // nil when not loaded or when it cannot be opened (see PayloadKeyID)
	PayloadKeyID   string // the key that sealed the stored payload, "" if none
	PayloadSHA256  string // the payload's SHA-256; keyed under PayloadKeyID when sealed (see Encryption)
	Profile        string // the Ack profile it is judged by (EnqueueParams.Profile)
	KeyID          string // the signing configuration it names (EnqueueParams.KeyID), "" if none
	Status         courier.Status
	Priority       int
	// Attempts counts the attempts made and the claims that ended it
	// unsent (suppressed, quarantined), each logged (Outbox.Attempts); a
	// delivery a worker claimed and gave back before its attempt began
	// (Stop) counts none.
	Attempts int
	// MaxAttempts is its attempt budget: as enqueued (EnqueueParams),
	// raised by Redrive, and by one for each attempt cut short as its
	// worker stopped (worker_stopped, which spends none of it), up to 1000.
	MaxAttempts    int
	NextAttemptAt  time.Time // when it is next due, while pending or retrying
	Deadline       time.Time
	LeaseOwner     string
	LeasedAt       time.Time
	LeaseExpiresAt time.Time
	LastErrorCode  courier.Code // courier's code of its latest outcome, "" if none
	LastHTTPStatus int          // the receiver's HTTP status at its latest attempt, 0 if it had none
	// LastRemoteCode is the receiver's own code from the problem+json body
	// of its latest refusal (validation_failed, plan_unknown, ...), beside
	// courier's LastErrorCode; "" when the latest attempt's answer carried
	// none.
	LastRemoteCode courier.Code
	// AckSHA256 is the SHA-256 of the Ack a succeeded delivery was
	// acknowledged with, in lowercase hex ("" for a profile without an
	// Ack). For a payload sealed by Config.Encryption it is keyed like the
	// payload's digest (an HMAC under a key derived from the payload key,
	// over the delivery's id and the Ack's digest), since courier's Ack is
	// computed from the payload's plain digest: the deliveries of one
	// notification with one payload store different Ack digests. It is ""
	// too when a publish again sealed the payload under another key (or
	// none) while the attempt that succeeded was in flight.
	AckSHA256      string
	SubscriptionID int64 // the subscription it was published to, 0 if none
	CreatedAt      time.Time
	UpdatedAt      time.Time
	OrderingKey    string // its ordering key, "" if none (see EnqueueParams.OrderingKey)
	// Held says why a pending or retrying delivery is not claimable yet,
	// "" when it is (or when it is not unfinished).
	Held Hold
}

// Hold is why an unfinished delivery waits although it may be due.
type Hold string

// Holds.
const (
	// HeldByKey: an earlier delivery of its ordering key is unfinished (or
	// failed and holds the key, see OrderingOnFailure). It becomes
	// claimable when that one finishes.
	HeldByKey Hold = "key"
	// HeldByEndpoint: its endpoint had no room when a claim reached it
	// (its limits, a worker's fair share, or its breaker). A later claim
	// makes it claimable again once the endpoint has room.
	HeldByEndpoint Hold = "endpoint"
)

// Get returns the delivery with the given id, its payload opened, or
// CodeNotFound. List with ListParams.ID reads it without the payload.
func (o *Outbox) Get(ctx context.Context, id int64) (Delivery, error) {
	r, err := getRow[outboxRow](ctx, o.s, o.s.db, "outbox_get", map[string]any{"id": id})
	if err != nil {
		return Delivery{}, err
	}
	return o.opened(r), nil
}

// Lookup returns the delivery whose identity is (notificationID,
// endpoint), its payload opened, or CodeNotFound: what a sender asks when
// it knows what it enqueued (the references' status(event_id)). An
// identity Enqueue would refuse (see EnqueueParams) is
// CodeInvalidArgument.
func (o *Outbox) Lookup(ctx context.Context, notificationID, endpoint string) (Delivery, error) {
	switch {
	case !wire.IsToken(notificationID):
		return Delivery{}, invalidArgument("Lookup notificationID must be " + wire.TokenRule)
	case !validEndpoint(endpoint):
		return Delivery{}, invalidEndpoint("Lookup endpoint")
	}
	// By the endpoint's normalized form, then by the spelling given: a
	// database written before endpoints were normalized may hold the
	// delivery under it.
	r, err := getRow[outboxRow](ctx, o.s, o.s.db, "outbox_lookup", map[string]any{"notification_id": notificationID, "endpoint": normalEndpoint(endpoint)})
	if courier.CodeOf(err) == courier.CodeNotFound && normalEndpoint(endpoint) != endpoint {
		r, err = getRow[outboxRow](ctx, o.s, o.s.db, "outbox_lookup", map[string]any{"notification_id": notificationID, "endpoint": endpoint})
	}
	if err != nil {
		return Delivery{}, err
	}
	return o.opened(r), nil
}

// opened converts a row with its payload opened, or nil when it cannot be.
func (o *Outbox) opened(r outboxRow) Delivery {
	d := r.delivery()
	if plain, err := o.s.cfg.Encryption.open(d.Payload, d.PayloadKeyID, d.NotificationID, d.Endpoint, d.KeyID); err == nil {
		d.Payload = plain
	} else {
		d.Payload = nil
	}
	return d
}

// ListParams filters and pages deliveries for operators. Pages run newest
// first; pass the last page's NextBefore as Before for the next. A filter
// no delivery could match (a notification id or endpoint Enqueue would
// refuse, an unknown status, a Since not before Until) is
// CodeInvalidArgument. Times are stored to the microsecond: Since and Until
// compare with them as they are, a part below the microsecond included.
type ListParams struct {
	// ID selects the one delivery with this id, read by its primary key,
	// never negative; 0 for any. A page of it is Get without the payload:
	// what a view of one delivery reads when it shows no payload, which
	// may be megabytes.
	ID int64
	// NotificationID selects one notification's deliveries, one per
	// endpoint, read from the identity's index; "" for any.
	NotificationID string
	Status         courier.Status // one of courier.Statuses(); "" for any
	Endpoint       string         // "" for any
	Since          time.Time      // updated at or after; zero for no bound
	Until          time.Time      // updated before; zero for no bound
	Before         int64          // ids below this one; 0 for the first page, never negative
	Limit          int            // 1..1000; defaults to 100
}

// Page is one page of deliveries, each with every field but its payload
// (Payload is nil: Get loads it).
type Page struct {
	Deliveries []Delivery
	NextBefore int64 // 0 when this is the last page
}

// List returns one page of deliveries matching p.
func (o *Outbox) List(ctx context.Context, p ListParams) (Page, error) {
	if p.Limit == 0 {
		p.Limit = 100
	}
	spelled := p.Endpoint // what is stored under it too, see Endpoints
	p.Endpoint = normalEndpoint(p.Endpoint)
	switch {
	case p.Limit < 1 || p.Limit > 1000:
		return Page{}, invalidArgument("ListParams.Limit must be within 1..1000")
	case p.Before < 0:
		return Page{}, invalidArgument("ListParams.Before must be a delivery id, or 0 for the first page")
	case p.ID < 0:
		return Page{}, invalidArgument("ListParams.ID must be a delivery id, or 0 for any")
	case p.NotificationID != "" && !wire.IsToken(p.NotificationID):
		return Page{}, invalidArgument("ListParams.NotificationID must be " + wire.TokenRule)
	case p.Endpoint != "" && !validEndpoint(p.Endpoint):
		return Page{}, invalidEndpoint("ListParams.Endpoint")
	case p.Status != "" && !slices.Contains(courier.Statuses(), p.Status):
		return Page{}, invalidArgument("ListParams.Status must be one of courier.Statuses()")
	}
	since, until := ceilMicros(p.Since), int64(math.MaxInt64)
	if !p.Until.IsZero() {
		until = ceilMicros(p.Until)
		if !p.Since.IsZero() && since >= until {
			return Page{}, invalidArgument("ListParams.Since must be before Until")
		}
	}
	// The cursor bounds the ids read, from the first page on: a page
	// after it seeks it by the primary key, never walking from the newest.
	// The first reads up to the largest id, which a delivery may have.
	maxID := int64(math.MaxInt64)
	if p.Before != 0 {
		maxID = p.Before - 1
	}
	args := map[string]any{
		"status": string(p.Status), "endpoint": p.Endpoint, "endpoint_spelled": spelled, "since": since, "until": until,
		"max_id": maxID, "limit": p.Limit + 1,
	}
	// One query reads the page, chosen by what p narrows it by.
	var rows []outboxRow
	list := func(name string) error { return o.s.selectRows(ctx, o.s.db, name, args, &rows) }
	var err error
	switch {
	case p.ID != 0:
		args["id"], args["notification_id"] = p.ID, p.NotificationID
		err = list("outbox_list_by_id")
	case p.NotificationID != "":
		args["notification_id"] = p.NotificationID
		err = list("outbox_list_by_notification")
	case p.Endpoint != "" && (p.Status == "" || p.Status == courier.StatusSucceeded || p.Status == courier.StatusSuppressed):
		// From the endpoint's index, in id order. With a finished status
		// too (what Prune removes): its deliveries grow with every
		// endpoint's traffic, and the status's index would walk all of
		// them for the few of a quiet endpoint, where the endpoint's walks
		// only the endpoint's own of other statuses: its backlog, what
		// operators have not settled, and the other finished status's.
		// With any other status the status's index does better: its rows
		// are every endpoint's backlog and what operators have not
		// settled, where an endpoint may have a million succeeded
		// deliveries to walk for its few failed ones.
		if err = list("outbox_list_by_endpoint"); err == nil {
			// The endpoint's two forms are read apart, each up to a page:
			// the page is the newest of both (see outbox_list_by_endpoint).
			slices.SortFunc(rows, func(a, b outboxRow) int { return cmp.Compare(b.ID, a.ID) })
			rows = rows[:min(len(rows), p.Limit+1)]
		}
	case p.Status != "" && p.Since.IsZero() && p.Until.IsZero():
		err = list("outbox_list_by_status") // from the status's index, in id order
	case p.Status != "":
		rows, err = o.listWindow(ctx, args) // outbox_list_by_status_window
	default:
		err = list("outbox_list")
	}
	if err != nil {
		return Page{}, err
	}
	var page Page
	for _, r := range rows {
		page.Deliveries = append(page.Deliveries, r.delivery())
	}
	if len(page.Deliveries) > p.Limit {
		page.Deliveries = page.Deliveries[:p.Limit]
		page.NextBefore = page.Deliveries[p.Limit-1].ID
	}
	return page, nil
}

// listWindow reads a page of one status within a window of time
// (outbox_list_by_status_window), planned with the window's values
// (withValues): no one plan serves a narrow window and a wide one.
func (o *Outbox) listWindow(ctx context.Context, args map[string]any) ([]outboxRow, error) {
	var rows []outboxRow
	err := o.s.withValues(ctx, "outbox_list_by_status_window", func(tx DBTX) error {
		return o.s.selectRows(ctx, tx, "outbox_list_by_status_window", args, &rows)
	})
	return rows, err
}

// Cancel withdraws a pending or retrying delivery: it ends suppressed with
// code cancelled. So does a failed or quarantined one an operator decides
// not to send again (Redrive sends a failed one again, and a quarantined
// one whose key was missing or wrong, never one that was altered): Cancel
// is how an operator settles them (Health stops counting them, Prune may
// remove them; the attempts log keeps their history) and frees the
// ordering key one may hold (a failed or quarantined head under
// OrderingOnFailure OrderingHoldKey). Cancelling the head of an ordering key lets
// the next delivery of the key go. A delivery in any other state
// (succeeded, suppressed, leased) is CodeNotFound. A write the database
// refuses by a rule of its own (a trigger, a CHECK courier did not make)
// is CodeInternal: the id was not at fault.
func (o *Outbox) Cancel(ctx context.Context, id int64) error {
	for {
		err := o.s.inTx(ctx, func(tx *sqlx.Tx) error { return o.cancel(ctx, tx, id) })
		if !errors.Is(err, errKeyMadeSince) {
			return refusedByTheDatabase(err)
		}
	}
}

// errKeyMadeSince ends a Cancel's transaction that found its delivery's
// ordering key held by another transaction, the key having had no row
// when the Cancel looked: Cancel begins again, and takes the key first.
var errKeyMadeSince = errors.New("store: the ordering key got a row since Cancel looked")

// cancel is one try of Cancel, in tx.
func (o *Outbox) cancel(ctx context.Context, tx *sqlx.Tx, id int64) error {
	now := o.s.now()
	var head []int64 // the key's row first, as advance takes it (see ordering_key_lock_of)
	if err := o.s.selectRows(ctx, tx, "ordering_key_lock_of", map[string]any{"id": id}, &head); err != nil {
		return err
	}
	var rows []keyed
	if err := o.s.selectRows(ctx, tx, "outbox_cancel", map[string]any{"id": id, "now": now}, &rows); err != nil {
		return err
	}
	if len(rows) == 0 {
		return errNotFound
	}
	if len(head) > 0 {
		return o.advance(ctx, tx, now, rows) // its row is held already
	}
	// The key had no row when Cancel looked, and may have one now, made
	// since (an enqueue, a Redrive of the delivery): the transaction that
	// holds it may wait for the delivery's row, which Cancel holds now, so
	// Cancel does not wait for it. It takes the row at once, or begins
	// again, and then takes it before the delivery's.
	left, err := o.advanceKeys(ctx, tx, now, rows, false)
	switch {
	case err != nil:
		return err
	case left:
		return errKeyMadeSince
	}
	return nil
}

// RedriveParams selects the deliveries to send again: failed ones, and
// quarantined ones whose payload could not be opened (see Redrive).
type RedriveParams struct {
	ID       int64  // one delivery; 0 for all that match Endpoint
	Endpoint string // "" for every endpoint; otherwise as EnqueueParams.Endpoint (see Endpoints for other spellings)
}

// Redrivable reports whether d is in a state Redrive takes: failed, or
// quarantined with code payload_unreadable. Redrive still leaves one that
// has made 1,000 attempts, or a command under another contract than its
// endpoint's pin.
func (d Delivery) Redrivable() bool {
	return d.Status == courier.StatusFailed ||
		d.Status == courier.StatusQuarantined && d.LastErrorCode == courier.CodePayloadUnreadable
}

// Redrive moves failed deliveries back to pending, each with a fresh
// attempt budget and retry horizon, and returns how many it moved. The
// application's enqueue made again still finds a redriven delivery
// (Existed): it is compared with the budget it was enqueued with, not
// with the one Redrive gave it (one redriven by an earlier courier, which
// did not keep the budget asked for, is compared with the budget that
// redrive gave it).
//
// It moves them in batches, each in a transaction of its own, so that
// other writers wait for a batch at most, never for the whole of a large
// redrive: on SQLite every claim, settle and enqueue, which wait for its
// one writer, and on PostgreSQL the enqueues to the ordering keys a batch
// takes. It moves the deliveries that were failed when it began, and may
// move others that fail while it runs; one it moved that fails again
// before it ends stays failed, for the next Redrive. An error, a cancelled
// ctx's included, ends it between batches or rolls the batch under way
// back: it returns how many the batches before moved, with the error.
//
// A redriven delivery is sent under its notification id, as every
// attempt was, and a receiver tells it from a new notification only
// while it keeps that id's dedupe record. A failed delivery may have been
// processed (its answer lost, or refused as ack_invalid): redriven after
// its receiver pruned the record (see Inbox.Prune), it is processed
// again.
//
// It moves quarantined deliveries with code payload_unreadable too: their
// stored bytes are intact, but the process that claimed them lacked their
// payload key, or held other bytes under its id (see Encryption). Once
// the key is configured again in every process that claims, Redrive
// sends them as it sends failed ones; one redriven while its key is still
// missing or wrong is quarantined again at its next claim. A quarantined
// delivery whose payload does not match its digest (integrity_mismatch:
// the row was altered) stays quarantined: only Cancel settles it.
//
// A redriven delivery with an ordering key keeps the key's order: the
// head that held its key is sent again first; one that was skipped
// (OrderingSkipFailed) waits for the key's current head and goes next; one of a
// key that fails while Redrive runs may stay failed, for the next
// Redrive. A delivery that has made 1,000 attempts, the most any delivery
// may make, stays as it is, and so does a command enqueued under another
// capabilities digest than its endpoint's pin (re-issue it under the
// current one; see Contracts). Attempt numbers keep counting: a command
// redriven once it has made its source_max_attempts is refused by its
// source at the next attempt (source_attempts_exhausted), and fails
// again; re-issue it under a new request id. (The attempt number a
// source judges is not signed: a copy of that refused request sent again
// with a lower one, while its signature is accepted, is applied. Re-issue
// a command whose effect must not happen twice once that window has
// passed.)
//
// A write the database refuses by a rule of its own (a trigger, a CHECK
// courier did not make) is CodeInternal, not CodeInvalidArgument: the
// parameters were not at fault, and the same Redrive fails again until
// the rule changes.
func (o *Outbox) Redrive(ctx context.Context, p RedriveParams) (int, error) {
	if p.Endpoint != "" && !validEndpoint(p.Endpoint) {
		return 0, invalidEndpoint("RedriveParams.Endpoint")
	}
	// The endpoint's normalized form, then the spelling given: a database
	// written before endpoints were normalized may hold failed deliveries
	// under it, and operators' tools name the endpoint by what is stored.
	spelled := []string{normalEndpoint(p.Endpoint)}
	if p.Endpoint != spelled[0] {
		spelled = append(spelled, p.Endpoint)
	}
	total := 0
	for _, endpoint := range spelled {
		p.Endpoint = endpoint
		n, err := o.redrive(ctx, p)
		total += n
		if err != nil {
			return total, refusedByTheDatabase(err)
		}
	}
	return total, nil
}

// maxRedriveBatch is the most deliveries one transaction of Redrive
// moves.
const maxRedriveBatch = 200

// redriveMark is a delivery's place in courier_outbox_status, within its
// status: where a batch of Redrive's ends.
type redriveMark struct {
	UpdatedAt int64 `db:"updated_at"`
	ID        int64 `db:"id"`
}

// redrive is Redrive of the deliveries stored under p.Endpoint as it is
// spelled, in batches of at most maxRedriveBatch deliveries, each moved in a
// transaction of its own: on SQLite every other writer waits for the one
// writer while a transaction holds it, and on PostgreSQL enqueues to the
// ordering keys it took wait for them, for a batch at most, never for the
// whole of a redrive however many deliveries it moves. The batches go, in
// each status, up to the delivery that was last when Redrive began: one
// that fails again meanwhile, stamped later, waits for the next Redrive.
// It returns how many the committed batches moved, and the error that
// ended the others (a cancelled ctx ends Redrive between two batches, or
// rolls the batch under way back).
func (o *Outbox) redrive(ctx context.Context, p RedriveParams) (int, error) {
	if p.ID != 0 {
		return o.redriveBatch(ctx, p.Endpoint, []int64{p.ID})
	}
	statuses := []courier.Status{courier.StatusFailed, courier.StatusQuarantined}
	last := make([]redriveMark, len(statuses))
	for i, status := range statuses {
		err := o.s.scan(ctx, o.s.db, "outbox_redrive_last", map[string]any{"status": string(status)}, &last[i].UpdatedAt, &last[i].ID)
		switch {
		case isNoRows(err):
			last[i] = redriveMark{} // none: no batch reaches a delivery
		case err != nil:
			return 0, err
		}
	}
	total := 0
	for i, status := range statuses {
		after := redriveMark{UpdatedAt: math.MinInt64}
		for last[i].ID != 0 {
			batch, err := o.redriveNext(ctx, map[string]any{
				"status": string(status), "endpoint": p.Endpoint, "limit": maxRedriveBatch,
				"after_updated_at": after.UpdatedAt, "after_id": after.ID,
				"last_updated_at": last[i].UpdatedAt, "last_id": last[i].ID,
			})
			if err != nil {
				return total, err
			}
			if len(batch) == 0 {
				break
			}
			ids := make([]int64, len(batch))
			for j, m := range batch {
				ids[j] = m.ID
			}
			n, err := o.redriveBatch(ctx, p.Endpoint, ids)
			total += n
			if err != nil {
				return total, err
			}
			if len(batch) < maxRedriveBatch {
				break
			}
			after = batch[len(batch)-1]
		}
	}
	return total, nil
}

// redriveNext reads the next batch of a Redrive's (outbox_redrive_batch),
// in a read-only transaction of its own on DB(), which holds no writer
// and locks nothing.
func (o *Outbox) redriveNext(ctx context.Context, args map[string]any) ([]redriveMark, error) {
	tx, err := o.s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, o.s.dialect.interpret("outbox_redrive_batch", err)
	}
	defer tx.Rollback()
	if _, err := o.s.exec(ctx, tx, "outbox_redrive_in_order", nil); err != nil {
		return nil, err
	}
	var batch []redriveMark
	if err := o.s.selectRows(ctx, tx, "outbox_redrive_batch", args, &batch); err != nil {
		return nil, err
	}
	return batch, nil
}

// redriveBatch moves the deliveries ids, those of them still to be moved
// (stored under endpoint, "" for any), in a transaction, and wakes the
// workers when it moved any. It returns how many it moved.
func (o *Outbox) redriveBatch(ctx context.Context, endpoint string, ids []int64) (int, error) {
	var n int
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := o.s.now()
		keys, err := o.redriveKeys(ctx, tx, now, endpoint, ids)
		if err != nil {
			return err
		}
		type keyArg struct {
			Endpoint    string `json:"endpoint"`
			OrderingKey string `json:"ordering_key"`
		}
		taken := make([]keyArg, 0, len(keys))
		for _, k := range keys {
			taken = append(taken, keyArg{k.Endpoint, k.OrderingKey.String})
		}
		var rows []keyed
		if err := o.s.selectRows(ctx, tx, "outbox_redrive", map[string]any{
			"now": now, "deadline": now + o.s.cfg.RetryHorizon.Microseconds(), "budget": o.s.cfg.MaxAttempts,
			"endpoint": endpoint, "ids": jsonArg(ids), "keys": jsonArg(taken),
		}, &rows); err != nil {
			return err
		}
		n = len(rows)
		if err := o.rejoin(ctx, tx, now, rows); err != nil {
			return err
		}
		// A key redriveKeys made for a delivery that another transaction
		// ended meanwhile (a Cancel), which the redrive then left, has that
		// delivery as its head: it moves on as for a head just finished.
		moved := make(map[int64]bool, len(rows))
		for _, r := range rows {
			moved[r.ID] = true
		}
		var left []keyed
		for _, k := range keys {
			if !moved[k.ID] {
				left = append(left, keyed{ID: k.ID, Endpoint: k.Endpoint, OrderingKey: k.OrderingKey})
			}
		}
		return o.advance(ctx, tx, now, left)
	})
	if err != nil {
		return 0, err // rolled back: nothing moved
	}
	if n > 0 {
		o.s.wake(ctx)
	}
	return n, nil
}

// redriveKeys takes the rows of the ordering keys of the deliveries a
// batch of Redrive's (ids, stored under endpoint) is about to move, in key
// order, before it locks any of them (see outbox_redrive_keys); a key
// without a row gets one, headed by the first of them. It returns that
// first delivery of each key.
func (o *Outbox) redriveKeys(ctx context.Context, tx *sqlx.Tx, now int64, endpoint string, ids []int64) ([]keyed, error) {
	var keys []keyed
	if err := o.s.selectRows(ctx, tx, "outbox_redrive_keys", map[string]any{"endpoint": endpoint, "ids": jsonArg(ids)}, &keys); err != nil {
		return nil, err
	}
	for _, k := range inKeyOrder(keys) {
		var head int64
		args := map[string]any{"endpoint": k.Endpoint, "ordering_key": k.OrderingKey.String, "id": k.ID, "now": now}
		if err := o.s.scan(ctx, tx, "ordering_key_join", args, &head); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// Prune deletes succeeded and suppressed deliveries last updated more than
// p.OlderThan ago, in bounded batches; see Inbox.Prune. It then deletes
// the breaker records (Endpoints) as old of the endpoints with no delivery
// left to send: closed or open ones, and those the breaker disabled (a
// 410 Gone, or failing for Config.Breaker.DisableAfter): receivers that
// failed or went away and were never sent to again, whose records would
// otherwise stay for good and be read by every claim. A later delivery to
// one is sent as to a healthy endpoint (a receiver still gone disables it
// again). An endpoint an operator disabled (Endpoints.Disable) stays
// disabled until Enable, however long nothing is sent to it, unless it
// had been failing for DisableAfter by then, as the breaker would have
// disabled it. Failed and quarantined deliveries, the blocked ordering
// keys they hold, contract pins and limits are an operator's to settle
// and stay (see the package documentation, Retention). It returns the
// deliveries and records it deleted, which MaxRows bounds together.
func (o *Outbox) Prune(ctx context.Context, p PruneParams) (int, error) {
	return o.prune(ctx, o.s.prune, p)
}

// prune is Prune, each statement run by run.
func (o *Outbox) prune(ctx context.Context, run pruner, p PruneParams) (int, error) {
	n, err := o.s.pruneOlder(ctx, run, "outbox_prune", nil, p)
	if err != nil || (p.MaxRows > 0 && n >= p.MaxRows) {
		return n, err
	}
	if p.MaxRows > 0 {
		p.MaxRows -= n
	}
	// The breaker disabled a record it stamped when the endpoint had been
	// failing for DisableAfter (see Endpoints.record), to the microsecond,
	// rounded up as the breaker's comparison of durations does.
	disableAfter := (o.s.cfg.Breaker.DisableAfter + time.Microsecond - 1) / time.Microsecond
	m, err := o.s.pruneOlder(ctx, run, "endpoint_prune", map[string]any{"disable_after": int64(disableAfter)}, p)
	return n + m, err
}

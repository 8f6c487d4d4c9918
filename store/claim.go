package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
)

// claimed is a claimed row before its payload is opened: what the claim
// statements return.
type claimed struct {
	protocol.Claimed
	payloadKeyID string // the key that sealed Payload
	fingerprint  string // the subscription's fingerprint at enqueue
	eventType    string // the published event's type; "" if none recorded
	orderingKey  sql.NullString
	endedWith    courier.Code // why admit ended it, if it did
}

func claimedOf(r outboxRow) claimed {
	return claimed{
		Claimed: protocol.Claimed{
			Lease: protocol.Lease{
				DeliveryID: r.ID, Token: r.LeaseToken.String, Owner: r.LeaseOwner.String, Attempt: r.Attempts,
				LeasedAt: nullMicros(r.LeasedAt), ExpiresAt: nullMicros(r.LeaseExpiresAt), Sealed: r.PayloadKeyID,
				Keyed: r.OrderingKey.Valid,
			},
			NotificationID: r.NotificationID, Endpoint: r.Endpoint, Payload: r.Payload, PayloadSHA256: r.PayloadSHA256,
			Profile: r.Profile, KeyID: r.KeyID, Priority: r.Priority,
			Deadline: fromMicros(r.Deadline), SubscriptionID: r.SubscriptionID.Int64,
			Trace:  courier.TraceContext{Parent: r.TraceParent.String, State: r.TraceState.String},
			Spared: r.SparedAttempts,
		},
		payloadKeyID: r.PayloadKeyID,
		fingerprint:  r.SubscriptionFingerprint.String,
		eventType:    r.EventType.String,
		orderingKey:  r.OrderingKey,
	}
}

// keyed is the claimed delivery as the ordering keys see it, with its
// status after status.
func (c claimed) keyed(status courier.Status) keyed {
	return keyed{ID: c.DeliveryID, Endpoint: c.Endpoint, OrderingKey: c.orderingKey, Status: status}
}

// Bounds on what one claim ends as expired beyond its batch (see
// claimRun): after a long outage the backlog of expired rows is ended a
// bounded slice at a time, claim by claim.
const (
	maxExpiredPerClaim = protocol.MaxClaimBatch // rows, by the sweep of each priority
	// maxReclaimedPerClaim bounds the expired leases one claim
	// transaction takes back (reclaim): when a fleet of workers stops at
	// once, their leases expire together, and the claims after it take
	// them back a batch at a time, the first to expire first.
	maxReclaimedPerClaim = protocol.MaxClaimBatch
	maxProbePasses       = 8 // statements per probed endpoint
	// maxParkedPerClaim bounds the deliveries one claim parks: behind a
	// backlog of an endpoint with no room, the claim parks that many and
	// leaves the rest to the next claims, each parked once.
	maxParkedPerClaim = 10 * protocol.MaxClaimBatch
)

// claim implements protocol.Outbox.Claim. A claim may end rows rather
// than lease them (expired, suppressed, quarantined): when one did and
// leased fewer than p.Limit, it claims again, in a transaction of its
// own, for the room left, until a claim ends none or the rows ended come
// to maxExpiredPerClaim. So a claim that leases nothing found nothing
// due behind the rows it ended, unless those were that many: a worker
// does not wait a poll, nor a caller of Work stop, with deliveries due
// behind a few rows of a paused subscription. When a later transaction
// fails, what the earlier ones leased is returned without the error,
// unless the Store was closed meanwhile: then the claim returns the
// closed Store's error and nothing, for no outcome of what it leased
// could be recorded, nor could it be given back (its leases expire), and
// an attempt sent on it would be sent again.
func (o *Outbox) claim(ctx context.Context, p protocol.ClaimParams) ([]protocol.Claimed, error) {
	var all []protocol.Claimed
	for total, pass := 0, 0; ; pass++ {
		out, ended, err := o.claimOnce(ctx, p)
		for i := range out {
			out[i].Pass = pass
		}
		switch {
		case errors.Is(err, protocol.ErrClosed):
			return nil, err
		case err != nil && len(all) > 0:
			return all, nil //nolint:nilerr // what was leased goes to the caller (a context ended, say); the next claim meets the failure
		case err != nil:
			return nil, err
		}
		all, total = append(all, out...), total+ended
		if ended == 0 || len(out) >= p.Limit || total >= maxExpiredPerClaim {
			return all, nil
		}
		p.Limit -= len(out)
	}
}

// claimOnce is one claim transaction. It returns what it leased, and how
// many rows it ended instead.
func (o *Outbox) claimOnce(ctx context.Context, p protocol.ClaimParams) ([]protocol.Claimed, int, error) {
	switch {
	case !wire.IsVisible(p.Owner, protocol.MaxOwner):
		return nil, 0, invalidArgument(fmt.Sprintf("ClaimParams.Owner must be 1-%d bytes of visible ASCII, without spaces", protocol.MaxOwner))
	case p.Limit < 1 || p.Limit > protocol.MaxClaimBatch:
		return nil, 0, invalidArgument(fmt.Sprintf("ClaimParams.Limit must be within 1..%d", protocol.MaxClaimBatch))
	case p.Lease < time.Millisecond:
		return nil, 0, invalidArgument("ClaimParams.Lease must be at least 1ms")
	case p.EndpointCap < 0:
		return nil, 0, invalidArgument("ClaimParams.EndpointCap must not be negative")
	}
	var run *claimRun
	var reclaimed []settledRow
	var out []protocol.Claimed
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		if p.Began != nil {
			p.Began()
		}
		now := o.s.now()
		if err := o.s.schema.check(ctx, tx, o.s.dialect, now); err != nil {
			return err // an altered schema: nothing is leased
		}
		run = &claimRun{o: o, tx: tx, limit: p.Limit, args: map[string]any{
			"owner": p.Owner, "now": now, "lease_expires_at": now + p.Lease.Microseconds(), "cap": p.EndpointCap,
		}, limited: make(map[string]int)}
		look, err := run.look(ctx)
		if err != nil {
			return err
		}
		if look.expiredLeases {
			if reclaimed, err = o.reclaim(ctx, tx, now); err != nil {
				return err
			}
		}
		// The keys of the leases it reclaimed, and those a settle or claim
		// left (staleKeys), move on first: a delivery they promote is
		// claimable in this claim. A claim never waits for a key's row
		// (advanceOrLeave), so it may take keys in several groups.
		stale, staleLooked, err := o.stale(ctx, tx, now)
		if err != nil {
			return err
		}
		for _, r := range reclaimed {
			stale = append(stale, r.keyed)
		}
		if err := o.advanceOrLeave(ctx, tx, now, stale); err != nil {
			return err
		}
		if look.probesDue {
			if err := run.probes(ctx); err != nil {
				return err
			}
		}
		if err := run.expireParked(ctx); err != nil {
			return err
		}
		// The look is as fresh as the statements it stands for were only
		// while the claim ran none since: after the sweep, the look for
		// stale keys, the probes or the parked deliveries' expiry (each
		// seldom), what it read may have moved, by this claim or, on
		// PostgreSQL, by another transaction that committed meanwhile (a
		// Redrive, a settle that promoted a key's next delivery), whose
		// rows those statements, read after them, found: read it again.
		if look.expiredLeases || staleLooked || look.probesDue || run.parkedDue != 0 {
			if look, err = run.look(ctx); err != nil {
				return err
			}
		}
		// The deliveries it puts back in the due index add their
		// priorities to the look's: what it leases straight from the
		// parked ones takes none from the due index.
		unparked, err := run.unpark(ctx, look.parked)
		if err != nil {
			return err
		}
		if err := run.byPriority(ctx, withPriorities(look.priorities, unparked)); err != nil {
			return err
		}
		if err := run.take(ctx); err != nil {
			return err
		}
		if out, err = run.admitGot(ctx, now); err != nil {
			return err
		}
		return o.advanceOrLeave(ctx, tx, now, run.ended)
	})
	if err != nil {
		return nil, 0, err
	}
	o.reportClaim(p, run, reclaimed, out)
	return out, run.expired + len(run.withheld), nil // the probes' included
}

// reportClaim tells the claim's callbacks (p) and the Store's Hook what a
// committed claim transaction did: run leased out, ended or withheld the
// rest, and took back the expired leases reclaimed. It sets when the next
// claim looks for parked deliveries past their deadline (run.parkedDue).
func (o *Outbox) reportClaim(p protocol.ClaimParams, run *claimRun, reclaimed []settledRow, out []protocol.Claimed) {
	if run.parkedDue != 0 {
		o.parkedDue.Store(run.parkedDue)
	}
	if p.Ended != nil {
		for _, e := range run.withheld {
			p.Ended(e)
		}
	}
	if p.Reclaimed != nil && len(reclaimed) > 0 {
		p.Reclaimed(len(reclaimed))
	}
	for _, r := range reclaimed {
		o.s.observe(Event{Kind: EventSettled, N: 1, Status: r.Status, Code: courier.Code(r.LastErrorCode.String)})
	}
	if run.expired > 0 {
		o.s.observe(Event{Kind: EventSettled, N: run.expired, Status: courier.StatusFailed, Code: courier.CodeExpired})
	}
	if len(out) > 0 {
		o.s.observe(Event{Kind: EventClaimed, N: len(out), Status: courier.StatusLeased})
	}
}

// reclaim ends the leases that expired, up to maxReclaimedPerClaim of
// them, the first to expire first: their attempt is logged, and the
// row waits for a retry (or fails, its budget or horizon spent). The
// rows it ends are those it logged, named by their ids. It returns
// them, and the claim moves their ordering keys on.
func (o *Outbox) reclaim(ctx context.Context, tx *sqlx.Tx, now int64) ([]settledRow, error) {
	var logged []int64
	if err := o.s.selectRows(ctx, tx, "attempts_log_expired_leases", map[string]any{"now": now, "limit": maxReclaimedPerClaim}, &logged); err != nil {
		return nil, err
	}
	if len(logged) == 0 {
		return nil, nil
	}
	var rows []settledRow
	err := o.s.selectRows(ctx, tx, "outbox_reclaim_expired_leases", map[string]any{"now": now, "ids": jsonArg(logged)}, &rows)
	return rows, err
}

// claimRun is one claim's transaction: the deliveries it leased so far,
// how many it ended instead because their deadline had come, and how many
// it parked because their endpoint had no room. An expired or parked row
// takes a place in a claim statement's batch without being leased; when a
// statement ended some, the run sweeps on through the due rows of that
// priority (outbox_expire_due, bounded by maxExpiredPerClaim) and claims
// again for the room left; when it parked some, it claims again from the
// next due rows (bounded by maxParkedPerClaim). Each statement reads only
// due rows, in claim order, from the due index: the rows a claim ends or
// parks are rows it would have read anyway, and each leaves the index as
// it is ended or parked, so a blocked endpoint's backlog costs each of its
// rows one step, once, not every claim a walk over all of them.
type claimRun struct {
	o       *Outbox
	tx      *sqlx.Tx
	limit   int
	args    map[string]any // owner, now, lease_expires_at, cap
	got     []claimed
	expired int
	parked  int
	ended   []keyed // rows ended (expired, quarantined, suppressed) that may head an ordering key
	// withheld are the deliveries admit ended (quarantined, suppressed),
	// for ClaimParams.Ended once the claim commits.
	withheld []protocol.Ended
	limited  map[string]int // endpoints with limits -> deliveries leased
	// parkedDue, when not 0, is when the next claim looks for parked
	// deliveries past their deadline (see expireParked): the Outbox's
	// once this claim commits, so that one rolled back leaves it be.
	parkedDue int64
	// justParked are the endpoints the last claim statement parked
	// deliveries of.
	justParked []string
	// admitted are the probes, admitted as they were leased (the rest of
	// got is admitted at the end of the claim).
	admitted []protocol.Claimed
	// busy are the limited endpoints whose limits row another claimer
	// holds (PostgreSQL): the claim leaves their rows due and picks past
	// them.
	busy []string
}

func (r *claimRun) room() int { return r.limit - len(r.got) - len(r.admitted) }

// run runs a claim statement with the run's arguments and extra, keeping
// what it leased; it returns how many rows it leased, ended and parked.
func (r *claimRun) run(ctx context.Context, name string, extra map[string]any) (leased, expired, parked int, err error) {
	args := maps.Clone(r.args)
	maps.Copy(args, extra)
	var rows []outboxRow
	if err := r.o.s.selectRows(ctx, r.tx, name, args, &rows); err != nil {
		return 0, 0, 0, err
	}
	for _, row := range rows {
		switch row.Status {
		case courier.StatusLeased:
			r.got = append(r.got, claimedOf(row))
			leased++
		case courier.StatusFailed: // ended: its deadline had come
			expired++
			r.ended = append(r.ended, claimedOf(row).keyed(row.Status))
		default: // parked: its endpoint had no room
			parked++
			if !slices.Contains(r.justParked, row.Endpoint) {
				r.justParked = append(r.justParked, row.Endpoint)
			}
		}
	}
	r.expired += expired
	r.parked += parked
	return leased, expired, parked, nil
}

// picked is a due row outbox_claim_pick picked.
type picked struct {
	ID       int64  `db:"id"`
	Endpoint string `db:"endpoint"`
	Limited  bool   `db:"limited"` // the endpoint has limits
	Busy     bool   `db:"busy"`    // another claimer holds its limits (PostgreSQL): left due
}

// step is what a claimNext did with the due rows it picked: how many it
// picked, left due because their endpoint was busy (the next pick passes
// over that endpoint), ended because their deadline had come, and parked
// because their endpoint had no room. The rest it leased.
type step struct{ picked, busy, expired, parked int }

// claimNext picks the next due rows of priority p, at most limit, and
// leases, ends or parks each (outbox_claim).
func (r *claimRun) claimNext(ctx context.Context, p, limit int) (step, error) {
	var rows []picked
	busyArg := "[]"
	if len(r.busy) > 0 {
		busyArg = jsonArg(r.busy)
	}
	args := map[string]any{"now": r.args["now"], "priority": p, "limit": limit, "busy": busyArg}
	if err := r.o.s.selectRows(ctx, r.tx, "outbox_claim_pick", args, &rows); err != nil {
		return step{}, err
	}
	st := step{picked: len(rows)}
	ids := make([]int64, 0, len(rows))
	for _, row := range rows {
		if row.Busy {
			st.busy++
			if !slices.Contains(r.busy, row.Endpoint) {
				r.busy = append(r.busy, row.Endpoint)
			}
			continue
		}
		ids = append(ids, row.ID)
		if _, ok := r.limited[row.Endpoint]; row.Limited && !ok {
			r.limited[row.Endpoint] = 0 // its leases are counted below
		}
	}
	if len(ids) == 0 {
		return st, nil
	}
	before := len(r.got)
	var err error
	if _, st.expired, st.parked, err = r.run(ctx, "outbox_claim", map[string]any{"ids": jsonArg(ids)}); err != nil {
		return step{}, err
	}
	for _, c := range r.got[before:] {
		if _, ok := r.limited[c.Endpoint]; ok {
			r.limited[c.Endpoint]++
		}
	}
	// The next statement reckons an endpoint's room from its bucket: the
	// tokens this one spent leave it first.
	if err := r.take(ctx); err != nil {
		return step{}, err
	}
	if st.parked > 0 {
		// The endpoints without room have more due, most likely: park
		// the rest of it at once rather than batch by batch.
		if err := r.parkDue(ctx, p); err != nil {
			return step{}, err
		}
	}
	return st, nil
}

// parkDue parks the due deliveries of priority p of each endpoint the
// last claim statement parked some of (it had no room), within
// maxParkedPerClaim.
func (r *claimRun) parkDue(ctx context.Context, p int) error {
	full := r.justParked
	r.justParked = nil
	for _, e := range full {
		if r.parked >= maxParkedPerClaim {
			return nil
		}
		res, err := r.o.s.exec(ctx, r.tx, "outbox_park_due", map[string]any{
			"endpoint": e, "priority": p, "now": r.args["now"], "limit": maxParkedPerClaim - r.parked,
		})
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		r.parked += int(n)
	}
	return nil
}

// take takes the tokens of the deliveries of rate-limited endpoints the
// claim leased since the last take.
func (r *claimRun) take(ctx context.Context) error {
	type takeArg struct {
		Endpoint string `json:"endpoint"`
		N        int    `json:"n"`
	}
	var batch []takeArg
	for e, n := range r.limited {
		if n > 0 {
			batch = append(batch, takeArg{Endpoint: e, N: n})
		}
	}
	if len(batch) == 0 {
		return nil
	}
	if _, err := r.o.s.exec(ctx, r.tx, "endpoint_limits_take", map[string]any{"batch": jsonArg(batch), "now": r.args["now"]}); err != nil {
		return err
	}
	for e := range r.limited {
		r.limited[e] = 0
	}
	return nil
}

// parkedEndpoint is an endpoint with parked deliveries, and its room.
type parkedEndpoint struct {
	Endpoint      string        `db:"endpoint"`
	Room          int           `db:"room"`
	Limited       bool          `db:"limited"`        // it has limits (courier_endpoint_limits)
	FirstDue      int64         `db:"first_due"`      // its first parked delivery's due time
	FirstPriority int64         `db:"first_priority"` // its first parked delivery's priority
	LastPriority  int64         `db:"last_priority"`  // its last parked delivery's priority (the highest)
	LowestDue     sql.NullInt64 `db:"lowest_due"`     // the lowest priority waiting in the due index, any endpoint's
}

// claimLook is what a claim reads first (outbox_claim_look): whether a
// lease has expired, whether an endpoint is due a probe, the endpoints
// with parked deliveries and their room, and the priorities with waiting
// rows, lowest first. A claim runs the statements that act on each only
// when the look says there is something to act on.
type claimLook struct {
	expiredLeases, probesDue bool
	parked                   []parkedEndpoint
	priorities               []int
}

// lookRow is a row of outbox_claim_look: a parked endpoint, or the one row
// with Endpoint "" when none is, and the answers every row carries.
type lookRow struct {
	ExpiredLeases bool   `db:"expired_leases"`
	ProbesDue     bool   `db:"probes_due"`
	Priorities    string `db:"priorities"` // a JSON array
	parkedEndpoint
}

// look reads the claim's look (outbox_claim_look).
func (r *claimRun) look(ctx context.Context) (claimLook, error) {
	var rows []lookRow
	if err := r.o.s.selectRows(ctx, r.tx, "outbox_claim_look", map[string]any{
		"now": r.args["now"], "owner": r.args["owner"], "cap": r.args["cap"],
	}, &rows); err != nil {
		return claimLook{}, err
	}
	if len(rows) == 0 {
		return claimLook{}, &coded.Error{Code: courier.CodeInternal, Msg: "store: outbox_claim_look returned no row"} // it returns one at least, whatever the tables hold
	}
	l := claimLook{expiredLeases: rows[0].ExpiredLeases, probesDue: rows[0].ProbesDue}
	if err := json.Unmarshal([]byte(rows[0].Priorities), &l.priorities); err != nil {
		return claimLook{}, &coded.Error{Code: courier.CodeInternal, Msg: "store: outbox_claim_look's priorities are not a JSON array of integers", Err: err}
	}
	slices.Sort(l.priorities)
	for _, row := range rows {
		if row.Endpoint != "" {
			l.parked = append(l.parked, row.parkedEndpoint)
		}
	}
	return l, nil
}

// unpark gives the endpoints with parked deliveries, eps, the room each
// has now, the one parked longest first: being the oldest due, they come
// before the due index's of their priority. An endpoint without limits is
// leased its parked deliveries at once (outbox_claim_parked) when all are
// of the lowest priority waiting, in the due index or parked at an
// endpoint with room. Otherwise one of a lower priority than some of them
// (a removal enqueued behind parked changes, another endpoint's parked
// later) comes first in claim order, so the endpoint's parked deliveries
// are put back in the due index, as those of an endpoint with limits are,
// for the claim statements, which lease in claim order (and take its
// limits row on PostgreSQL, and its tokens). It returns the priorities
// of the deliveries it put back (outbox_unpark), which the due index may
// not have held before.
func (r *claimRun) unpark(ctx context.Context, eps []parkedEndpoint) (unparked []int, err error) {
	slices.SortFunc(eps, func(a, b parkedEndpoint) int { return cmp.Compare(a.FirstDue, b.FirstDue) })
	var lowest sql.NullInt64 // waiting, in the due index or parked at an endpoint with room
	if len(eps) > 0 {
		lowest = eps[0].LowestDue
	}
	for _, e := range eps {
		if e.Room > 0 && (!lowest.Valid || e.FirstPriority < lowest.Int64) {
			lowest = sql.NullInt64{Int64: e.FirstPriority, Valid: true}
		}
	}
	for _, e := range eps {
		n := min(e.Room, r.room())
		switch {
		case e.Room <= 0:
			continue
		case n <= 0:
			return unparked, nil
		}
		if !e.Limited && e.LastPriority <= lowest.Int64 {
			if _, _, _, err := r.run(ctx, "outbox_claim_parked", map[string]any{"endpoint": e.Endpoint, "limit": n}); err != nil {
				return nil, err
			}
			continue
		}
		var priorities []int
		if err := r.o.s.selectRows(ctx, r.tx, "outbox_unpark", map[string]any{"endpoint": e.Endpoint, "limit": n}, &priorities); err != nil {
			return nil, err
		}
		unparked = append(unparked, priorities...)
	}
	return unparked, nil
}

// withPriorities returns the priorities, lowest first and each once, of
// priorities (sorted) and of more.
func withPriorities(priorities, more []int) []int {
	if len(more) == 0 {
		return priorities
	}
	all := slices.Concat(priorities, more)
	slices.Sort(all)
	return slices.Compact(all)
}

// byPriority claims due deliveries into the room left, priority by
// priority, lowest first (priorities, as the look read them): each claim
// statement then reads the due index as a range.
func (r *claimRun) byPriority(ctx context.Context, priorities []int) error {
	if r.room() <= 0 {
		return nil
	}
	for _, p := range priorities {
		swept := false
		for r.room() > 0 {
			limit := r.room()
			st, err := r.claimNext(ctx, p, limit)
			if err != nil {
				return err
			}
			if st.picked < limit {
				break // no more due rows of this priority
			}
			if st.busy > 0 {
				continue // on past the endpoints another claimer holds
			}
			if st.parked > 0 && r.parked < maxParkedPerClaim {
				continue // on past the endpoints with no room
			}
			if st.expired == 0 || swept || r.expired >= maxExpiredPerClaim {
				break
			}
			swept = true
			if err := r.sweep(ctx, p); err != nil {
				return err
			}
		}
		if r.room() <= 0 {
			break
		}
	}
	return nil
}

// parkedExpiryEvery is how often a Store's claims look for parked
// deliveries whose deadline has come, while none are left to end: the
// look reads every parked delivery.
const parkedExpiryEvery = 30 * time.Second

// parkedOverdueAfter is how long past its deadline a parked delivery is
// before Health counts it overdue: twice as long as claims take to look
// for it, so that one waiting for the next look is not.
const parkedOverdueAfter = 2 * parkedExpiryEvery

// expireParked ends parked deliveries whose deadline has come, up to what
// is left of maxExpiredPerClaim, at most every parkedExpiryEvery (each
// claim while a look finds as many as it may end). A parked delivery is
// out of the due index, and a claim unparks an endpoint's only when the
// endpoint has room: those of an endpoint that has none for good (a
// disabled endpoint) would otherwise never end, however long past their
// deadline, and never be pruned. Those of an endpoint that has room again
// end as they are unparked, at their deadline.
func (r *claimRun) expireParked(ctx context.Context) error {
	now := r.args["now"].(int64)
	limit := maxExpiredPerClaim - r.expired
	if now < r.o.parkedDue.Load() || limit <= 0 {
		return nil
	}
	var rows []keyed
	if err := r.o.s.selectRows(ctx, r.tx, "outbox_expire_parked", map[string]any{"now": now, "limit": limit}, &rows); err != nil {
		return err
	}
	r.parkedDue = now + parkedExpiryEvery.Microseconds()
	if len(rows) == limit { // perhaps more: look again at the next claim
		r.parkedDue = now
	}
	r.expired += len(rows)
	r.ended = append(r.ended, rows...)
	return nil
}

// sweep ends the expired rows among the next due rows of priority p, up
// to what is left of maxExpiredPerClaim.
func (r *claimRun) sweep(ctx context.Context, p int) error {
	var rows []keyed
	if err := r.o.s.selectRows(ctx, r.tx, "outbox_expire_due", map[string]any{
		"now": r.args["now"], "priority": p, "limit": maxExpiredPerClaim - r.expired,
	}, &rows); err != nil {
		return err
	}
	r.expired += len(rows)
	r.ended = append(r.ended, rows...)
	return nil
}

// probes claims one delivery for each endpoint whose breaker cool-down
// ended, or whose probe's lease ran out unsettled (or was given back, or
// settled without an answer): the probe that decides whether it closes
// again. A probe is a lease like any other: it is made only when the
// endpoint has room for it (the worker's share, MaxInFlight, a token,
// which it takes), and an endpoint without room stays open, probed by a
// later claim. A probe that finds an expired row ends it and tries the
// next, up to maxProbePasses. Each move of the breaker's state is
// reported; probing again a half-open endpoint is not one.
func (r *claimRun) probes(ctx context.Context) error {
	var due []dueProbe
	if err := r.o.s.selectRows(ctx, r.tx, "endpoint_probes", map[string]any{"now": r.args["now"]}, &due); err != nil {
		return err
	}
	// In lock order (lockOrder), as a settle takes the breakers' locks,
	// and their rows under them (see settleBatch). endpoint_probe_take
	// holds each endpoint's row, and its lock, until the claim commits;
	// taken in another order, a claim and a settle sharing two endpoints
	// could wait for each other in a circle.
	slices.SortFunc(due, func(a, b dueProbe) int { return lockOrder(a.LockKey, a.Endpoint, b.LockKey, b.Endpoint) })
	for _, d := range due {
		if r.room() <= 0 {
			return nil // a later claim probes the rest
		}
		e := d.Endpoint
		// Its limits row first (PostgreSQL), as the claim statements
		// take it: its room is then reckoned after every other claimer's
		// leases and tokens.
		var lock []struct {
			Limited bool `db:"limited"`
			Busy    bool `db:"busy"`
		}
		if err := r.o.s.selectRows(ctx, r.tx, "endpoint_probe_lock", map[string]any{"endpoint": e}, &lock); err != nil {
			return err
		}
		if len(lock) == 1 && lock[0].Busy {
			continue // another claimer holds its limits: a later claim probes it
		}
		// Then its breaker's lock (endpoint_lock), as every settle's
		// change of the breaker takes it: a settle reads the breaker under
		// it and writes it back whole, and would write an open endpoint
		// over a probe taken meanwhile. Taken in lock order, as a settle
		// takes them.
		if err := r.o.s.lockBreaker(ctx, r.tx, e); err != nil {
			return err
		}
		var took []EndpointState
		if err := r.o.s.selectRows(ctx, r.tx, "endpoint_probe_take", map[string]any{
			"endpoint": e, "now": r.args["now"], "probe_until": r.args["lease_expires_at"],
			"owner": r.args["owner"], "cap": r.args["cap"],
		}, &took); err != nil {
			return err
		}
		if len(took) == 0 {
			continue // another claim's probe
		}
		if took[0] != EndpointHalfOpen { // no room for a probe: open, probed by a later claim
			r.reopened(e, d.State, d.Lapsed)
			continue
		}
		leased := 0
		for pass := 0; pass < maxProbePasses && leased == 0; pass++ {
			ok, ended, err := r.probe(ctx, e)
			if err != nil {
				return err
			}
			if ok {
				leased = 1
			} else if !ended {
				break // nothing due
			}
		}
		if leased == 0 { // nothing due: probe later
			if _, err := r.o.s.exec(ctx, r.tx, "endpoint_probe_idle", map[string]any{"endpoint": e, "now": r.args["now"]}); err != nil {
				return err
			}
			r.reopened(e, d.State, d.Lapsed)
			continue
		}
		if len(lock) == 1 && lock[0].Limited {
			r.limited[e]++ // its token is taken with the claim's (take)
		}
		if d.State != EndpointHalfOpen { // a probe again after one whose lease ran out: still half open
			r.o.s.emit(r.tx, e, d.State, EndpointHalfOpen, "")
		}
	}
	return nil
}

// dueProbe is an endpoint endpoint_probes found due for a probe.
type dueProbe struct {
	Endpoint string        `db:"endpoint"`
	State    EndpointState `db:"state"`
	Lapsed   bool          `db:"lapsed"`   // a half-open endpoint's probe's lease ran out unsettled
	LockKey  int64         `db:"lock_key"` // its breaker's lock's (lockOrder)
}

// reopened reports a half-open endpoint that a claim left open, without a
// probe: with code lease_expired when its last probe's lease ran out
// unsettled, without one when that probe was given back or settled without
// an answer (nothing ran out, and nothing was learnt of the endpoint).
func (r *claimRun) reopened(endpoint string, was EndpointState, lapsed bool) {
	if was != EndpointHalfOpen {
		return
	}
	var code courier.Code
	if lapsed {
		code = courier.CodeLeaseExpired
	}
	r.o.s.emit(r.tx, endpoint, EndpointHalfOpen, EndpointOpen, code)
}

// probe claims the next due delivery of endpoint e to be its probe and
// admits it at once: a probe that cannot be sent (expired, suppressed,
// quarantined) is no probe, and the caller tries the next. It reports
// whether it leased a probe, and whether it ended a delivery instead.
func (r *claimRun) probe(ctx context.Context, e string) (leased, ended bool, err error) {
	// The claims park an open endpoint's deliveries: one comes back to be
	// the probe.
	if _, err := r.o.s.exec(ctx, r.tx, "outbox_unpark", map[string]any{"endpoint": e, "limit": 1}); err != nil {
		return false, false, err
	}
	before := len(r.got)
	n, expired, _, err := r.run(ctx, "outbox_claim_probe", map[string]any{"endpoint": e})
	if err != nil || n == 0 {
		return false, expired > 0, err
	}
	c, leased, err := r.admitAt(ctx, before, r.args["now"].(int64))
	r.got = r.got[:before]
	switch {
	case err != nil:
		return false, false, err
	case !leased:
		return false, true, nil
	}
	r.admitted = append(r.admitted, c)
	return true, false, nil
}

// admitGot admits what the claim statements leased (got), each as it is
// opened, and returns the deliveries that may be sent: the probes,
// admitted as they were leased, then those of got that admit leaves
// leased. The others it withholds.
func (r *claimRun) admitGot(ctx context.Context, now int64) ([]protocol.Claimed, error) {
	out := slices.Clone(r.admitted)
	for i := range r.got {
		c, leased, err := r.admitAt(ctx, i, now)
		if err != nil {
			return nil, err
		}
		if leased {
			out = append(out, c)
		}
	}
	return out, nil
}

// admitAt admits got[i] (see Outbox.admit) and reports whether it stays
// leased, to be sent; one admit ends instead it withholds. The stored
// bytes leave the batch as it is opened: a sealed batch is held once, not
// sealed and opened.
func (r *claimRun) admitAt(ctx context.Context, i int, now int64) (protocol.Claimed, bool, error) {
	c := r.got[i]
	r.got[i] = claimed{}
	status, err := r.o.admit(ctx, r.tx, now, &c)
	switch {
	case err != nil:
		return protocol.Claimed{}, false, err
	case status != courier.StatusLeased:
		r.withhold(c, status)
		return protocol.Claimed{}, false, nil
	}
	return c.Claimed, true, nil
}

// withhold notes c, which admit ended with status rather than lease: its
// ordering key moves on, and the claim reports it (ClaimParams.Ended).
func (r *claimRun) withhold(c claimed, status courier.Status) {
	r.ended = append(r.ended, c.keyed(status))
	r.withheld = append(r.withheld, protocol.Ended{DeliveryID: c.DeliveryID, Endpoint: c.Endpoint, Status: status, Code: c.endedWith})
}

// admit decides whether a claimed delivery may be sent: its payload must
// open and match its digest (or it is quarantined), and its subscription
// must still have the fingerprint it had at enqueue, not be paused, and
// have an event filter that still matches the delivery's event type (or
// it is suppressed, subscription_changed). It opens c's payload in place and
// returns c's status: leased when it may be sent. The caller moves the
// ordering key of one it ended on.
func (o *Outbox) admit(ctx context.Context, tx *sqlx.Tx, now int64, c *claimed) (courier.Status, error) {
	plain, err := o.s.cfg.Encryption.open(c.Payload, c.payloadKeyID, c.NotificationID, c.Endpoint, c.KeyID)
	if err != nil {
		return o.end(ctx, tx, now, c, courier.CodePayloadUnreadable, AttemptQuarantined)
	}
	c.Payload = plain
	if ok, _ := o.s.cfg.Encryption.matches(plain, c.PayloadSHA256, c.payloadKeyID, c.NotificationID, c.Endpoint); !ok {
		return o.end(ctx, tx, now, c, courier.CodeIntegrity, AttemptQuarantined)
	}
	if c.payloadKeyID != "" { // a sealed row stores a keyed digest; the worker gets the payload's own
		sum := sha256.Sum256(plain)
		c.PayloadSHA256 = hex.EncodeToString(sum[:])
	} else { // the payload's own, just matched: in the form enqueue writes it
		c.PayloadSHA256 = strings.ToLower(c.PayloadSHA256)
	}
	if c.SubscriptionID == 0 {
		return courier.StatusLeased, nil
	}
	state, err := getRow[subscriptionState](ctx, o.s, tx, "subscription_state", map[string]any{"id": c.SubscriptionID})
	switch {
	case err != nil && courier.CodeOf(err) != courier.CodeNotFound:
		return "", err
	case err != nil || !state.Active || state.Fingerprint != c.fingerprint || !state.wants(c.eventType):
		return o.end(ctx, tx, now, c, courier.CodeSubscriptionChanged, AttemptSuppressed)
	}
	return courier.StatusLeased, nil
}

// end takes a claimed delivery out of circulation without an attempt,
// quarantined or suppressed as outcome says, logs why in the attempts log
// (and on c, for ClaimParams.Ended), reports it to the Hook once the claim
// commits, and returns its new status.
func (o *Outbox) end(ctx context.Context, tx *sqlx.Tx, now int64, c *claimed, code courier.Code, outcome AttemptOutcome) (courier.Status, error) {
	c.endedWith = code
	name, status := "outbox_quarantine", courier.StatusQuarantined
	if outcome == AttemptSuppressed {
		name, status = "outbox_suppress", courier.StatusSuppressed
	}
	l := c.Lease
	if _, err := o.s.exec(ctx, tx, name, map[string]any{"id": l.DeliveryID, "token": l.Token, "code": string(code), "now": now}); err != nil {
		return "", err
	}
	o.s.observeIn(tx, Event{Kind: EventSettled, N: 1, Status: status, Code: code})
	return status, o.logAttempts(ctx, tx, now, newAttemptArg(protocol.Outcome{Lease: l, Code: code}, outcome))
}

// subscriptionState is what sending a published delivery depends on.
type subscriptionState struct {
	Fingerprint string `db:"fingerprint"`
	Active      bool   `db:"active"`
	EventTypes  string `db:"event_types"` // space-separated
}

// wants reports whether the subscription's filter still matches a
// delivery's event type. A delivery published before the outbox recorded
// event types (migration 5) has none, and is not checked.
func (st subscriptionState) wants(eventType string) bool {
	return eventType == "" || matchesType(strings.Fields(st.EventTypes), eventType)
}

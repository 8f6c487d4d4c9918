package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
)

// claimed is a claimed row before its payload is opened: what the claim
// statements return.
type claimed struct {
	protocol.Claimed
	payloadKeyID string // the key that sealed Payload
	fingerprint  string // the subscription's fingerprint at enqueue
	eventType    string // the published event's type; "" if none recorded
}

func claimedOf(r outboxRow) claimed {
	return claimed{
		Claimed: protocol.Claimed{
			Lease: protocol.Lease{
				DeliveryID: r.ID, Token: r.LeaseToken.String, Owner: r.LeaseOwner.String, Attempt: r.Attempts,
				LeasedAt: nullMicros(r.LeasedAt), ExpiresAt: nullMicros(r.LeaseExpiresAt), Sealed: r.PayloadKeyID,
			},
			NotificationID: r.NotificationID, Endpoint: r.Endpoint, Payload: r.Payload, PayloadSHA256: r.PayloadSHA256,
			Profile: r.Profile, KeyID: r.KeyID, Priority: r.Priority, MaxAttempts: r.MaxAttempts,
			Deadline: fromMicros(r.Deadline), CreatedAt: fromMicros(r.CreatedAt), SubscriptionID: r.SubscriptionID.Int64,
			Trace: courier.TraceContext{Parent: r.TraceParent.String, State: r.TraceState.String},
		},
		payloadKeyID: r.PayloadKeyID,
		fingerprint:  r.SubscriptionFingerprint.String,
		eventType:    r.EventType.String,
	}
}

// Bounds on what one claim ends as expired beyond its batch (see
// claimRun): after a long outage the backlog of expired rows is ended a
// bounded slice at a time, claim by claim.
const (
	maxExpiredPerClaim = protocol.MaxClaimBatch // rows, by the sweep of each priority
	maxProbePasses     = 8                      // statements per probed endpoint
)

// claim implements protocol.Outbox.Claim.
func (o *Outbox) claim(ctx context.Context, p protocol.ClaimParams) ([]protocol.Claimed, error) {
	switch {
	case p.Owner == "" || len(p.Owner) > 256:
		return nil, invalidArgument("ClaimParams.Owner must be 1-256 bytes")
	case p.Limit < 1 || p.Limit > protocol.MaxClaimBatch:
		return nil, invalidArgument("ClaimParams.Limit must be within 1..1000")
	case p.Lease < time.Millisecond:
		return nil, invalidArgument("ClaimParams.Lease must be at least 1ms")
	}
	var out []protocol.Claimed
	var expired int
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := o.s.now()
		if err := o.s.schema.check(ctx, tx, o.s.dialect, now); err != nil {
			return err // an altered schema: nothing is leased
		}
		if err := o.reclaim(ctx, tx, now); err != nil {
			return err
		}
		run := &claimRun{o: o, tx: tx, limit: p.Limit, args: map[string]any{
			"owner": p.Owner, "now": now, "lease_expires_at": now + p.Lease.Microseconds(),
		}}
		if err := run.probes(ctx); err != nil {
			return err
		}
		if err := run.byPriority(ctx); err != nil {
			return err
		}
		out, expired = out[:0], run.expired
		for _, c := range run.got {
			switch ok, err := o.admit(ctx, tx, now, &c); {
			case err != nil:
				return err
			case ok:
				out = append(out, c.Claimed)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if expired > 0 {
		o.s.observe(Event{Kind: EventSettled, N: expired, Status: courier.StatusFailed, Code: courier.CodeExpired})
	}
	if len(out) > 0 {
		o.s.observe(Event{Kind: EventClaimed, N: len(out), Status: courier.StatusLeased})
	}
	return out, nil
}

// reclaim ends the leases that expired: their attempt is logged, and the
// row waits for a retry (or fails, its budget or horizon spent).
func (o *Outbox) reclaim(ctx context.Context, tx *sqlx.Tx, now int64) error {
	args := map[string]any{"now": now}
	res, err := o.s.exec(ctx, tx, "attempts_log_expired_leases", args)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	_, err = o.s.exec(ctx, tx, "outbox_reclaim_expired_leases", args)
	return err
}

// claimRun is one claim's transaction: the deliveries it leased so far,
// and how many it ended instead because their deadline had come. An
// expired row takes a place in a claim statement's batch without being
// leased; when a statement ended some, the run sweeps on through the due
// rows of that priority (outbox_expire_due, bounded by
// maxExpiredPerClaim) and claims again for the room left. Each statement
// reads only due rows, in claim order, from the due index: the expired
// rows a claim reads are rows it would have read anyway, and each leaves
// the index as it is ended.
type claimRun struct {
	o       *Outbox
	tx      *sqlx.Tx
	limit   int
	args    map[string]any // owner, now, lease_expires_at
	got     []claimed
	expired int
}

func (r *claimRun) room() int { return r.limit - len(r.got) }

// run runs a claim statement with the run's arguments and extra, keeping
// what it leased; it returns how many rows it leased and ended.
func (r *claimRun) run(ctx context.Context, name string, extra map[string]any) (leased, expired int, err error) {
	args := maps.Clone(r.args)
	maps.Copy(args, extra)
	var rows []outboxRow
	if err := r.o.s.selectRows(ctx, r.tx, name, args, &rows); err != nil {
		return 0, 0, err
	}
	for _, row := range rows {
		if row.Status != courier.StatusLeased { // ended: its deadline had come
			expired++
			continue
		}
		r.got = append(r.got, claimedOf(row))
		leased++
	}
	r.expired += expired
	return leased, expired, nil
}

// byPriority claims due deliveries into the room left, priority by
// priority, lowest first: each claim statement then reads the due index
// as a range.
func (r *claimRun) byPriority(ctx context.Context) error {
	if r.room() <= 0 {
		return nil
	}
	var priorities []int
	if err := r.o.s.selectRows(ctx, r.tx, "outbox_due_priorities", nil, &priorities); err != nil {
		return err
	}
	for _, p := range priorities {
		swept := false
		for r.room() > 0 {
			_, expired, err := r.run(ctx, "outbox_claim", map[string]any{"priority": p, "limit": r.room()})
			if err != nil {
				return err
			}
			if expired == 0 || swept || r.expired >= maxExpiredPerClaim {
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

// sweep ends the expired rows among the next due rows of priority p, up
// to what is left of maxExpiredPerClaim.
func (r *claimRun) sweep(ctx context.Context, p int) error {
	res, err := r.o.s.exec(ctx, r.tx, "outbox_expire_due", map[string]any{
		"now": r.args["now"], "priority": p, "limit": maxExpiredPerClaim - r.expired,
	})
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	r.expired += int(n)
	return wrapf(err, "expire")
}

// probes claims one delivery for each endpoint whose breaker cool-down
// ended: the probe that decides whether it closes again. A probe that
// finds an expired row ends it and tries the next, up to maxProbePasses.
func (r *claimRun) probes(ctx context.Context) error {
	var endpoints []string
	if err := r.o.s.selectRows(ctx, r.tx, "endpoint_probes", map[string]any{"now": r.args["now"], "probe_until": r.args["lease_expires_at"]}, &endpoints); err != nil {
		return err
	}
	for _, e := range endpoints {
		leased := 0
		for pass := 0; pass < maxProbePasses && leased == 0 && r.room() > 0; pass++ {
			n, expired, err := r.run(ctx, "outbox_claim_probe", map[string]any{"endpoint": e})
			if err != nil {
				return err
			}
			if leased = n; expired == 0 {
				break // nothing due
			}
		}
		if leased == 0 { // nothing due, or no room: probe later
			if _, err := r.o.s.exec(ctx, r.tx, "endpoint_probe_idle", map[string]any{"endpoint": e, "now": r.args["now"]}); err != nil {
				return err
			}
			continue
		}
		r.o.s.emit(EndpointEvent{Endpoint: e, From: EndpointOpen, To: EndpointHalfOpen})
	}
	return nil
}

// admit decides whether a claimed delivery may be sent: its payload must
// open and match its digest (or it is quarantined), and its subscription
// must still be active, with the fingerprint it had at enqueue and an
// event filter that still matches the delivery's event type (or it is
// suppressed, subscription_changed). It opens c's payload in place.
func (o *Outbox) admit(ctx context.Context, tx *sqlx.Tx, now int64, c *claimed) (bool, error) {
	plain, err := o.s.cfg.Encryption.open(c.Payload, c.payloadKeyID, c.NotificationID, c.Endpoint)
	if err != nil {
		return false, o.end(ctx, tx, now, "outbox_quarantine", c.Lease, courier.CodePayloadUnreadable, AttemptQuarantined)
	}
	c.Payload = plain
	if ok, _ := o.s.cfg.Encryption.matches(plain, c.PayloadSHA256, c.payloadKeyID, c.NotificationID, c.Endpoint); !ok {
		return false, o.end(ctx, tx, now, "outbox_quarantine", c.Lease, courier.CodeIntegrity, AttemptQuarantined)
	}
	sum := sha256.Sum256(plain) // a sealed row stores a keyed digest; the worker gets the payload's own
	c.PayloadSHA256 = hex.EncodeToString(sum[:])
	if c.SubscriptionID == 0 {
		return true, nil
	}
	state, err := getRow[subscriptionState](ctx, o.s, tx, "subscription_state", map[string]any{"id": c.SubscriptionID})
	switch {
	case err != nil && courier.CodeOf(err) != courier.CodeNotFound:
		return false, err
	case err != nil || !state.Active || state.Fingerprint != c.fingerprint || !state.wants(c.eventType):
		return false, o.end(ctx, tx, now, "outbox_suppress", c.Lease, courier.CodeSubscriptionChanged, AttemptSuppressed)
	}
	return true, nil
}

// end takes a claimed delivery out of circulation without an attempt
// (quarantined, suppressed) with the statement name, and logs why.
func (o *Outbox) end(ctx context.Context, tx *sqlx.Tx, now int64, name string, l protocol.Lease, code courier.Code, outcome AttemptOutcome) error {
	if _, err := o.s.exec(ctx, tx, name, map[string]any{"id": l.DeliveryID, "token": l.Token, "code": string(code), "now": now}); err != nil {
		return err
	}
	return o.logAttempts(ctx, tx, now, newAttemptArg(protocol.Outcome{Lease: l, Code: code}, outcome))
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

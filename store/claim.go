package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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
}

func claimedOf(r outboxRow) claimed {
	return claimed{
		Claimed: protocol.Claimed{
			Lease: protocol.Lease{
				DeliveryID: r.ID, Token: r.LeaseToken.String, Owner: r.LeaseOwner.String, Attempt: r.Attempts,
				LeasedAt: nullMicros(r.LeasedAt), ExpiresAt: nullMicros(r.LeaseExpiresAt),
			},
			NotificationID: r.NotificationID, Endpoint: r.Endpoint, Payload: r.Payload, PayloadSHA256: r.PayloadSHA256,
			Profile: r.Profile, KeyID: r.KeyID, Priority: r.Priority, MaxAttempts: r.MaxAttempts,
			Deadline: fromMicros(r.Deadline), CreatedAt: fromMicros(r.CreatedAt), SubscriptionID: r.SubscriptionID.Int64,
		},
		payloadKeyID: r.PayloadKeyID,
		fingerprint:  r.SubscriptionFingerprint.String,
	}
}

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
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := o.s.now()
		if err := o.reclaim(ctx, tx, now); err != nil {
			return err
		}
		args := map[string]any{"owner": p.Owner, "now": now, "lease_expires_at": now + p.Lease.Microseconds(), "limit": p.Limit}
		var batch []claimed
		var err error
		if batch, err = o.claimProbes(ctx, tx, args, p.Limit, batch); err != nil {
			return err
		}
		if batch, err = o.claimByPriority(ctx, tx, args, p.Limit, batch); err != nil {
			return err
		}
		out = out[:0]
		for _, c := range batch {
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

// claimRows runs a claim statement and appends what it leased to dst.
func (o *Outbox) claimRows(ctx context.Context, tx *sqlx.Tx, name string, args map[string]any, dst []claimed) ([]claimed, error) {
	var rows []outboxRow
	if err := o.s.selectRows(ctx, tx, name, args, &rows); err != nil {
		return nil, err
	}
	for _, r := range rows {
		dst = append(dst, claimedOf(r))
	}
	return dst, nil
}

// claimByPriority claims up to limit due deliveries (counting those in
// dst), priority by priority, lowest first: each claim statement then
// reads the due index as a range.
func (o *Outbox) claimByPriority(ctx context.Context, tx *sqlx.Tx, args map[string]any, limit int, dst []claimed) ([]claimed, error) {
	if len(dst) >= limit {
		return dst, nil
	}
	var priorities []int
	if err := o.s.selectRows(ctx, tx, "outbox_due_priorities", nil, &priorities); err != nil {
		return nil, err
	}
	for _, p := range priorities {
		if len(dst) >= limit {
			break
		}
		args["priority"], args["limit"] = p, limit-len(dst)
		var err error
		if dst, err = o.claimRows(ctx, tx, "outbox_claim", args, dst); err != nil {
			return nil, err
		}
	}
	return dst, nil
}

// claimProbes claims one delivery for each endpoint whose breaker
// cool-down ended: the probe that decides whether it closes again.
func (o *Outbox) claimProbes(ctx context.Context, tx *sqlx.Tx, args map[string]any, limit int, dst []claimed) ([]claimed, error) {
	var endpoints []string
	if err := o.s.selectRows(ctx, tx, "endpoint_probes", map[string]any{"now": args["now"], "probe_until": args["lease_expires_at"]}, &endpoints); err != nil {
		return nil, err
	}
	for _, e := range endpoints {
		before := len(dst)
		if len(dst) < limit {
			probe := map[string]any{"owner": args["owner"], "now": args["now"], "lease_expires_at": args["lease_expires_at"], "endpoint": e}
			var err error
			if dst, err = o.claimRows(ctx, tx, "outbox_claim_probe", probe, dst); err != nil {
				return nil, err
			}
		}
		if len(dst) == before { // nothing due, or no room: probe later
			if _, err := o.s.exec(ctx, tx, "endpoint_probe_idle", map[string]any{"endpoint": e, "now": args["now"]}); err != nil {
				return nil, err
			}
			continue
		}
		o.s.emit(EndpointEvent{Endpoint: e, From: EndpointOpen, To: EndpointHalfOpen})
	}
	return dst, nil
}

// admit decides whether a claimed delivery may be sent: its payload must
// open and match its digest (or it is quarantined), and its subscription
// must be as it was at enqueue (or it is suppressed). It opens c's
// payload in place.
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
	case err != nil || !state.Active || state.Fingerprint != c.fingerprint:
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
}

package store

import (
	"context"
	"time"

	"github.com/courier-go/courier"
)

// Health is the outbox at a glance, for probes and operators.
type Health struct {
	// Status is "ok", or "blocked" when something needs an operator; Code
	// then says what.
	Status string
	Code   courier.Code
	// Counts holds every status, zero or not.
	Counts        map[courier.Status]int
	Due           int           // pending or retrying rows due now
	ExpiredLeases int           // leases past expiry, not yet reclaimed
	Failed        int           // failed deliveries
	OldestDueAge  time.Duration // how long the oldest due row has waited
	// ContractMismatches counts unfinished deliveries enqueued under another
	// capabilities digest than their endpoint's pin; their endpoints are
	// held back (see Contracts).
	ContractMismatches int
}

// Health states.
const (
	HealthOK      = "ok"
	HealthBlocked = "blocked"
)

// Health reads the outbox's health. Blocked, by precedence: quarantined
// rows (integrity_mismatch), expired leases (leases_expired), endpoints
// held back by a changed contract (contract_changed), failed deliveries
// (deliveries_failed).
func (o *Outbox) Health(ctx context.Context) (Health, error) {
	now := o.s.now()
	h := Health{Status: HealthOK, Counts: make(map[courier.Status]int, len(courier.Statuses))}
	for _, st := range courier.Statuses {
		h.Counts[st] = 0
	}
	rows, err := o.s.query(ctx, o.s.db, "health_counts", nil)
	if err != nil {
		return Health{}, err
	}
	for rows.Next() {
		var st courier.Status
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return Health{}, o.s.dialect.interpret("health_counts", err)
		}
		h.Counts[st] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Health{}, o.s.dialect.interpret("health_counts", err)
	}
	args := map[string]any{"now": now}
	var oldest int64
	q := o.s.q("health_due")
	if err := o.s.db.QueryRowContext(ctx, q.text, q.args(args)...).Scan(&h.Due, &oldest); err != nil {
		return Health{}, o.s.dialect.interpret("health_due", err)
	}
	if h.Due > 0 {
		h.OldestDueAge = time.Duration(now-oldest) * time.Microsecond
	}
	q = o.s.q("health_expired")
	if err := o.s.db.QueryRowContext(ctx, q.text, q.args(args)...).Scan(&h.ExpiredLeases); err != nil {
		return Health{}, o.s.dialect.interpret("health_expired", err)
	}
	if h.ContractMismatches, err = o.s.Contracts().mismatched(ctx, o.s.db); err != nil {
		return Health{}, err
	}
	h.Failed = h.Counts[courier.StatusFailed]
	switch {
	case h.Counts[courier.StatusQuarantined] > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeIntegrity
	case h.ExpiredLeases > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeLeasesExpired
	case h.ContractMismatches > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeContractChanged
	case h.Failed > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeFailedPresent
	}
	return h, nil
}

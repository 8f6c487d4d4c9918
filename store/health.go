package store

import (
	"context"
	"time"

	"github.com/courier-go/courier"
)

// Health is the outbox at a glance, for probes and operators.
type Health struct {
	// Status is HealthOK, or HealthBlocked when something needs an
	// operator; Code then says what.
	Status HealthStatus
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
	// Checked and Invalid are Check's: how many deliveries it validated,
	// and the ids of those it found invalid.
	Checked int
	Invalid []int64
}

// HealthStatus is the outbox's state at a glance.
type HealthStatus string

// Health statuses.
const (
	HealthOK      HealthStatus = "ok"
	HealthBlocked HealthStatus = "blocked"
)

// Health reads the outbox's health. Blocked, by precedence: quarantined
// rows (integrity_mismatch), expired leases (leases_expired), endpoints
// held back by a changed contract (contract_changed), failed deliveries
// (deliveries_failed).
func (o *Outbox) Health(ctx context.Context) (Health, error) {
	now := o.s.now()
	h := Health{Status: HealthOK, Counts: make(map[courier.Status]int)}
	for _, st := range courier.Statuses() {
		h.Counts[st] = 0
	}
	var counts []struct {
		Status courier.Status `db:"status"`
		N      int            `db:"n"`
	}
	if err := o.s.selectRows(ctx, o.s.db, "outbox_health_counts", nil, &counts); err != nil {
		return Health{}, err
	}
	for _, c := range counts {
		h.Counts[c.Status] = c.N
	}
	args := map[string]any{"now": now}
	var oldest int64
	if err := o.s.scan(ctx, o.s.db, "outbox_health_due", args, &h.Due, &oldest); err != nil {
		return Health{}, err
	}
	if h.Due > 0 {
		h.OldestDueAge = time.Duration(now-oldest) * time.Microsecond
	}
	if err := o.s.scan(ctx, o.s.db, "outbox_health_expired", args, &h.ExpiredLeases); err != nil {
		return Health{}, err
	}
	var err error
	if h.ContractMismatches, err = o.s.Contracts.mismatched(ctx, o.s.db); err != nil {
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

package store

import (
	"context"
	"database/sql"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

// Health is the outbox at a glance, for probes and operators.
type Health struct {
	// Status is HealthOK, or HealthBlocked when something needs an
	// operator; Code then says what.
	Status HealthStatus
	Code   courier.Code
	// Counts holds every status, zero or not.
	Counts map[courier.Status]int
	// Due counts the pending or retrying rows due now that are waiting to
	// be sent, and OldestDueAge is how long the oldest of them has waited:
	// the backlog, for lag alerts. It counts the rows parked while their
	// endpoint has no room (at its limits, or at a worker's share of it,
	// client.Config.EndpointConcurrency). Neither counts the rows held back
	// for another reason: behind their ordering key (Delivery.Held), or of
	// an endpoint that is disabled, open while its cool-down runs or half
	// open while its probe is in flight (Endpoints.List says which), from
	// the moment it is, whether a claim has parked them yet or not. Past
	// its cool-down an open endpoint's are counted: the next claims probe
	// it.
	Due           int
	ExpiredLeases int // leases past expiry, not yet reclaimed
	Failed        int // failed deliveries
	OldestDueAge  time.Duration
	// Overdue counts the pending or retrying rows waiting past their
	// deadline, which the first claim to reach them ends (failed, code
	// expired): due ones, and those parked behind their endpoint, whatever
	// its state, once a minute past it (claims look for those every 30
	// seconds: parked past its deadline a little while, a delivery is not
	// yet one no claim reached). Not counted: those waiting for their
	// ordering key, ended only once they head it.
	Overdue int
	// ContractMismatches counts unfinished deliveries enqueued under another
	// capabilities digest than their endpoint's pin; their endpoints are
	// held back (see Contracts; Contracts.List says which).
	ContractMismatches int
	// Operations counts command deliveries (EnqueueCommand) by operation
	// (OperationChange, OperationCancellation, OperationTombstone of
	// package ack), each by status, zero or not.
	Operations map[string]map[courier.Status]int
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

// Health reads the outbox's health from counts (see Check for a deep
// look). Every figure is read from one snapshot of the outbox, in a
// read-only transaction of its own on DB() (on PostgreSQL at REPEATABLE
// READ), so they agree however busy the workers are: Due and Overdue
// never exceed the pending and retrying rows counted, ExpiredLeases the
// leased ones, nor Operations its statuses' counts. The snapshot takes no
// lock: on SQLite it neither takes nor waits for the writer, and it keeps
// the -wal file from being checkpointed past it only while Health reads.
// Counts and Operations count every row the outbox keeps, finished
// ones too, and so read them all: keep it pruned (Prune), as a million
// rows cost Health tens of milliseconds on SQLite and a few hundred on
// PostgreSQL. The other figures read the backlog at most, never a
// finished row: Due, OldestDueAge and Overdue the due and parked rows
// (not those waiting for a later time), ExpiredLeases the expired leases,
// ContractMismatches the unfinished commands (with a pinned digest),
// payload_unreadable the quarantined rows, only while some row is
// quarantined, and endpoint_disabled every waiting row, only while an
// endpoint is disabled. Blocked, with the code of the first that holds:
//
//	database_corrupt    the database file is no longer the one the Store opened (removed
//	                    or replaced under it), or, on SQLite, its -wal file, as Check says:
//	                    what commits goes to no file on disk; close the Store and open it
//	                    again. Health looks at the files only (a stat or two), never
//	                    through the writer; the counts are what the database still answers
//	integrity_mismatch  rows are quarantined, some as altered: their stored data no longer
//	                    matches its digest (the delivery's code, integrity_mismatch); Redrive
//	                    leaves them, Cancel dismisses them
//	payload_unreadable  rows are quarantined, each because its payload cannot be opened (the
//	                    delivery's code, payload_unreadable): a payload key is missing or
//	                    holds other bytes under its id (Config.Encryption), or the sealed
//	                    bytes were altered; fix the keys, then Redrive them (a row that
//	                    still does not open is quarantined again)
//	leases_expired      leases ran out unsettled: workers stopped
//	contract_changed    endpoints are held back by a changed contract
//	endpoint_disabled   deliveries wait for an endpoint that is disabled (by an
//	                    operator, 410 Gone or DisableAfter): Endpoints.Enable it
//	deliveries_overdue  deliveries wait past their deadline, never to be sent:
//	                    no claim reached them, as workers stopped or are far behind
//	                    (one parked behind its endpoint, a minute past its deadline)
//	deliveries_failed   failed deliveries wait for an operator
//
// The source-delivery reference puts failed first, then expired leases,
// then a changed contract. courier puts what stops deliveries now before
// what already happened: a failed delivery stays failed, and counted,
// until an operator redrives it, so with failed first the code would say
// deliveries_failed for as long as any old failure is kept and hide a
// worker outage or a stalled endpoint that began later. The code is for
// alerts; the counts say everything that holds.
//
// A receiver that is down blocks nothing while its deliveries have
// attempts and time left, as no operator is needed: its breaker opens, its
// backlog is parked (counted in Counts, not in Due or OldestDueAge) and
// goes out, with no one's help, once a probe gets through. Its breaker
// says so: Endpoints.List (or the courier endpoints list command),
// Config.Hook's EventEndpoint as it opens, closes or disables, and the
// Logger of the worker whose attempt moved it (client.Config.Logger: Warn
// as it opens or disables, Info as it closes). Watch those for a
// receiver down too long, OldestDueAge for workers falling behind, and
// Status for what needs an operator: a delivery that runs out of attempts
// (Config.MaxAttempts) or reaches its deadline while its receiver is down
// ends failed, and blocks as deliveries_failed until an operator settles it.
//
// A readiness or liveness probe asks less than Health: Health counts the
// outbox, and blocked is an operator's work, not the state of the process
// that answers (a probe failing on it would take every instance out of rotation
// for one failed delivery). Ask DB().PingContext whether the database
// answers, and, in a process that runs a client.Worker, whether its Run
// has returned (it returns only once stopped or on a closed Store).
// Of Health's codes, database_corrupt alone is the process's own (the
// file removed or replaced under the Store; Check's damage is not): close
// the Store and open it again.
func (o *Outbox) Health(ctx context.Context) (Health, error) {
	if o.s.closed.Load() {
		return Health{}, errClosed
	}
	if o.s.filesGone() {
		h, _ := o.health(ctx) // what the lost database still answers, if anything
		h.Status, h.Code = HealthBlocked, courier.CodeDatabaseCorrupt
		return h, nil
	}
	return o.health(ctx)
}

// health reads Health's figures from counts.
func (o *Outbox) health(ctx context.Context) (Health, error) {
	// One snapshot: figures read each at its own moment, with claims and
	// enqueues committing in between, would disagree (more due than
	// pending). SQLite's read-only transaction (see package sqlite) is a
	// deferred BEGIN, one snapshot from its first read, whatever the
	// level; PostgreSQL's REPEATABLE READ is one from its first statement,
	// whatever the database's default isolation.
	tx, err := o.s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return Health{}, o.s.dialect.interpret("outbox_health", err)
	}
	defer tx.Rollback()
	now := o.s.now()
	h := Health{Status: HealthOK, Counts: statusCounts(), Operations: make(map[string]map[courier.Status]int)}
	for _, op := range []string{ack.OperationChange, ack.OperationCancellation, ack.OperationTombstone} {
		h.Operations[op] = statusCounts()
	}
	var counts []struct {
		Status courier.Status `db:"status"`
		N      int            `db:"n"`
	}
	if err := o.s.selectRows(ctx, tx, "outbox_health_counts", nil, &counts); err != nil {
		return Health{}, err
	}
	for _, c := range counts {
		h.Counts[c.Status] = c.N
	}
	var ops []struct {
		Operation string         `db:"operation"`
		Status    courier.Status `db:"status"`
		N         int            `db:"n"`
	}
	if err := o.s.selectRows(ctx, tx, "outbox_health_operations", nil, &ops); err != nil {
		return Health{}, err
	}
	for _, c := range ops {
		if byStatus, ok := h.Operations[c.Operation]; ok {
			byStatus[c.Status] = c.N
		}
	}
	args := map[string]any{"now": now, "parked_late": now - parkedOverdueAfter.Microseconds()}
	var oldest int64
	if err := o.s.scan(ctx, tx, "outbox_health_due", args, &h.Due, &oldest, &h.Overdue); err != nil {
		return Health{}, err
	}
	if h.Due > 0 {
		h.OldestDueAge = time.Duration(now-oldest) * time.Microsecond
	}
	if err := o.s.scan(ctx, tx, "outbox_health_expired", args, &h.ExpiredLeases); err != nil {
		return Health{}, err
	}
	if h.ContractMismatches, err = o.s.Contracts.mismatched(ctx, tx); err != nil {
		return Health{}, err
	}
	var disabled int // disabled endpoints with deliveries waiting for them
	if err := o.s.scan(ctx, tx, "endpoint_disabled_waiting", nil, &disabled); err != nil {
		return Health{}, err
	}
	var unreadable int // quarantined rows whose payload could not be opened
	if h.Counts[courier.StatusQuarantined] > 0 {
		if err := o.s.scan(ctx, tx, "outbox_health_unreadable", nil, &unreadable); err != nil {
			return Health{}, err
		}
	}
	h.Failed = h.Counts[courier.StatusFailed]
	switch {
	case h.Counts[courier.StatusQuarantined] > unreadable:
		h.Status, h.Code = HealthBlocked, courier.CodeIntegrity
	case unreadable > 0:
		h.Status, h.Code = HealthBlocked, courier.CodePayloadUnreadable
	case h.ExpiredLeases > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeLeasesExpired
	case h.ContractMismatches > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeContractChanged
	case disabled > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeEndpointDisabled
	case h.Overdue > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeDeliveriesOverdue
	case h.Failed > 0:
		h.Status, h.Code = HealthBlocked, courier.CodeFailedPresent
	}
	return h, nil
}

// statusCounts returns a count for every status, each zero.
func statusCounts() map[courier.Status]int {
	m := make(map[courier.Status]int, len(courier.Statuses()))
	for _, st := range courier.Statuses() {
		m[st] = 0
	}
	return m
}

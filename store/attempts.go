package store

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
)

// AttemptOutcome is how one attempt ended, as the attempts log records it.
type AttemptOutcome string

// Attempt outcomes.
const (
	AttemptSucceeded    AttemptOutcome = "succeeded"     // the receiver proved receipt
	AttemptRetry        AttemptOutcome = "retry"         // it failed and will be tried again
	AttemptFailed       AttemptOutcome = "failed"        // it failed for good
	AttemptSuppressed   AttemptOutcome = "suppressed"    // not sent: its subscription changed
	AttemptQuarantined  AttemptOutcome = "quarantined"   // not sent: its stored payload is unusable
	AttemptLeaseExpired AttemptOutcome = "lease_expired" // its worker stopped before settling it
)

// Attempt is one row of the attempts log. It holds no payload, header or
// secret content.
type Attempt struct {
	ID             int64
	DeliveryID     int64
	Attempt        int
	Owner          string
	LeasedAt       time.Time
	LeaseExpiresAt time.Time
	FinishedAt     time.Time
	Duration       time.Duration
	Outcome        AttemptOutcome
	HTTPStatus     int
	ErrorCode      courier.Code
	// RemoteCode is the receiver's own code from its problem+json refusal,
	// "" when it sent none (see Delivery.LastRemoteCode).
	RemoteCode courier.Code
}

// Attempts returns a delivery's attempts, oldest first.
func (o *Outbox) Attempts(ctx context.Context, deliveryID int64) ([]Attempt, error) {
	var rows []attemptRow
	if err := o.s.selectRows(ctx, o.s.db, "attempts_list", map[string]any{"delivery_id": deliveryID}, &rows); err != nil {
		return nil, err
	}
	out := make([]Attempt, len(rows))
	for i, r := range rows {
		out[i] = Attempt{
			ID: r.ID, DeliveryID: r.DeliveryID, Attempt: r.Attempt, Owner: r.Owner,
			LeasedAt: fromMicros(r.LeasedAt), LeaseExpiresAt: fromMicros(r.LeaseExpiresAt), FinishedAt: fromMicros(r.FinishedAt),
			Duration: time.Duration(r.DurationUS) * time.Microsecond, Outcome: AttemptOutcome(r.Outcome),
			HTTPStatus: int(r.HTTPStatus.Int64), ErrorCode: courier.Code(r.ErrorCode.String), RemoteCode: courier.Code(r.RemoteCode.String),
		}
	}
	return out, nil
}

// PruneAttempts deletes attempts log rows older than p.OlderThan, in
// bounded batches; see Inbox.Prune. It goes by age alone: a failed
// delivery keeps its last codes on its row (Delivery.LastErrorCode,
// LastHTTPStatus, LastRemoteCode) until a Redrive clears them, but its
// attempts go with the others, so keep them longer than failed
// deliveries wait to be redriven.
func (o *Outbox) PruneAttempts(ctx context.Context, p PruneParams) (int, error) {
	return o.pruneAttempts(ctx, o.s.prune, p)
}

// pruneAttempts is PruneAttempts, its statement run by run.
func (o *Outbox) pruneAttempts(ctx context.Context, run pruner, p PruneParams) (int, error) {
	return o.s.pruneOlder(ctx, run, "attempts_prune", nil, p)
}

// attemptArg is one row of the attempts log as attempts_log reads it from
// its JSON :batch parameter.
type attemptArg struct {
	DeliveryID     int64   `json:"delivery_id"`
	Attempt        int     `json:"attempt"`
	Owner          string  `json:"owner"`
	LeasedAt       int64   `json:"leased_at"`
	LeaseExpiresAt int64   `json:"lease_expires_at"`
	DurationUS     int64   `json:"duration_us"`
	Outcome        string  `json:"outcome"`
	HTTPStatus     *int    `json:"http_status"`
	ErrorCode      *string `json:"error_code"`
	RemoteCode     *string `json:"remote_code"`
}

func newAttemptArg(oc protocol.Outcome, outcome AttemptOutcome) attemptArg {
	a := attemptArg{
		DeliveryID: oc.Lease.DeliveryID, Attempt: oc.Lease.Attempt, Owner: oc.Lease.Owner,
		LeasedAt: micros(oc.Lease.LeasedAt), LeaseExpiresAt: micros(oc.Lease.ExpiresAt),
		DurationUS: max(oc.Duration.Microseconds(), 0), Outcome: string(outcome),
	}
	if oc.HTTPStatus != 0 {
		a.HTTPStatus = ptr(oc.HTTPStatus)
	}
	if oc.Code != "" {
		a.ErrorCode = ptr(string(oc.Code))
	}
	if oc.RemoteCode != "" {
		a.RemoteCode = ptr(string(oc.RemoteCode))
	}
	return a
}

// logAttempts appends attempts to the log in one statement.
func (o *Outbox) logAttempts(ctx context.Context, tx *sqlx.Tx, now int64, attempts ...attemptArg) error {
	if len(attempts) == 0 {
		return nil
	}
	_, err := o.s.exec(ctx, tx, "attempts_log", map[string]any{"batch": jsonArg(attempts), "now": now})
	return err
}

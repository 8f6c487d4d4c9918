package store

import (
	"context"
	"database/sql"
	"math"
	"time"

	"github.com/courier-go/courier"
)

// CodeCancelled marks a delivery an operator withdrew.
const CodeCancelled courier.Code = "cancelled"

// ListParams filters and pages deliveries for operators. Pages run newest
// first; pass the last page's NextBefore as Before for the next.
type ListParams struct {
	Status   courier.Status // "" for any
	Endpoint string         // "" for any
	Since    time.Time      // updated at or after; zero for no bound
	Until    time.Time      // updated before; zero for no bound
	Before   int64          // ids below this one; 0 for the first page
	Limit    int            // 1..1000; defaults to 100
}

// Page is one page of deliveries. Their payloads are not loaded.
type Page struct {
	Deliveries []Delivery
	NextBefore int64 // 0 when this is the last page
}

// List returns one page of deliveries matching p.
func (o *Outbox) List(ctx context.Context, p ListParams) (Page, error) {
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > 1000 {
		return Page{}, invalidArgument("ListParams.Limit must be within 1..1000")
	}
	until := int64(math.MaxInt64)
	if !p.Until.IsZero() {
		until = p.Until.UnixMicro()
	}
	rows, err := o.s.query(ctx, o.s.db, "list_deliveries", map[string]any{
		"status": string(p.Status), "endpoint": p.Endpoint, "since": micros(p.Since), "until": until,
		"before_id": p.Before, "limit": p.Limit + 1,
	})
	if err != nil {
		return Page{}, err
	}
	defer rows.Close()
	var page Page
	for rows.Next() {
		var (
			d                                Delivery
			next, deadline, created, updated int64
			code                             sql.NullString
			lastStatus                       sql.NullInt64
		)
		if err := rows.Scan(&d.ID, &d.NotificationID, &d.Endpoint, &d.Profile, &d.KeyID, &d.Status, &d.Priority,
			&d.Attempts, &d.MaxAttempts, &next, &deadline, &code, &lastStatus, &created, &updated); err != nil {
			return Page{}, o.s.dialect.interpret("list_deliveries", err)
		}
		d.NextAttemptAt, d.Deadline, d.CreatedAt, d.UpdatedAt = fromMicros(next), fromMicros(deadline), fromMicros(created), fromMicros(updated)
		d.LastErrorCode, d.LastStatus = courier.Code(code.String), int(lastStatus.Int64)
		page.Deliveries = append(page.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return Page{}, o.s.dialect.interpret("list_deliveries", err)
	}
	if len(page.Deliveries) > p.Limit {
		page.Deliveries = page.Deliveries[:p.Limit]
		page.NextBefore = page.Deliveries[p.Limit-1].ID
	}
	return page, nil
}

// Cancel withdraws a pending or retrying delivery: it ends suppressed with
// code cancelled. A delivery in any other state is ErrNotFound.
func (o *Outbox) Cancel(ctx context.Context, id int64) error {
	res, err := o.s.exec(ctx, o.s.writer, "cancel", map[string]any{"id": id, "now": o.s.now()})
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return courier.ErrNotFound
	}
	return nil
}

// Prune deletes succeeded and suppressed deliveries last updated more than
// p.OlderThan ago, in bounded batches; see Inbox.Prune.
func (o *Outbox) Prune(ctx context.Context, p PruneParams) (int, error) {
	return o.s.prune(ctx, "outbox_prune", map[string]any{"before": o.s.now() - p.OlderThan.Microseconds()}, p)
}

// PruneAttempts deletes attempts log rows older than p.OlderThan, in
// bounded batches.
func (o *Outbox) PruneAttempts(ctx context.Context, p PruneParams) (int, error) {
	return o.s.prune(ctx, "attempts_prune", map[string]any{"before": o.s.now() - p.OlderThan.Microseconds()}, p)
}

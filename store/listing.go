package store

import (
	"context"
	"database/sql"

	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/listing"
)

// The Admin's reads of the endpoints and the contract pins (package
// internal/listing) are implemented here and handed to package admin: a
// page read from the database's indexes from a cursor on, and the few
// that most need an operator beside counts made in the database, so that
// an outbox keeping tens of thousands of disabled endpoints, each with a
// pin, costs an answer little more than one keeping none. Endpoints.List
// and Contracts.List stay every one, read whole.
func init() {
	listing.Register(func(s any) listing.Lists[EndpointHealth, Contract] {
		st := s.(*Store)
		return listing.Lists[EndpointHealth, Contract]{
			EndpointPage: st.Endpoints.page, EndpointTop: st.Endpoints.top,
			EndpointStates: func(ctx context.Context) (map[string]int, error) { return st.Endpoints.states(ctx, st.db) },
			ContractPage:   st.Contracts.page, ContractTop: st.Contracts.top,
		}
	})
}

// page lists at most limit of the endpoints List lists, those after the
// URL after ("" for the first page), by URL (in the database's order of
// text: bytes on SQLite, its collation on PostgreSQL, whose indexes are
// in it); more reports whether others follow. When they do, the Store
// remembers the reference of the last one listed (see Resolve): the
// cursor a caller names the next page by resolves without a search, in
// this Store, even once its endpoint has left the list.
func (e *Endpoints) page(ctx context.Context, after string, limit int) ([]EndpointHealth, bool, error) {
	return readPage(ctx, e.s, "endpoint_page", after, limit, func(r endpointRow) string { return r.Endpoint }, endpointRow.listed)
}

// top lists the limit endpoints of List that most need an operator (see
// endpoint_top for the order), and counts every one List lists, and those
// in each breaker state but closed, in the database, all from one
// snapshot, as Health's.
func (e *Endpoints) top(ctx context.Context, limit int) (top []EndpointHealth, count int, states map[string]int, err error) {
	err = e.s.inSnapshot(ctx, "endpoint_top", func(tx DBTX) error {
		var rows []endpointRow
		if err := e.s.selectRows(ctx, tx, "endpoint_top", map[string]any{"limit": limit}, &rows); err != nil {
			return err
		}
		top = each(rows, endpointRow.listed)
		if err := e.s.scan(ctx, tx, "endpoint_count", nil, &count); err != nil {
			return err
		}
		states, err = e.states(ctx, tx)
		return err
	})
	return top, count, states, err
}

// states counts the endpoints in each breaker state but closed, in the
// database.
func (e *Endpoints) states(ctx context.Context, x DBTX) (map[string]int, error) {
	var rows []struct {
		State string `db:"state"`
		N     int    `db:"n"`
	}
	if err := e.s.selectRows(ctx, x, "endpoint_states", nil, &rows); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, st := range rows {
		out[st.State] = st.N
	}
	return out, nil
}

// page lists at most limit pins after the endpoint after ("" for the
// first page), as Endpoints.page lists endpoints, remembering the
// cursor's reference as it does.
func (c *Contracts) page(ctx context.Context, after string, limit int) ([]Contract, bool, error) {
	return readPage(ctx, c.s, "contract_page", after, limit, func(r contractRow) string { return r.Endpoint }, contractRow.contract)
}

// top lists the limit pins that most need an operator (see contract_top
// for the order), and counts every pin, and those holding deliveries
// back, in the database, all from one snapshot.
func (c *Contracts) top(ctx context.Context, limit int) (top []Contract, count, holding int, err error) {
	err = c.s.inSnapshot(ctx, "contract_top", func(tx DBTX) error {
		var rows []contractRow
		if err := c.s.selectRows(ctx, tx, "contract_top", map[string]any{"limit": limit}, &rows); err != nil {
			return err
		}
		top = each(rows, contractRow.contract)
		return c.s.scan(ctx, tx, "contract_count", nil, &count, &holding)
	})
	return top, count, holding, err
}

// readPage reads a page of the query name: at most limit rows after the
// endpoint after (one more is asked for, to learn whether others follow),
// each converted by to. When others follow, the Store remembers the
// reference of the last one's endpoint (url says which; see Resolve): the
// cursor a caller names the next page by.
func readPage[R, T any](ctx context.Context, s *Store, name, after string, limit int, url func(R) string, to func(R) T) ([]T, bool, error) {
	var rows []R
	if err := s.selectRows(ctx, s.db, name, map[string]any{"after": after, "limit": limit + 1}, &rows); err != nil {
		return nil, false, err
	}
	more := len(rows) > limit
	rows = rows[:min(limit, len(rows))]
	if more && len(rows) > 0 {
		last := url(rows[len(rows)-1])
		s.Endpoints.resolved.put(endpoint.Ref(last), last)
	}
	return each(rows, to), more, nil
}

// each returns f of every one of xs, in order.
func each[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// withValues runs read, the reads of the query name, in a read-only
// transaction of its own (inSnapshot) in which each statement is planned
// with its values (outbox_plan_with_values), for reads no one plan
// serves: PostgreSQL may otherwise keep, for good, a plan made without
// the values of a statement the driver has prepared (plan_cache_mode).
func (s *Store) withValues(ctx context.Context, name string, read func(tx DBTX) error) error {
	return s.inSnapshot(ctx, name, func(tx DBTX) error {
		if _, err := s.exec(ctx, tx, "outbox_plan_with_values", nil); err != nil {
			return err
		}
		return read(tx)
	})
}

// inSnapshot runs read, the reads of the query name, in a read-only
// transaction that sees one snapshot, as Health's.
func (s *Store) inSnapshot(ctx context.Context, name string, read func(tx DBTX) error) error {
	if s.closed.Load() {
		return errClosed
	}
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return s.dialect.interpret(name, err)
	}
	defer tx.Rollback()
	return read(tx)
}

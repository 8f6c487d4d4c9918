package store

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx/reflectx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/store/internal/engine"
)

// Bounds of Check's maxRows.
const (
	defaultCheckRows = 1000
	maxCheckRows     = 100_000
)

// Check is Health with a deep look, for a periodic job or an operator
// rather than a liveness probe: the claim verifies only the rows it
// touches, Check looks at the rest.
//
// It runs the engine's own integrity check (SQLite: PRAGMA quick_check,
// which reads the whole file; PostgreSQL leaves its pages to its own
// tooling), the schema guard Open ran, and validates up to maxRows
// deliveries (1..100000; 0 means 1000): each row's state invariants (what the schema's CHECK
// constraints say, in case the table no longer holds them), and, for a
// delivery that may still be sent (pending, retry_wait, leased, or
// failed, which Redrive may send again), that its payload opens and
// matches its digest. A row whose stored values do not have their
// column's type (SQLite keeps what raw SQL gives it) is invalid too, and
// so is a delivery waiting for its ordering key that nothing will promote
// (no key row, or one naming it as its head): an enqueue that failed
// between writing it and joining its key, in a transaction committed
// anyway. Enqueueing it again joins it.
// Each Check continues after the last delivery the
// previous Check of this Store validated, wrapping around at the end, so
// repeated calls cover the whole outbox, maxRows at a time; Checked
// says how many this one validated, Invalid lists the ids it found
// invalid. Check only reports: a claim quarantines an invalid row it
// reaches.
//
// Its findings come before Health's own: blocked with database_corrupt
// (the engine's integrity check found damage, or the database file is no
// longer the one the Store opened: removed or replaced under it, or, on
// SQLite, so is its -wal file, which the Store's writer then stops
// writing to at once), then
// schema_altered (schema_outdated, schema_too_new), then
// integrity_mismatch for invalid rows, then as Health. A damaged database
// or an altered schema ends the check there, with the counts Health could
// still read, if any.
func (o *Outbox) Check(ctx context.Context, maxRows int) (Health, error) {
	if maxRows == 0 {
		maxRows = defaultCheckRows
	}
	if maxRows < 1 || maxRows > maxCheckRows {
		return Health{}, invalidArgument("Check's maxRows must be within 1..100000")
	}
	blocked := func(h Health, code courier.Code) Health {
		h.Status, h.Code = HealthBlocked, code
		return h
	}
	corrupt, err := o.s.integrityCheck(ctx)
	if err != nil {
		return Health{}, err
	}
	if corrupt {
		h, _ := o.Health(ctx) // what the damaged database still answers, if anything
		return blocked(h, courier.CodeDatabaseCorrupt), nil
	}
	if schemaErr := checkSchema(ctx, o.s.db, o.s.dialect); schemaErr != nil {
		if !isSchemaVerdict(schemaErr) {
			return Health{}, schemaErr
		}
		h, _ := o.Health(ctx) // the altered tables may not answer its queries
		return blocked(h, courier.CodeOf(schemaErr)), nil
	}
	h, err := o.Health(ctx)
	if err != nil {
		return Health{}, err
	}
	if h.Checked, h.Invalid, err = o.checkRows(ctx, maxRows); err != nil {
		return Health{}, err
	}
	if len(h.Invalid) > 0 {
		return blocked(h, courier.CodeIntegrity), nil
	}
	return h, nil
}

// filesGone reports, at a glance, whether the database's files are no
// longer the ones the Store opened: Check's first look (integrityCheck),
// without the writer's.
func (s *Store) filesGone() bool {
	return s.file.gone() || s.dialect.Gone != nil && s.dialect.Gone(s.writer)
}

// lostWait bounds Check's wait for the writer, to look at its files.
const lostWait = 250 * time.Millisecond

// integrityCheck runs the engine's own integrity check and reports
// whether it found damage.
func (s *Store) integrityCheck(ctx context.Context) (corrupt bool, err error) {
	if s.file.gone() {
		return true, nil // removed or replaced under the Store: its writes go nowhere lasting
	}
	// The writer's files are looked at through the writer, unless ctx's
	// request holds it (a receiver's function), and for lostWait at most:
	// a writer held longer (by a long transaction, the caller's own among
	// them) looks at them itself, within a few commits.
	if s.dialect.Lost != nil && s.writerHeld(ctx) == nil {
		if s.closed.Load() {
			return false, errClosed
		}
		lctx, cancel := context.WithTimeout(ctx, lostWait)
		lost, err := s.dialect.Lost(lctx, s.writer)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && lctx.Err() != nil: // the writer is busy: not looked at
		case err != nil || lost:
			return lost, s.dialect.interpret("database files", err)
		}
	}
	const name = "schema_integrity_check"
	if s.q(name).text == "" {
		return false, nil // the engine's own tooling's
	}
	var rows []string
	if err := s.selectRows(ctx, s.db, name, nil, &rows); err != nil {
		if errors.Is(err, courier.CodeDatabaseCorrupt) {
			// A file too damaged for the check to run (SQLite: its
			// header is no database's, a page it must read is
			// malformed) is damage found.
			return true, nil
		}
		return false, err
	}
	return len(rows) != 1 || rows[0] != "ok", nil
}

// checkRows validates up to limit deliveries after the one the previous
// call ended at, and returns how many it validated and the invalid ones.
// It validates each row as it reads it, so it holds one row at a time,
// not its whole slice: a slice may be 100000 rows, each payload up to
// MaxPayloadSize. A row it cannot read into its Go types (SQLite keeps
// whatever a column is given: a priority of 'high') is invalid too: it is
// reported by its id, and the next call goes on past it.
func (o *Outbox) checkRows(ctx context.Context, limit int) (checked int, invalid []int64, err error) {
	const name = "outbox_check_rows"
	o.checkMu.Lock()
	defer o.checkMu.Unlock()
	// One row past the slice says whether the outbox goes on: a slice that
	// ends exactly at the end starts the next call over, not at nothing.
	rows, err := o.s.query(ctx, o.s.db, name, map[string]any{"after": o.checkAfter, "limit": limit + 1})
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	var r outboxRow
	fields, id, err := rowFields(rows, &r)
	if err != nil {
		return 0, nil, wrapf(err, name)
	}
	last, more := int64(0), false
	for rows.Next() {
		if checked == limit {
			more = true
			break
		}
		r = outboxRow{}
		if err := rows.Scan(fields...); err != nil {
			// The row does not fit its types: read its id alone, to
			// report it, every other column into an any, which takes
			// any value.
			whole := make([]any, len(fields))
			for i := range whole {
				whole[i] = new(any)
			}
			whole[id] = &r.ID
			if err := rows.Scan(whole...); err != nil {
				return 0, nil, o.s.dialect.interpret(name, err)
			}
			invalid = append(invalid, r.ID)
		} else if o.rowProblem(r) != "" {
			invalid = append(invalid, r.ID)
		}
		checked, last = checked+1, r.ID
	}
	if err := rows.Err(); err != nil {
		return 0, nil, o.s.dialect.interpret(name, err)
	}
	o.checkAfter = 0 // the end: start over
	if more {
		o.checkAfter = last
	}
	return checked, invalid, nil
}

// rowFields returns, for each column of rows, a pointer to the field of
// the struct dest points to that the column's db tag names, as sqlx's
// StructScan maps them, and the index of the id column.
func rowFields(rows engine.Rows, dest any) (fields []any, id int, err error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, 0, err
	}
	v := reflect.ValueOf(dest).Elem()
	paths := reflectx.NewMapperFunc("db", strings.ToLower).TraversalsByName(v.Type(), cols)
	fields, id = make([]any, len(cols)), -1
	for i, path := range paths {
		if len(path) == 0 {
			return nil, 0, fmt.Errorf("column %s has no field in %s", cols[i], v.Type())
		}
		fields[i] = reflectx.FieldByIndexes(v, path).Addr().Interface()
		if cols[i] == "id" {
			id = i
		}
	}
	if id < 0 {
		return nil, 0, errors.New("no id column")
	}
	return fields, id, nil
}

// rowProblem says what is wrong with a stored delivery, "" if nothing.
func (o *Outbox) rowProblem(r outboxRow) string {
	leased := r.Status == courier.StatusLeased
	leaseCols := []bool{r.LeaseOwner.Valid, r.LeaseToken.Valid, r.LeasedAt.Valid, r.LeaseExpiresAt.Valid}
	switch {
	case !slices.Contains(courier.Statuses(), r.Status):
		return "status"
	case !wire.IsToken(r.NotificationID):
		return "notification_id"
	case r.Endpoint == "" || len(r.Endpoint) > MaxEndpointSize:
		return "endpoint"
	case !wire.IsDigest(r.PayloadSHA256):
		return "payload_sha256"
	case r.MaxAttempts < 1 || r.MaxAttempts > maxAttempts || r.Attempts < 0 || r.Attempts > r.MaxAttempts:
		return "attempts"
	case leased && (!allTrue(leaseCols) || r.LeaseExpiresAt.Int64 <= r.LeasedAt.Int64):
		return "lease"
	case !leased && anyTrue(leaseCols):
		return "lease"
	case needsCode(r.Status) && !wire.IsCode(r.LastErrorCode.String):
		return "last_error_code"
	case (r.Status == courier.StatusSucceeded) != r.AckSHA256.Valid:
		return "ack_sha256"
	case r.ContractSHA256.Valid && !wire.IsDigest(r.ContractSHA256.String):
		return "contract_sha256"
	case r.DedupeKey.Valid && !wire.IsToken(r.DedupeKey.String):
		return "dedupe_key"
	case r.OrderingKey.Valid && !wire.IsVisible(r.OrderingKey.String, maxOrderingKey):
		return "ordering_key"
	case r.LastRemoteCode.Valid && (r.LastRemoteCode.String == "" || len(r.LastRemoteCode.String) > 128):
		return "last_remote_code"
	case r.TraceParent.Valid && (len(r.TraceParent.String) < 55 || len(r.TraceParent.String) > 512),
		r.TraceState.Valid && (!r.TraceParent.Valid || r.TraceState.String == "" || len(r.TraceState.String) > 512):
		return "trace"
	case r.Hold.Valid && (r.Status != courier.StatusPending && r.Status != courier.StatusRetryWait ||
		r.Hold.String != string(HeldByKey) && r.Hold.String != string(HeldByEndpoint) ||
		r.Hold.String == string(HeldByKey) && !r.OrderingKey.Valid):
		return "hold"
	case r.KeyUnjoined:
		return "hold (no ordering key's row promotes it)"
	// updated_at may come before created_at: the store's clock may step
	// back between the two.
	case r.CreatedAt <= 0 || r.UpdatedAt <= 0 || r.NextAttemptAt <= 0 || r.Deadline <= 0:
		return "times"
	}
	switch r.Status { // outbox_check_rows reads the payload of these only
	case courier.StatusPending, courier.StatusRetryWait, courier.StatusLeased, courier.StatusFailed:
		plain, err := o.s.cfg.Encryption.open(r.Payload, r.PayloadKeyID, r.NotificationID, r.Endpoint, r.KeyID)
		if err != nil {
			return fmt.Sprintf("payload (%s)", courier.CodePayloadUnreadable)
		}
		if ok, _ := o.s.cfg.Encryption.matches(plain, r.PayloadSHA256, r.PayloadKeyID, r.NotificationID, r.Endpoint); !ok {
			return "payload (digest)"
		}
	}
	return ""
}

// needsCode reports whether a row of status st must say why it is there.
func needsCode(st courier.Status) bool {
	switch st {
	case courier.StatusRetryWait, courier.StatusFailed, courier.StatusQuarantined, courier.StatusSuppressed:
		return true
	}
	return false
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

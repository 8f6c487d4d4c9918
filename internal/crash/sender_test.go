package crash

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// retryLog is a slog.Handler that hands every record logged with
// BusyRetryMessage to retried.
type retryLog struct{ retried chan slog.Record }

func (h retryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h retryLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h retryLog) WithGroup(string) slog.Handler            { return h }

func (h retryLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == BusyRetryMessage {
		h.retried <- r
	}
	return nil
}

func newRetryLog() (*slog.Logger, chan slog.Record) {
	retried := make(chan slog.Record, 16)
	return slog.New(retryLog{retried}), retried
}

// senderSetup is a sender's SQLite database, prepared, its store opened,
// and the spec of a sender of one notification whose business
// transaction commits.
type senderSetup struct {
	spec    Spec
	st      *store.Store
	queries map[string]string
}

func setupSender(t *testing.T) senderSetup {
	t.Helper()
	seed := uint64(1)
	for RolledBack(seed, 0) {
		seed++
	}
	s := Spec{
		Role: RoleSender, Engine: EngineSQLite, Database: filepath.Join(t.TempDir(), "sender.db"),
		Addr: "127.0.0.1:9", Secret: signature.NewStandardWebhooksSecret(), N: 1, Seed: seed,
	}
	if err := Prepare(t.Context(), s.Engine, s.Database, s.Role); err != nil {
		t.Fatal(err)
	}
	st, q, _, err := s.open(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Close(st) })
	return senderSetup{spec: s, st: st, queries: q}
}

// TestSenderRunsABusyBusinessTransactionAgain: a business transaction
// that waited for SQLite's write lock, held by another connection, for
// the whole busy timeout is run again, logged, rather than end the
// sender; once the lock is free the retry commits the order and its one
// delivery, once.
func TestSenderRunsABusyBusinessTransactionAgain(t *testing.T) {
	b := setupSender(t)
	blocker, err := sql.Open("sqlite3", sqlite.DSN(b.spec.Database, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	lock, err := blocker.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()

	logger, retried := newRetryLog()
	done := make(chan error, 1)
	go func() { done <- enqueueAll(t.Context(), b.st, b.queries["insert_order"], b.spec, logger) }()
	select {
	case r := <-retried:
		attrs := make(map[string]string)
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		if attrs["notification"] != "0" || attrs["try"] != "1" || !strings.Contains(attrs["error"], "database is locked") {
			t.Errorf("retry logged with %v, want notification 0, try 1, the busy error", attrs)
		}
	case err := <-done:
		t.Fatalf("the sender's enqueue ended before it tried the busy transaction again: %v", err)
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the sender's enqueue failed once the lock was free: %v", err)
	}
	if n := len(retried); n != 0 {
		t.Errorf("%d more retries logged after the lock was free, want 0", n)
	}

	var orders int
	if err := b.st.DB().QueryRowContext(t.Context(), b.queries["count_orders"]).Scan(&orders); err != nil {
		t.Fatal(err)
	}
	rows, err := b.st.DB().QueryContext(t.Context(), b.queries["outbox_rows"])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var deliveries []string
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			t.Fatal(err)
		}
		deliveries = append(deliveries, id+":"+status)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	n, _, err := Notification(b.spec.Seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{n.NotificationID + ":" + string(courier.StatusPending)}; orders != 1 || fmt.Sprint(deliveries) != fmt.Sprint(want) {
		t.Errorf("after the retry: %d orders, deliveries %v; want 1 order, deliveries %v", orders, deliveries, want)
	}
}

// TestSenderDoesNotRunAFailedBusinessTransactionAgain: an error that is
// not busy ends the sender's enqueue at its first try, with no retry.
func TestSenderDoesNotRunAFailedBusinessTransactionAgain(t *testing.T) {
	b := setupSender(t)
	if _, err := b.st.DB().ExecContext(t.Context(), "DROP TABLE crash_orders"); err != nil {
		t.Fatal(err)
	}
	logger, retried := newRetryLog()
	err := enqueueAll(t.Context(), b.st, b.queries["insert_order"], b.spec, logger)
	if err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("enqueue into a dropped table: %v, want its error", err)
	}
	if n := len(retried); n != 0 {
		t.Errorf("%d retries logged, want 0", n)
	}
}

// TestRetryBusy: only a busy error is tried again, up to the bound, and
// not once the context is done.
func TestRetryBusy(t *testing.T) {
	errBusy := fmt.Errorf("store: enqueue: %w: %w", fmt.Errorf("%w: database busy", courier.CodeDatabaseUnavailable), sqlite3.Error{Code: sqlite3.ErrBusy})
	errOther := errors.New("crash: insert effect: disk I/O error")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		results []error // what each try returns; the last one from there on
		calls   int
		want    error
	}{
		{"busy, then done", context.Background(), []error{errBusy, nil}, 2, nil},
		{"busy every time", context.Background(), []error{errBusy}, 3, errBusy},
		{"another error", context.Background(), []error{errOther}, 1, errOther},
		{"busy, then another error", context.Background(), []error{errBusy, errOther}, 2, errOther},
		{"busy once the context is done", cancelled, []error{errBusy}, 1, errBusy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, retried := newRetryLog()
			calls := 0
			err := retryBusy(tt.ctx, logger, 3, 7, func() error {
				err := tt.results[min(calls, len(tt.results)-1)]
				calls++
				return err
			})
			if !errors.Is(err, tt.want) || calls != tt.calls || len(retried) != calls-1 {
				t.Errorf("retryBusy: %v after %d tries, %d retries logged; want %v after %d, %d logged", err, calls, len(retried), tt.want, tt.calls, tt.calls-1)
			}
		})
	}
}

// TestBusy: busy is SQLite's busy or locked and PostgreSQL's lock and
// conflict failures, as the driver says them or as courier's store
// reports them; nothing else.
func TestBusy(t *testing.T) {
	unavailable := fmt.Errorf("%w: database busy", courier.CodeDatabaseUnavailable)
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"sqlite busy", sqlite3.Error{Code: sqlite3.ErrBusy}, true},
		{"sqlite locked", sqlite3.Error{Code: sqlite3.ErrLocked}, true},
		{"sqlite busy from the store", fmt.Errorf("store: enqueue: %w: %w", unavailable, sqlite3.Error{Code: sqlite3.ErrBusy}), true},
		{"sqlite busy under another code", fmt.Errorf("%w: %w", courier.CodeInvalidArgument, sqlite3.Error{Code: sqlite3.ErrBusy}), false},
		{"sqlite read-only", sqlite3.Error{Code: sqlite3.ErrReadonly}, false},
		{"sqlite constraint", sqlite3.Error{Code: sqlite3.ErrConstraint}, false},
		{"postgres serialization failure", &pgconn.PgError{Code: "40001"}, true},
		{"postgres deadlock", fmt.Errorf("store: publish: %w: %w", unavailable, &pgconn.PgError{Code: "40P01"}), true},
		{"postgres lock not available", &pgconn.PgError{Code: "55P03"}, true},
		{"postgres unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"postgres connection failure", &pgconn.PgError{Code: "08006"}, false},
		{"store unavailable without a driver error", fmt.Errorf("store: begin: %w", unavailable), false},
		{"the words alone", errors.New("database is locked"), false},
		{"context cancelled", context.Canceled, false},
	}
	for _, tt := range tests {
		if got := busy(tt.err); got != tt.want {
			t.Errorf("%s: busy(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// Package store is courier's durable state over sqlx: the Outbox a sender
// enqueues into inside its own transactions, the attempts log, the Inbox a
// receiver dedupes by, and the replay cache signatures are checked against.
//
// Two engines share one API and one conformance suite (storetest): SQLite
// (the embedded default, see [OpenSQLite]) and PostgreSQL through pgx's
// stdlib driver, for many application instances on one database. Each
// engine's SQL lives in its own embedded .sql files under the same query
// names, with numbered migrations applied by [Migrate] or [MigrateTx].
//
// All times are stored as unix microseconds.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
)

// DBTX is what Enqueue and the Inbox need of the caller's transaction:
// *sql.Tx, *sqlx.Tx, *sql.DB, *sqlx.DB and *sql.Conn all satisfy it.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Defaults of Config.
const (
	DefaultMaxAttempts  = 8
	DefaultRetryHorizon = 72 * time.Hour
	DefaultRetryBase    = 5 * time.Second
	DefaultRetryCap     = time.Hour
	DefaultJitter       = 0.2
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// MaxAttempts is the attempt budget of a delivery enqueued without one.
	// Defaults to DefaultMaxAttempts (Standard Webhooks' schedule length).
	MaxAttempts int
	// RetryHorizon is how long after enqueue a delivery enqueued without a
	// deadline may still be retried; past it, it fails with code expired.
	// Defaults to DefaultRetryHorizon.
	RetryHorizon time.Duration
	// Backoff decides the delay before a retry. Defaults to an
	// ExponentialBackoff with DefaultRetryBase, DefaultRetryCap and
	// DefaultJitter.
	Backoff Backoff
	// Breaker is the per-endpoint circuit breaker. Its zero value is
	// the defaults of BreakerConfig.
	Breaker BreakerConfig
	// OnEndpoint receives endpoint breaker transitions (opened, probed,
	// closed, disabled, enabled). It may run inside a transaction that
	// later rolls back; it must be quick. Defaults to none.
	OnEndpoint func(EndpointEvent)
	// Hook receives typed events for metrics: enqueues (counted when
	// Enqueue returns, so a caller's rollback still counts), claims and
	// settles. It must be quick. Defaults to none.
	Hook func(Event)
	// Encryption, when set, seals every payload enqueued from now on with
	// AES-256-GCM. Defaults to none: payloads are stored as sent.
	Encryption *Encryption
	// Now is the clock. Defaults to time.Now. Tests inject their own.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RetryHorizon == 0 {
		c.RetryHorizon = DefaultRetryHorizon
	}
	if c.Backoff == nil {
		c.Backoff = ExponentialBackoff{Base: DefaultRetryBase, Cap: DefaultRetryCap, Jitter: DefaultJitter}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Breaker = c.Breaker.withDefaults()
	return c
}

func (c Config) validate() error {
	switch {
	case c.MaxAttempts < 1 || c.MaxAttempts > 1000:
		return configError("MaxAttempts must be within 1..1000")
	case c.RetryHorizon <= 0:
		return configError("RetryHorizon must be positive")
	}
	return c.Encryption.validate()
}

func configError(msg string) error {
	return courier.Wrap(courier.ErrConfigInvalid, courier.CodeConfigInvalid, "store: "+msg)
}

func invalidArgument(msg string) error {
	return courier.NewError(courier.CodeInvalidArgument, "store: "+msg)
}

// Store is courier's state in one database.
type Store struct {
	Outbox        *Outbox
	Inbox         *Inbox
	Replay        *ReplayCache
	Subscriptions *Subscriptions
	Endpoints     *Endpoints
	db            *sqlx.DB // DB(): the application's, and courier's reads
	writer        *sqlx.DB // courier's writes: db, or OpenSQLite's single connection
	dialect       *dialect
	cfg           Config
	closeFns      []func()
}

// Open returns a Store over db, whose driver selects the engine ("sqlite3"
// or OpenSQLite's driver for SQLite; "pgx" or "postgres" for PostgreSQL).
// It checks that the schema is the one this courier migrates to and was not
// altered: ErrSchemaOutdated means Migrate must run first.
//
// The Store uses db as it is configured. On PostgreSQL size its pool for
// the work in flight: database/sql keeps two idle connections by default,
// so a worker delivering 16 at once, or a receiver serving many requests,
// would open and close a server connection for most transactions. Give it
// at least the worker's Concurrency plus two, with as many idle
// (db.SetMaxOpenConns, db.SetMaxIdleConns).
func Open(ctx context.Context, db *sqlx.DB, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d, err := dialectOf(db.DriverName())
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, db, d); err != nil {
		return nil, err
	}
	s := &Store{db: db, writer: db, dialect: d, cfg: cfg}
	s.Outbox = &Outbox{s: s}
	s.Inbox = &Inbox{s: s}
	s.Replay = &ReplayCache{s: s}
	s.Subscriptions = &Subscriptions{s: s}
	s.Endpoints = &Endpoints{s: s}
	return s, nil
}

// DB returns the database the Store works on.
func (s *Store) DB() *sqlx.DB { return s.db }

// Begin starts a transaction on the connection courier writes through,
// for work that goes with courier's own writes: the receivers in package
// handler run the application's function in one. On a Store from
// OpenSQLite that is a single connection, so concurrent writers queue in
// Go, in order and without SQLite's sleeping busy handler, and share one
// warm page cache; elsewhere it is DB().BeginTxx. Inside the transaction
// use only the transaction: on SQLite a second Begin, or a Store method
// that writes, waits until this one ends.
func (s *Store) Begin(ctx context.Context) (*sqlx.Tx, error) {
	tx, err := s.writer.BeginTxx(ctx, nil)
	if err != nil {
		return nil, s.dialect.interpret("begin", err)
	}
	return tx, nil
}

// Engine names the store's engine: "sqlite" or "postgres".
func (s *Store) Engine() string { return s.dialect.name }

// now is the store's clock in unix microseconds.
func (s *Store) now() int64 { return s.cfg.Now().UnixMicro() }

// q returns the named query of the store's dialect.
func (s *Store) q(name string) *query { return s.dialect.query(name) }

// exec runs a named query on x.
func (s *Store) exec(ctx context.Context, x DBTX, name string, args map[string]any) (sql.Result, error) {
	q := s.q(name)
	res, err := x.ExecContext(ctx, q.text, q.args(args)...)
	return res, s.dialect.interpret(name, err)
}

// query runs a named query on x and returns its rows.
func (s *Store) query(ctx context.Context, x DBTX, name string, args map[string]any) (*sql.Rows, error) {
	q := s.q(name)
	rows, err := x.QueryContext(ctx, q.text, q.args(args)...)
	return rows, s.dialect.interpret(name, err)
}

// inTx runs fn in a transaction of its own, committed when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return s.dialect.interpret("commit", tx.Commit())
}

// micros converts a time to the stored form; the zero time stays zero.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros converts a stored time back; zero stays the zero time.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// nullMicros converts a nullable stored time.
func nullMicros(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMicros(n.Int64)
}

// nullable returns nil for the zero value, so it is stored as NULL.
func nullable[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// ptr returns a pointer to v: a JSON field that may be null.
func ptr[T any](v T) *T { return &v }

// jsonArg encodes the rows of a batch statement's JSON parameter, which
// SQLite reads with json_each and PostgreSQL with jsonb_to_recordset.
func jsonArg(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("store: a batch parameter does not encode: " + err.Error()) // plain structs always do
	}
	return string(b)
}

// scanRows calls scan for each row, then closes rows and returns the
// first error of either.
func scanRows(rows *sql.Rows, scan func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := scan(); err != nil {
			return err
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// isNoRows reports whether err says a query returned no row.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// wrapf annotates a store error without hiding its code.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: "+format+": %w", append(args, err)...)
}

// driverFamily maps database/sql driver names to dialect names.
func driverFamily(driver string) string {
	switch {
	case driver == SQLiteDriver || strings.HasPrefix(driver, "sqlite"):
		return "sqlite"
	case driver == "pgx" || driver == "pgx/v5" || driver == "postgres":
		return "postgres"
	}
	return ""
}

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	EventEnqueued EventKind = "enqueued" // a new delivery was written
	EventClaimed  EventKind = "claimed"  // a claim leased N deliveries
	EventSettled  EventKind = "settled"  // one attempt settled into Status
)

// Event is a store event for metrics. It carries counts, statuses and
// codes, never content.
type Event struct {
	Kind   EventKind
	N      int
	Status courier.Status
	Code   courier.Code
}

func (s *Store) observe(e Event) {
	if s.cfg.Hook != nil {
		s.cfg.Hook(e)
	}
}

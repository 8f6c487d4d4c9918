package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/internal/writerctx"
	"github.com/courier-go/courier/store/internal/engine"
)

// DBTX is what Enqueue and the Inbox need of the caller's transaction:
// *sql.Tx, *sqlx.Tx, *sql.DB, *sqlx.DB and *sql.Conn all satisfy it. It
// must be on the Store's own database: the Store cannot tell a handle of
// another database, and writes where the handle goes (a delivery enqueued
// in another Store's transaction is that Store's, sent by its workers).
// Given a database or a connection instead of a transaction (*sql.DB,
// *sqlx.DB, *sql.Conn or *sqlx.Conn), Enqueue, EnqueueMany,
// EnqueueCommand and Publish write in a transaction of their own there,
// committed before they return: whole or not at all. A connection must
// not be in a transaction already (one the application began on it, with
// its BeginTx or a BEGIN of its own): they refuse it with
// CodeInvalidArgument and write nothing, since their transaction would
// nest in the application's (on PostgreSQL their COMMIT would commit the
// application's writes, which its rollback would then not undo); pass
// that transaction itself. Any other DBTX, an
// application's own handle, is used as it is: its statements go where it
// sends them (into the transaction its context carries, say), so give it
// one that writes into a transaction.
//
// A method given a nil DBTX, or a nil *sql.Tx or *sqlx.Tx as one, returns
// CodeInvalidArgument and writes nothing, unless its documentation says
// what nil stands for (Subscriptions: the Store's own connection).
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Defaults of Config.
const (
	defaultMaxAttempts  = 8
	defaultRetryHorizon = wire.RetryHorizon
)

// Durability says when a commit courier makes, or the application makes
// through the Store, is durable.
type Durability int

// Durabilities.
const (
	// DurabilityFull makes every commit durable before it returns, so an
	// Ack a receiver answered, or a delivery a worker recorded as sent,
	// survives a crash of the machine, not only of the process. The
	// default. On PostgreSQL courier leaves the server's settings as they
	// are: commits are durable while synchronous_commit is not off (its
	// default is on) and fsync is on, wherever they are set (server,
	// database, role or connection).
	DurabilityFull Durability = iota
	// DurabilityRelaxed lets the engine return from a commit before it is
	// on disk (SQLite: synchronous=NORMAL in WAL mode), which is faster;
	// a power loss or OS crash can then lose the latest commits, so a
	// receiver may have acknowledged a notification whose record and
	// effects are gone. A process crash loses nothing. On PostgreSQL the
	// server's synchronous_commit decides instead.
	DurabilityRelaxed
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// MaxAttempts is the attempt budget of a delivery enqueued without
	// one, 1 to 1000. Defaults to 8 (Standard Webhooks' schedule length).
	//
	// The budget and the worker's Backoff together say how long a
	// delivery whose receiver stays down is tried before it fails for
	// good, for an operator to redrive: spaced by client.DefaultBackoff
	// (Standard Webhooks' schedule), 8 attempts last about 27 hours, inside
	// the default RetryHorizon. A faster Backoff spends the budget sooner
	// (client.ExponentialBackoff(5*time.Second, time.Hour, 0.2) spends 8
	// attempts in about 10 minutes): give it a budget that outlasts the
	// receivers' outages it should ride out. While an endpoint's breaker
	// is open (see BreakerConfig), only its probes are attempted, one per
	// Cooldown: in a long outage with a larger backlog than the probes
	// reach, deliveries end expired at their deadline with attempts left.
	MaxAttempts int
	// RetryHorizon is how long after its first attempt is due a delivery
	// enqueued without a deadline may still be attempted (its deadline);
	// past it, it fails with code expired. At most MaxHorizon. Defaults to
	// 72 hours.
	RetryHorizon time.Duration
	// Durability is when commits are durable. Defaults to DurabilityFull.
	Durability Durability
	// Breaker is the per-endpoint circuit breaker. Its zero value is
	// the defaults of BreakerConfig.
	Breaker BreakerConfig
	// Hook receives typed events for metrics and alerts: enqueues
	// (counted when Enqueue writes them in the caller's transaction, so a
	// caller's rollback still counts; in a transaction of the Store's own,
	// once it commits), claims, settles and endpoint breaker transitions
	// (each once its transaction commits). It must be quick: it runs in
	// the worker's and the receivers' goroutines. It must not wait on the
	// database (a Health for a gauge, say): an enqueue's event is reported
	// while the caller's transaction holds a connection of the pool, and
	// on a pool with none to spare it would wait for its own caller. A
	// panic in it is dropped and logged at Error on slog's default logger.
	// Defaults to none.
	Hook func(Event)
	// OrderingOnFailure is what a delivery that fails for good while it
	// heads its ordering key (EnqueueParams.OrderingKey) does to the
	// deliveries behind it: OrderingHoldKey (they wait for an operator) or
	// OrderingSkipFailed (the next one goes). It is applied by the process that
	// records the failure, so give every process sharing the database the
	// same. Defaults to OrderingHoldKey.
	OrderingOnFailure OrderingOnFailure
	// Encryption, when set, seals every payload enqueued from now on with
	// AES-256-GCM, and keys the digests and seals the answers of the inbox
	// records kept from now on. Defaults to none: payloads and records are
	// stored as sent and received. Open
	// copies it: to rotate keys, open the Store again with the new
	// Encryption (every process's Keys must hold a key before any process
	// makes it Current, or a process without it quarantines what it
	// cannot open; Outbox.Redrive sends those again once the key is in
	// place).
	Encryption *Encryption
	// Profiles resolves the Ack profile a delivery names
	// (EnqueueParams.Profile, SubscriptionParams.Profile) and is the one
	// place custom profiles are registered: wrap ack.Builtin and add
	// yours. Enqueue and Subscriptions refuse a name it does not know, so
	// a misspelt profile fails where it is written, not at every attempt;
	// the Store's workers verify each answer with the profile it resolves.
	// A worker whose Profiles do not know a delivery's profile (one not
	// yet given it, as in a rolling deploy) sends nothing and retries it
	// with code config_invalid, for a worker that knows it.
	// Defaults to ack.Builtin.
	Profiles func(name string) (ack.Profile, bool)
	// Tracer traces everything built on this Store: its enqueues, the
	// workers that deliver its outbox (client.NewWorker) and the receivers
	// that record into its inbox (package handler). contrib/otelcourier
	// provides one for OpenTelemetry. Defaults to none (nil, or a nil
	// pointer): no spans, no trace context kept.
	//
	// Each delivery an Outbox writes gets a span (courier.enqueue) in the
	// caller's trace and keeps that span's W3C trace context; only trace
	// identifiers are stored. A worker traces a courier.claim span per
	// claim, a courier.settle span per settle batch and an HTTP client span
	// (POST) per attempt, a child of the stored context, with the delivery,
	// attempt, redacted URL, the receiver's status, the result and codes as
	// attributes. Each attempt sends the trace context on (traceparent,
	// tracestate): its span's, or, from a worker whose Store has no Tracer,
	// the one stored with the delivery, so the receiver continues the
	// enqueuing transaction's trace either way. A receiver traces a server
	// span (POST) per request, continuing the sender's trace (its
	// traceparent header, or the span a tracing middleware in front
	// already started), with the status, outcome and code as attributes,
	// and a courier.handle span around the application's function, failed
	// with the refusal's code or handler_failed when it returns an error.
	// Like the Hook, it must not wait on the database: enqueue spans and
	// courier.handle spans start and end inside transactions. Like the
	// Hook's, a panic of its methods or of its spans' is logged at Error
	// on slog's default logger and dropped: the call traces nothing and
	// goes on.
	Tracer courier.Tracer
	// Now is the store's clock: it stamps enqueues, leases, due times and
	// records. Defaults to the database's clock where the database may run
	// on another host than its processes (PostgreSQL): the Store reads the
	// server's time at Open, and again as transactions begin on it (Begin:
	// the application's and the receivers', claims, settles, two-phase
	// inbox claims, operations) once its reading is a minute old or this
	// process's clock jumped (a suspended host), and keeps it on this
	// process's monotonic clock in between, so every process sharing the
	// database stamps leases on one clock whatever its own says, to within
	// half a round trip to the server. An enqueue in a transaction begun
	// elsewhere (DB().BeginTxx, pgx's) stamps with the reading as it
	// stands. See the package doc's Clocks for what must be kept in sync,
	// and what a Now set here does on PostgreSQL. On SQLite the database
	// and every process writing it share one host and one clock, and the
	// default is time.Now: a step of that host's wall clock moves it. A
	// forward step longer than what is left of a lease makes the lease
	// expire in the store while its attempt still runs: another worker may
	// claim the delivery and send it again at once (the receiver's inbox
	// answers the second as a duplicate), and the first attempt's outcome
	// is refused, its lease lost. Tests inject their own; left nil, the
	// engine decides, as above.
	Now func() time.Time
}

// The store's errors with a fixed message, each matching its code.
var (
	errNotFound             = &coded.Error{Code: courier.CodeNotFound, Msg: "not found"}
	errIdempotencyCollision = &coded.Error{Code: courier.CodeIdempotencyCollision, Msg: "store: same identity, different content"}
	errLeaseLost            = &coded.Error{Code: courier.CodeLeaseLost, Msg: "store: lease no longer held"}
	errContractChanged      = &coded.Error{Code: courier.CodeContractChanged, Msg: "store: the command was built for another contract than the endpoint's pin: build it for the pinned capabilities digest or, once the source serves the new contract, pin its digest (Contracts.Pin, courier contracts pin)"}
)

// withDefaults returns a copy of c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.RetryHorizon == 0 {
		c.RetryHorizon = defaultRetryHorizon
	}
	if c.Profiles == nil {
		c.Profiles = ack.Builtin
	}
	if nilcheck.Nil(c.Tracer) { // a nil pointer, declared and set only when tracing is on: none
		c.Tracer = nil
	}
	c.Tracer = tracing.Guard(c.Tracer)
	c.Breaker = c.Breaker.withDefaults()
	if c.Encryption != nil { // the Store's own copy: a later change of the caller's is not seen
		c.Encryption = &Encryption{Current: c.Encryption.Current, Keys: slices.Clone(c.Encryption.Keys)}
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.MaxAttempts < 1 || c.MaxAttempts > maxAttempts:
		return configError("Config.MaxAttempts must be within 1..1000")
	case c.RetryHorizon <= 0 || c.RetryHorizon > MaxHorizon:
		return configError("Config.RetryHorizon must be positive and at most MaxHorizon (30 days)")
	case c.Durability != DurabilityFull && c.Durability != DurabilityRelaxed:
		return configError("Config.Durability is unknown")
	case c.OrderingOnFailure != OrderingHoldKey && c.OrderingOnFailure != OrderingSkipFailed:
		return configError("Config.OrderingOnFailure is unknown")
	}
	if err := c.Breaker.validate(); err != nil {
		return err
	}
	return c.Encryption.validate()
}

func configError(msg string) error {
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "store: " + msg}
}

func invalidArgument(msg string) error {
	return &coded.Error{Code: courier.CodeInvalidArgument, Msg: "store: " + msg}
}

// Store is courier's state in one database: the sender side's Outbox,
// Subscriptions, Endpoints and Contracts, and the receiver side's Inbox and
// Replay cache. It is safe for concurrent use.
type Store struct {
	Outbox        *Outbox
	Inbox         *Inbox
	Replay        *ReplayCache
	Subscriptions *Subscriptions
	Endpoints     *Endpoints
	Contracts     *Contracts
	db            *sqlx.DB // DB(): the application's, and courier's reads
	writer        *sqlx.DB // courier's writes: db, or the engine's writer
	oneWriter     bool     // writer is one connection of the engine's own (SQLite's), held by one transaction at a time
	dialect       *dialect
	cfg           Config
	local         func() time.Time // this process's clock
	clock         *dbClock         // the database's, when it is the store's
	schema        schemaWatch
	file          databaseFile // the database's file, where it is one (SQLite): see Check
	closeMu       sync.Mutex
	closers       []func() error
	closed        atomic.Bool     // Close was called: every call fails with errClosed
	life          context.Context // done once Close is called, once closed is set
	end           context.CancelFunc
	// uncommitted holds, per transaction of inTx's (*sqlx.Tx), the
	// breaker moves it made (*[]Event), reported once it commits.
	uncommitted sync.Map
}

// Open returns a Store over db. The engine comes from db's driver name: an
// engine package (github.com/courier-go/courier/store/sqlite or
// .../store/postgres) must be imported, and the driver registered under
// that name must be one the engine works through (another, such as lib/pq
// under "postgres", is CodeConfigInvalid; Migrate refuses it alike). Open
// checks that courier's tables are the ones this courier migrates to and
// were not altered: CodeSchemaOutdated means Migrate must run first, and
// its error names the database's version, the one this courier needs and
// the first of the engine's migration files to apply (on PostgreSQL, when
// it names instead a schema that has courier's tables, the connection's
// search_path must name that schema, or its role be granted USAGE on it);
// it does not migrate.
// A newer courier's schema is served too, unless that
// courier says this one must not run on it (CodeSchemaTooNew; see
// Upgrades in the package documentation). Claims keep checking, and stop
// with schema_altered if the tables are altered later (see Integrity in
// the package documentation).
//
// The Store uses db as it is configured. On PostgreSQL size its pool for
// the work in flight: database/sql keeps two idle connections by default,
// so a worker delivering 16 at once, or a receiver serving many requests,
// would open and close a server connection for most transactions. Give it
// at least the worker's Concurrency plus two, and one more for each Run
// in progress (each holds a connection in LISTEN for its wake-ups, for as
// long as it runs), with as many idle (db.SetMaxOpenConns,
// db.SetMaxIdleConns). A pool with no room left over waits for a
// connection, every transaction of courier's included, and that wait
// costs deliveries: a settle or a release that cannot get one before
// the lease runs out leaves the lease to expire (a claim stamps its
// leases once it has its connection, and client.Worker measures them
// from then); each such lease counts as an attempt (lease_expired), and a delivery
// whose last attempt was sent but not recorded so ends failed though
// its receiver has it. A pool the application's own transactions also
// fill needs that room beyond their peak; a Store on a *sql.DB of its
// own over the same database (the application's transactions still
// enqueue, each on the application's pool) keeps the application's load
// from starving the worker. Wake-ups never
// take a pool's last connection, counting the Runs of every Store opened
// over it: a Run that finds no connection to spare for them says so at
// Warn and polls. A *sql.DB over a pgxpool (stdlib.OpenDBFromPool) has no
// limit database/sql knows of, so nothing stops wake-ups from taking the
// pgxpool's last connection: set its db.SetMaxOpenConns to what courier
// may take of that pool (the pool's MaxConns, less what the application
// holds through the pgxpool directly).
func Open(ctx context.Context, db *sqlx.DB, cfg Config) (*Store, error) {
	return open(ctx, db, cfg, time.Now)
}

// open is Open with the process's clock, which tests skew.
func open(ctx context.Context, db *sqlx.DB, cfg Config, local func() time.Time) (*Store, error) {
	s := &Store{db: db, writer: db, local: local}
	s.life, s.end = context.WithCancel(context.Background())
	if engine.Adopted(db) {
		s.closers = append(s.closers, db.Close)
	}
	if err := s.open(ctx, cfg); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) open(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	d, err := dialectOfDB(s.db)
	if err != nil {
		return err
	}
	s.dialect, s.cfg = d, cfg
	// The fingerprint claims compare with is read before the guard, never
	// after: a newer courier's migration that commits in between then
	// differs from it, and the first claim runs the guard again. Read
	// after, it would be the newer schema's, taken for the one checked.
	// Its error waits for the guard's verdict, which tells a database
	// never migrated (schema_outdated) from a failed one.
	fp, fpErr := fingerprint(ctx, s.db, d)
	if err := checkSchema(ctx, s.db, d); err != nil {
		return unreached(ctx, s.db, d, err)
	}
	if fpErr != nil {
		return fpErr
	}
	if s.file, err = s.databaseFile(ctx); err != nil {
		return err
	}
	switch {
	case s.cfg.Now != nil:
	case d.Clock != nil:
		if s.clock, err = newDBClock(ctx, s.db, d.Clock, s.local); err != nil {
			return d.interpret("open", err)
		}
	default:
		s.cfg.Now = s.local
	}
	s.schema.start(fp, s.now())
	if d.Writer != nil {
		w, owned, err := d.Writer(ctx, s.db, cfg.Durability == DurabilityRelaxed)
		if err != nil {
			return d.interpret("open writer", err)
		}
		if owned {
			s.closers = append([]func() error{w.Close}, s.closers...)
		}
		s.writer, s.oneWriter = w, owned
	}
	s.Outbox = &Outbox{s: s}
	s.Inbox = &Inbox{s: s}
	s.Replay = &ReplayCache{s: s}
	s.Subscriptions = &Subscriptions{s: s}
	s.Endpoints = &Endpoints{s: s}
	s.Contracts = &Contracts{s: s}
	return nil
}

// DB returns the database the Store reads from: the one passed to Open,
// or the pool an engine package's Open made. Write business rows that go
// with courier's through a transaction from Begin. Inside a receiver's
// function, write through the transaction it was given: on SQLite that
// transaction holds the one writer, and a write through DB() fails at once
// with code write_outside_transaction rather than wait for it. Reads
// through DB() go on meanwhile, in a read-only transaction
// (sql.TxOptions{ReadOnly: true}) too: on SQLite it takes no write lock
// and refuses writes.
func (s *Store) DB() *sqlx.DB { return s.db }

// Begin starts a transaction on the connection courier writes through,
// for work that goes with courier's own writes: enqueueing in the
// application's business transaction, and the receivers in package
// handler, which run the application's function in one. On SQLite that is
// a single connection, so concurrent writers queue in Go (database/sql
// hands it to one of them, in no set order) rather than in SQLite's
// sleeping busy handler, and share one warm page cache;
// elsewhere it is DB().BeginTxx, at READ COMMITTED on PostgreSQL whatever
// the database's or role's default (default_transaction_isolation): the
// claims count what other transactions committed up to each statement,
// which a snapshot taken at the first (REPEATABLE READ) would not see,
// and their limits would not hold. Inside the transaction use only the
// transaction. On SQLite a second Begin, or a Store method that writes,
// waits until this one ends; given the context a receiver in package
// handler passes the application's function, or the one
// middleware.Transaction passes the next handler, whose request holds
// such a transaction, they would wait for the request itself: they fail
// at once instead, with code write_outside_transaction. On PostgreSQL
// they run on another connection, outside the transaction: what they
// write commits whether the request's transaction does or not, and each
// such request in flight needs a second connection of the pool, which a
// pool held whole by such requests never frees (until their contexts
// end). On SQLite the connection keeps its temporary storage (statement
// journals, sorts) in memory: write bulk changes in it in batches (see
// package sqlite).
func (s *Store) Begin(ctx context.Context) (*sqlx.Tx, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if err := s.writerHeld(ctx); err != nil {
		return nil, err
	}
	if s.clock != nil {
		// Before the transaction takes a connection: a reading takes one
		// of its own, for a moment, when it is due.
		s.clock.refresh(ctx)
	}
	tx, err := s.writer.BeginTxx(writerctx.WithAsked(ctx, time.Now()), s.dialect.txOptions)
	if err != nil {
		return nil, s.dialect.interpret("begin", err)
	}
	return tx, nil
}

// writerHeld returns writerctx.ErrWriteOutside when ctx's request already
// holds the Store's one writer (see writerctx), which a transaction or
// statement begun on it from ctx would wait for until ctx ends.
func (s *Store) writerHeld(ctx context.Context) error {
	if s.oneWriter && writerctx.Held(ctx) {
		return writerctx.ErrWriteOutside
	}
	return nil
}

// errNoTx is a nil DBTX given to a method that runs in the caller's
// transaction.
var errNoTx = invalidArgument("the transaction is nil: pass the caller's transaction")

// errClosed is every call on a Store after Close.
var errClosed = fmt.Errorf("%w: %w", &coded.Error{Code: courier.CodeDatabaseUnavailable, Msg: "store"}, protocol.ErrClosed)

// runsOn returns why a statement cannot run on x from ctx, if it cannot:
// x is nil (errNoTx), or x is the Store's writer and ctx's request holds
// it (writerHeld). exec, query and scan ask it before every statement.
func (s *Store) runsOn(ctx context.Context, x DBTX) error {
	switch {
	case s.closed.Load():
		return errClosed
	case nilcheck.Nil(x):
		return errNoTx
	case x == DBTX(s.writer):
		return s.writerHeld(ctx)
	}
	return nil
}

// orOwnTx runs write in tx, or for a nil one in a transaction of the
// Store's own (inTx): a method whose transaction is optional writes on its
// own, whole or not at all, and on SQLite waits for the writer as every
// write of courier's does.
func orOwnTx[T any](ctx context.Context, s *Store, tx DBTX, write func(DBTX) (T, error)) (T, error) {
	if !nilcheck.Nil(tx) {
		return write(tx)
	}
	var v T
	err := s.inTx(ctx, func(own *sqlx.Tx) error {
		var err error
		v, err = write(own)
		return err
	})
	return v, err
}

// Close releases what the Store opened itself: the engine's writer
// connection, and the database when an engine package's Open made it. A
// database passed to Open stays open. Every later call on the Store fails
// at once, with code database_unavailable: stop the workers and receivers
// using it first. A worker's Run still going hears of the Close at once,
// sends nothing more, and returns that error (see client.Worker.Run).
func (s *Store) Close() error {
	if !s.closed.Swap(true) && s.end != nil {
		s.end() // the workers waiting for a wake-up, a poll or the database hear of it at once
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Engine names the store's engine: "sqlite" or "postgres".
func (s *Store) Engine() string { return s.dialect.Name }

// now is the store's clock in unix microseconds (see Config.Now).
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock.now().UnixMicro()
	}
	return s.cfg.Now().UnixMicro()
}

// q returns the named query of the store's dialect.
func (s *Store) q(name string) *query { return s.dialect.query(name) }

// asking returns ctx marked, for a statement on the Store's writer, with
// the moment it asks for the writer (see writerctx.WithAsked).
func (s *Store) asking(ctx context.Context, x DBTX) context.Context {
	if x == DBTX(s.writer) {
		return writerctx.WithAsked(ctx, time.Now())
	}
	return ctx
}

// exec runs a named query on x. x is a DBTX, or also an engine.Tx (an
// engine's own client's transaction; see engine.Tx), which then runs it:
// exec, query and scan are the one way every statement of the store is
// run, so both kinds of transaction take the same path.
func (s *Store) exec(ctx context.Context, x DBTX, name string, args map[string]any) (sql.Result, error) {
	if err := s.runsOn(ctx, x); err != nil {
		return nil, err
	}
	ctx = s.asking(ctx, x)
	q := s.q(name)
	if q.text == "" {
		return nativeResult(0), nil // nothing to do on this engine
	}
	if n, ok := x.(engine.Tx); ok {
		affected, err := n.Exec(ctx, q.text, q.args(args))
		return nativeResult(affected), s.interpret(ctx, name, err)
	}
	res, err := x.ExecContext(ctx, q.text, q.args(args)...)
	return res, s.interpret(ctx, name, err)
}

// interpret is the dialect's interpret for a statement run with ctx. A
// transaction that ended while ctx had not is the caller's, used after
// its Commit or Rollback, or after the context it began with ended (a
// request's, say, with the statement made under another): not a database
// that is down (errTxEnded). A transaction database/sql ended because
// ctx itself ended is the context's end, as before.
func (s *Store) interpret(ctx context.Context, name string, err error) error {
	if err != nil && ctx.Err() == nil && (errors.Is(err, sql.ErrTxDone) || s.dialect.Interpret(err).Kind == engine.Ended) {
		return fmt.Errorf("store: %s: %w: %w", name, errTxEnded, err)
	}
	return s.dialect.interpret(name, err)
}

// errTxEnded is a statement run in a transaction that has ended.
var errTxEnded = invalidArgument("the transaction has ended (committed, rolled back, or ended with the context it began with): make courier's calls in it before its Commit")

// nativeResult is an engine.Tx's result: rows affected only, as every
// engine whose statements return ids by RETURNING reports.
type nativeResult int64

func (r nativeResult) RowsAffected() (int64, error) { return int64(r), nil }
func (nativeResult) LastInsertId() (int64, error) {
	return 0, errors.New("store: the engine reports no last insert id")
}

// query runs a named query on x (see exec) and returns its rows.
func (s *Store) query(ctx context.Context, x DBTX, name string, args map[string]any) (engine.Rows, error) {
	if err := s.runsOn(ctx, x); err != nil {
		return nil, err
	}
	ctx = s.asking(ctx, x)
	q := s.q(name)
	if n, ok := x.(engine.Tx); ok {
		rows, err := n.Query(ctx, q.text, q.args(args))
		return rows, s.interpret(ctx, name, err)
	}
	rows, err := x.QueryContext(ctx, q.text, q.args(args)...) //nolint:rowserrcheck // the caller's scan checks Err (scanAll, scanOne)
	if err != nil {
		return nil, s.interpret(ctx, name, err)
	}
	return rows, nil
}

// selectRows runs a named query on x and scans every row into dest, a
// pointer to a slice of structs whose db tags name the query's columns, or
// of single values for a one-column query.
func (s *Store) selectRows(ctx context.Context, x DBTX, name string, args map[string]any, dest any) error {
	rows, err := s.query(ctx, x, name, args)
	if err != nil {
		return err
	}
	return s.interpret(ctx, name, scanAll(rows, dest))
}

// scanAll scans rows into dest (see selectRows) and closes them.
func scanAll(rows engine.Rows, dest any) error {
	slice := reflect.ValueOf(dest).Elem()
	if slice.Type().Elem().Kind() == reflect.Struct {
		return sqlx.StructScan(rows, dest) // closes rows
	}
	defer rows.Close()
	for rows.Next() {
		v := reflect.New(slice.Type().Elem())
		if err := rows.Scan(v.Interface()); err != nil {
			return err
		}
		slice.Set(reflect.Append(slice, v.Elem()))
	}
	if err := rows.Close(); err != nil {
		return err
	}
	return rows.Err()
}

// getRow runs a named query whose result is at most one row and scans
// it into a struct whose db tags name the query's columns; no row is
// CodeNotFound.
func getRow[T any](ctx context.Context, s *Store, x DBTX, name string, args map[string]any) (T, error) {
	var rows []T
	if err := s.selectRows(ctx, x, name, args, &rows); err != nil || len(rows) == 0 {
		var zero T
		if err == nil {
			err = errNotFound
		}
		return zero, err
	}
	return rows[0], nil
}

// scan runs a named query whose result is one row and scans its columns
// into dest, in order; no row is sql.ErrNoRows.
func (s *Store) scan(ctx context.Context, x DBTX, name string, args map[string]any, dest ...any) error {
	if err := s.runsOn(ctx, x); err != nil {
		return err
	}
	ctx = s.asking(ctx, x)
	if _, ok := x.(engine.Tx); ok {
		rows, err := s.query(ctx, x, name, args)
		if err != nil {
			return err
		}
		return s.interpret(ctx, name, scanOne(rows, dest))
	}
	q := s.q(name)
	return s.interpret(ctx, name, x.QueryRowContext(ctx, q.text, q.args(args)...).Scan(dest...))
}

// scanOne scans the first of rows into dest, as sql.Row does, and closes
// them.
func scanOne(rows engine.Rows, dest []any) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// inTx runs fn in a transaction of its own on the writer, committed when
// fn returns nil. Claims and settles run here: the database's clock, when
// it is the store's, is read again first once its reading is old (Begin).
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	var moves []Event
	s.uncommitted.Store(tx, &moves)
	defer s.uncommitted.Delete(tx)
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := s.dialect.interpret("commit", tx.Commit()); err != nil {
		return err
	}
	for _, e := range moves {
		s.observe(e)
	}
	return nil
}

// wake tells listening workers that deliveries became due by other means
// than an insert, which wakes them itself. Best effort: a worker that
// misses it finds them at its next poll.
func (s *Store) wake(ctx context.Context) {
	if s.dialect.Wake != nil {
		_ = s.dialect.Wake(ctx, s.db)
	}
}

// micros converts a time to the stored form; the zero time stays zero.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// ceilMicros is micros rounded up to the next microsecond when t has a
// part below one: the least stored time not before t.
func ceilMicros(t time.Time) int64 {
	us := micros(t)
	if !t.IsZero() && t.Nanosecond()%1000 != 0 {
		us++ // micros rounds down: a time's nanoseconds are never negative
	}
	return us
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
// Its rows are structs of numbers and strings, which always encode.
func jsonArg(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("store: a batch parameter does not encode: " + err.Error())
	}
	return string(b)
}

// wrapf annotates a store error without hiding its code.
func wrapf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("store: "+format+": %w", append(args, err)...)
}

// isNoRows reports whether err says a query returned no row.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// databaseFile is the file a Store's database lives in, and its identity
// when the Store opened it.
type databaseFile struct {
	path string
	info os.FileInfo // nil: not a file (PostgreSQL, SQLite in memory)
}

// gone reports whether the file the Store opened is no longer at f's
// path: removed, or replaced. Never for a database that is not a file.
func (f databaseFile) gone() bool {
	if f.info == nil {
		return false
	}
	now, err := os.Stat(f.path)
	return err != nil || !os.SameFile(f.info, now)
}

// databaseFile records the database's file, on an engine that has one.
func (s *Store) databaseFile(ctx context.Context) (databaseFile, error) {
	var f databaseFile
	if s.q("schema_database_file").text == "" {
		return f, nil
	}
	if err := s.scan(ctx, s.db, "schema_database_file", nil, &f.path); err != nil || f.path == "" {
		return databaseFile{}, err
	}
	info, err := os.Stat(f.path)
	if err != nil {
		return databaseFile{}, fmt.Errorf("store: the database file: %w: %w", errUnavailable, err)
	}
	f.info = info
	return f, nil
}

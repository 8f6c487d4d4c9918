// Package crash proves courier's end-to-end promise under SIGKILL: every
// notification whose business transaction committed is processed by the
// receiver exactly once, none is lost, and none is sent for a transaction
// that rolled back, however often the sender and receiver processes die.
//
// The test (crash_test.go) runs the test binary again as two kinds of
// child process, told what to do by their environment (Spec):
//
//   - a sender (RunSender): it enqueues the notifications 0..N-1 in
//     business transactions of their own, idempotently, so a restarted
//     sender writes what its predecessor committed again as no-ops, and
//     runs one the database ended busy again, as an application would,
//     while a client.Worker delivers the outbox;
//   - a receiver (RunReceiver): handler.NewReceiver of ack.Terminal over its own inbox
//     database, on a fixed loopback address, whose application function
//     writes an effect row in the receiver's transaction. It can be told
//     to kill itself, at random, after such a transaction committed and
//     before the sender sees the answer.
//
// The parent kills them with SIGKILL at seeded random moments, restarts
// them, lets them finish and then reads the truth from the databases. This
// file holds what both sides share.
package crash

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/sqlfile"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// Engines the harness runs on.
const (
	EngineSQLite   = "sqlite"
	EnginePostgres = "postgres"
)

// Roles of a child process.
const (
	RoleSender   = "sender"
	RoleReceiver = "receiver"
)

// Lines a child process writes. ReadyLine goes to stdout once the child
// serves or delivers; SelfKillLine goes to stderr just before a receiver
// kills itself after a commit, so the parent can tell that death from a
// crash.
const (
	ReadyLine    = "courier-crash ready"
	SelfKillLine = "courier-crash: killing myself after a commit"
)

// Settings of the sender's worker: short leases and timeouts so that the
// deliveries a killed sender held are retried within a second or two.
const (
	WorkerConcurrency = 8
	WorkerLease       = time.Second
	WorkerTimeout     = 400 * time.Millisecond
	WorkerPoll        = 50 * time.Millisecond
)

// StoreConfig is the sender's outbox configuration: an endpoint breaker
// that opens on the failures a killed receiver causes but probes again
// after a short cool-down, and an attempt budget no run of kills
// exhausts, so that every committed notification must end succeeded.
var StoreConfig = store.Config{
	MaxAttempts: 200,
	Breaker:     store.BreakerConfig{Cooldown: 100 * time.Millisecond},
}

// WorkerBackoff retries quickly, and from the tenth attempt of a delivery
// on a second later for each attempt more, up to ten: a command's budget
// is its source_max_attempts, at most 20, and a receiver down again and
// again on a loaded machine, probed through its breaker every cool-down,
// spent a command's whole budget (a command failed for good in CI's runs
// of TestCrashControl under -race, with a flat second from the tenth
// attempt too). Its last ten attempts now span about a minute, longer
// than any kill phase, and no wait comes near the drain's stall bound.
func WorkerBackoff(attempt int, retryAfter time.Duration) time.Duration {
	d := quickBackoff(attempt, retryAfter)
	if attempt >= 10 {
		d += time.Duration(min(attempt-9, 10)) * time.Second
	}
	return d
}

var quickBackoff = client.ExponentialBackoff(20*time.Millisecond, 250*time.Millisecond, 0.2)

// SenderName is the verified sender the receiver dedupes under.
const SenderName = "crash-sender"

// rollbackRate is the share of business transactions that roll back after
// enqueueing (see RolledBack).
const rollbackRate = 0.1

// Environment of a child process.
const (
	envRole          = "COURIER_CRASH_ROLE"
	envEngine        = "COURIER_CRASH_ENGINE"
	envDatabase      = "COURIER_CRASH_DATABASE"
	envAddr          = "COURIER_CRASH_ADDR"
	envSecret        = "COURIER_CRASH_SECRET"
	envN             = "COURIER_CRASH_N"
	envSeed          = "COURIER_CRASH_SEED"
	envIncarnation   = "COURIER_CRASH_INCARNATION"
	envEnqueueWindow = "COURIER_CRASH_ENQUEUE_WINDOW"
	envSelfKill      = "COURIER_CRASH_SELF_KILL"
	envMode          = "COURIER_CRASH_MODE"
	envFlaky         = "COURIER_CRASH_FLAKY"
)

// Spec is what a child process is told through its environment.
type Spec struct {
	Role     string // RoleSender or RoleReceiver
	Engine   string // EngineSQLite or EnginePostgres
	Database string // the child's own database: a file path (SQLite) or a URL (PostgreSQL)
	Addr     string // the receiver's fixed address, 127.0.0.1:port
	Secret   string // Standard Webhooks secret shared by both ends
	N        int    // notifications 0..N-1
	Seed     uint64 // the run's seed
	// Incarnation counts the starts of this role, from 0; it names the
	// sender's worker and seeds the receiver's self-kill draws.
	Incarnation int
	// EnqueueWindow spreads the sender's new enqueues over about this
	// long, so that kills land while enqueueing too. Zero enqueues at once.
	EnqueueWindow time.Duration
	// SelfKill is the probability that the receiver kills itself after
	// committing a notification, before answering. Zero never.
	SelfKill float64
	// Mode is "" for the terminal-only run or ModeControl for the delivery
	// control run (control.go).
	Mode string
	// Flaky is, in ModeControl, the probability that the receiver answers
	// a request 503 before processing it (besides its outage windows).
	Flaky float64
}

// Environ returns s as environment entries.
func (s Spec) Environ() []string {
	return []string{
		envRole + "=" + s.Role,
		envEngine + "=" + s.Engine,
		envDatabase + "=" + s.Database,
		envAddr + "=" + s.Addr,
		envSecret + "=" + s.Secret,
		envN + "=" + strconv.Itoa(s.N),
		envSeed + "=" + strconv.FormatUint(s.Seed, 10),
		envIncarnation + "=" + strconv.Itoa(s.Incarnation),
		envEnqueueWindow + "=" + s.EnqueueWindow.String(),
		envSelfKill + "=" + strconv.FormatFloat(s.SelfKill, 'g', -1, 64),
		envMode + "=" + s.Mode,
		envFlaky + "=" + strconv.FormatFloat(s.Flaky, 'g', -1, 64),
	}
}

// SpecFromEnv reads this process's Spec. ok is false when the process is
// not a child of the harness.
func SpecFromEnv() (s Spec, ok bool, err error) {
	s.Role = os.Getenv(envRole)
	if s.Role == "" {
		return Spec{}, false, nil
	}
	s.Engine, s.Database, s.Addr, s.Secret = os.Getenv(envEngine), os.Getenv(envDatabase), os.Getenv(envAddr), os.Getenv(envSecret)
	var errs []error
	num := func(name string, parse func(string) error) {
		if err := parse(os.Getenv(name)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	num(envN, func(v string) (err error) { s.N, err = strconv.Atoi(v); return })
	num(envSeed, func(v string) (err error) { s.Seed, err = strconv.ParseUint(v, 10, 64); return })
	num(envIncarnation, func(v string) (err error) { s.Incarnation, err = strconv.Atoi(v); return })
	num(envEnqueueWindow, func(v string) (err error) { s.EnqueueWindow, err = time.ParseDuration(v); return })
	num(envSelfKill, func(v string) (err error) { s.SelfKill, err = strconv.ParseFloat(v, 64); return })
	s.Mode = os.Getenv(envMode)
	num(envFlaky, func(v string) (err error) { s.Flaky, err = strconv.ParseFloat(v, 64); return })
	switch {
	case s.Role != RoleSender && s.Role != RoleReceiver:
		errs = append(errs, fmt.Errorf("%s: unknown role %q", envRole, s.Role))
	case s.Engine != EngineSQLite && s.Engine != EnginePostgres:
		errs = append(errs, fmt.Errorf("%s: unknown engine %q", envEngine, s.Engine))
	case s.Mode != "" && s.Mode != ModeControl:
		errs = append(errs, fmt.Errorf("%s: unknown mode %q", envMode, s.Mode))
	case s.Database == "" || s.Addr == "" || s.Secret == "":
		errs = append(errs, errors.New("crash: child environment incomplete"))
	}
	return s, true, errors.Join(errs...)
}

// Endpoint returns the URL the sender delivers to.
func (s Spec) Endpoint() string { return "http://" + s.Addr + "/terminal" }

// Guard returns the SSRF guard of the sender: plain http to exactly
// 127.0.0.1 on the receiver's port, nothing else.
func Guard(addr string) (client.Guard, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr() != netip.MustParseAddr("127.0.0.1") {
		return client.Guard{}, fmt.Errorf("crash: receiver address %q is not 127.0.0.1:port", addr)
	}
	return client.Guard{
		AllowHTTP:     true,
		AllowPorts:    []uint16{ap.Port()},
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}, nil
}

// terminalStatuses are the values of ack.Terminal.TerminalStatus.
var terminalStatuses = []string{
	"cancelled", "deleted", "deletion_failed", "localization_failed",
	"publication_blocked", "publication_failed", "published", "superseded",
}

// Notification returns the i-th terminal notification of the run with
// the given seed and its payload bytes. The same (seed, i) gives the same
// notification in every process.
func Notification(seed uint64, i int) (ack.Terminal, []byte, error) {
	statuses := terminalStatuses
	status := statuses[i%len(statuses)]
	var lifecycle *string
	if status != "cancelled" && status != "superseded" {
		l := ack.Digest([]byte("lifecycle-" + strconv.Itoa(i)))
		lifecycle = &l
	}
	n, err := ack.NewTerminal(ack.Terminal{
		EventID:                fmt.Sprintf("crash-%d-%d", seed, i),
		SiteID:                 "site-1",
		PlanID:                 "plan-" + strconv.Itoa(i),
		WebsiteVersion:         "v1",
		SourceSequence:         json.Number(strconv.Itoa(i + 1)),
		JobCount:               json.Number(strconv.Itoa(1 + i%3)),
		ChangeSHA256:           ack.Digest([]byte("change-" + strconv.Itoa(i))),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")),
		TerminalStatus:         status,
		LifecycleSHA256:        lifecycle,
	})
	if err != nil {
		return ack.Terminal{}, nil, err
	}
	payload, err := n.Payload()
	return n, payload, err
}

// RolledBack reports whether the business transaction of notification i
// rolls back after enqueueing it, in every incarnation of the sender: its
// notification must never be sent.
func RolledBack(seed uint64, i int) bool {
	return rand.New(rand.NewPCG(seed, uint64(i))).Float64() < rollbackRate
}

// Open opens the store of a child or the parent: OpenSQLite (which
// migrates) for SQLite, store.Open over pgx for PostgreSQL (migrated by
// Prepare).
func Open(ctx context.Context, engine, database string, cfg store.Config) (*store.Store, error) {
	switch engine {
	case EngineSQLite:
		return sqlite.Open(ctx, database, cfg)
	case EnginePostgres:
		db, err := sqlx.Open(postgres.DriverName, database)
		if err != nil {
			return nil, fmt.Errorf("crash: open: %w", err)
		}
		st, err := store.Open(ctx, db, cfg)
		if err != nil {
			db.Close()
			return nil, err
		}
		return st, nil
	}
	return nil, fmt.Errorf("crash: unknown engine %q", engine)
}

// open opens what both processes of a run need: the store, the engine's
// queries and the shared signing key.
func (s Spec) open(ctx context.Context) (*store.Store, map[string]string, signature.StandardWebhooksKey, error) {
	var key signature.StandardWebhooksKey
	st, err := Open(ctx, s.Engine, s.Database, s.StoreConfig())
	if err != nil {
		return nil, nil, key, err
	}
	q, err := Queries(s.Engine)
	if err == nil {
		key, err = signature.ParseStandardWebhooksKey("crash", s.Secret)
	}
	if err != nil {
		Close(st)
		return nil, nil, key, err
	}
	return st, q, key, nil
}

// Close closes what Open opened.
func Close(st *store.Store) error {
	if st.Engine() == EnginePostgres {
		return st.DB().Close()
	}
	return st.Close()
}

// Prepare migrates the database and creates the harness's application
// table of role in it, before any child starts.
func Prepare(ctx context.Context, engine, database, role string) error {
	driver := sqlite.DriverName
	dsn := sqlite.DSN(database, store.DurabilityFull)
	if engine == EnginePostgres {
		driver, dsn = postgres.DriverName, database
	}
	db, err := sqlx.Open(driver, dsn)
	if err != nil {
		return fmt.Errorf("crash: open: %w", err)
	}
	defer db.Close()
	if err := store.Migrate(ctx, db); err != nil {
		return err
	}
	q, err := Queries(engine)
	if err != nil {
		return err
	}
	tables := []string{"create_effects", "create_control_effects"}
	if role == RoleSender {
		tables = []string{"create_orders"}
	}
	for _, table := range tables {
		if _, err := db.ExecContext(ctx, q[table]); err != nil {
			return fmt.Errorf("crash: %s: %w", table, err)
		}
	}
	return nil
}

//go:embed sql
var sqlFiles embed.FS

// queryNames are the statements every dialect file defines.
var queryNames = []string{
	"create_orders", "insert_order", "committed_orders", "count_orders",
	"create_effects", "insert_effect", "count_effects",
	"outbox_rows", "leases_held", "succeeded_attempts", "attempt_outcomes",
	"create_control_effects", "insert_control_effect", "control_effects",
	"outbox_deliveries", "ordering_keys_left", "attempt_numbers", "count_attempts",
	"inbox_records", "held_without_key",
}

// Queries returns the harness's statements for engine by name, from
// sql/<engine>.sql (see package sqlfile).
func Queries(engine string) (map[string]string, error) {
	b, err := sqlFiles.ReadFile("sql/" + engine + ".sql")
	if err != nil {
		return nil, fmt.Errorf("crash: no SQL for engine %q", engine)
	}
	queries, err := sqlfile.Parse(string(b))
	if err == nil {
		err = sqlfile.Require(queries, queryNames...)
	}
	if err != nil {
		return nil, fmt.Errorf("crash: %s.sql: %w", engine, err)
	}
	return queries, nil
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// engine is one store engine under measurement: SQLite files in a
// temporary folder, or databases on one PostgreSQL server.
type engine struct {
	name     string // "sqlite" or "postgres"
	dir      string // sqlite: the folder of the database files
	adminURL string // postgres: the server's admin URL
	about    string // postgres: the server's version and where it came from, for the report
	pool     int    // postgres: connection pool size (open and idle); 0 leaves database/sql's defaults
	// durability is the SQLite commit setting of the stores opened: the
	// store's default (Full) unless a figure compares the two.
	durability store.Durability

	mu     sync.Mutex
	opened []*database
	large  *database // the 1M-row outbox shared by the claim and memory figures
}

// database is one courier Store on an engine, with a handle for bulk
// fills.
type database struct {
	engine string
	label  string
	s      *store.Store
	db     *sqlx.DB // the Store's database
	// bulk fills the outbox: on SQLite a connection of the plain go-sqlite3
	// driver, so that a million inserted rows do not each call the
	// commit-hook driver's Go update hook; on PostgreSQL the same as db.
	bulk  *sqlx.DB
	close func()
}

// open creates a fresh, migrated database named label.
func (e *engine) open(ctx context.Context, label string) (*database, error) {
	d := &database{engine: e.name, label: label}
	switch e.name {
	case "sqlite":
		path := filepath.Join(e.dir, label+".db")
		s, err := sqlite.Open(ctx, path, store.Config{Durability: e.durability})
		if err != nil {
			return nil, err
		}
		bulk, err := sqlx.Open("sqlite3", sqlite.DSN(path, store.DurabilityFull))
		if err != nil {
			s.Close()
			return nil, err
		}
		bulk.SetMaxOpenConns(1)
		d.s, d.db, d.bulk = s, s.DB(), bulk
		d.close = func() { bulk.Close(); s.Close() }
	case "postgres":
		url, drop, err := pgtest.NewDatabase(ctx, e.adminURL)
		if err != nil {
			return nil, err
		}
		db, err := sqlx.Open(postgres.DriverName, url)
		if err != nil {
			return nil, err
		}
		if e.pool > 0 {
			db.SetMaxOpenConns(e.pool)
			db.SetMaxIdleConns(e.pool)
		}
		if err := store.Migrate(ctx, db); err != nil {
			db.Close()
			return nil, err
		}
		s, err := store.Open(ctx, db, store.Config{})
		if err != nil {
			db.Close()
			return nil, err
		}
		d.s, d.db, d.bulk = s, db, db
		d.close = func() {
			db.Close()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = drop(ctx)
		}
	default:
		return nil, fmt.Errorf("unknown engine %q", e.name)
	}
	e.mu.Lock()
	e.opened = append(e.opened, d)
	e.mu.Unlock()
	return d, nil
}

// closeAll closes every database the engine opened.
func (e *engine) closeAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, d := range e.opened {
		d.close()
	}
	e.opened, e.large = nil, nil
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// largeOutbox returns the engine's outbox of n due rows for endpoint,
// filled on first use (the claim and memory figures share it).
func (e *engine) largeOutbox(ctx context.Context, n int, endpoint string) (*database, time.Duration, error) {
	e.mu.Lock()
	d := e.large
	e.mu.Unlock()
	if d != nil {
		return d, 0, nil
	}
	d, err := e.open(ctx, "large")
	if err != nil {
		return nil, 0, err
	}
	took, err := d.fill(ctx, "l-", n, endpoint, benchPayload)
	if err != nil {
		return nil, 0, err
	}
	e.mu.Lock()
	e.large = d
	e.mu.Unlock()
	return d, took, nil
}

// fillSQL inserts n due rows into courier_outbox in one statement, with
// the columns Enqueue would write. The payload is the same for every row;
// its digest is computed in Go. Parameters: n, id prefix, endpoint,
// payload, payload digest, next_attempt_at, deadline, created_at base,
// updated_at. SQLite keeps payloads in a table of their own (migration
// 13): fillPayloadSQL writes them there after.
var fillSQL = map[string]string{
	"sqlite": `WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < ?1)
INSERT INTO courier_outbox (notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
SELECT ?2 || x, ?3, '', ?5, 'courier', '', 'pending', 0, 0, 8, ?6, ?7, ?8 + x, ?9 FROM seq`,
	"postgres": `INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
SELECT $2::text || g, $3, $4, '', $5, 'courier', '', 'pending', 0, 0, 8, $6, $7, $8::bigint + g, $9
FROM generate_series(1, $1::int) AS g`,
}

// fill adds n due deliveries of payload to endpoint, with notification
// ids prefix1..prefixN, then refreshes the planner's statistics. It
// returns how long that took.
func (d *database) fill(ctx context.Context, prefix string, n int, endpoint string, payload []byte) (time.Duration, error) {
	start := time.Now()
	sum := sha256.Sum256(payload)
	now := time.Now().UnixMicro()
	due := now - time.Second.Microseconds()
	deadline := now + retryHorizon.Microseconds()
	if _, err := d.bulk.ExecContext(ctx, fillSQL[d.engine], n, prefix, endpoint, payload, hex.EncodeToString(sum[:]),
		due, deadline, now-int64(n), now); err != nil {
		return 0, fmt.Errorf("fill %s with %d rows: %w", d.label, n, err)
	}
	if err := d.fillPayloads(ctx, payload); err != nil {
		return 0, err
	}
	if err := d.analyze(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// fillPayloadSQL gives every delivery without a payload the payload its
// one parameter binds,
// where the engine keeps payloads apart from their rows (SQLite,
// migration 13); elsewhere the fill wrote them in the rows.
var fillPayloadSQL = map[string]string{"sqlite": benchkit.FillPayloadsSQL}

// fillPayloads runs fillPayloadSQL, if the engine has one.
func (d *database) fillPayloads(ctx context.Context, payload []byte) error {
	q, ok := fillPayloadSQL[d.engine]
	if !ok {
		return nil
	}
	if _, err := d.bulk.ExecContext(ctx, q, payload); err != nil {
		return fmt.Errorf("fill %s payloads: %w", d.label, err)
	}
	return nil
}

// analyze refreshes the planner's statistics (and, on PostgreSQL, clears
// dead row versions out of the indexes).
func (d *database) analyze(ctx context.Context) error {
	q := "ANALYZE"
	if d.engine == "postgres" {
		q = "VACUUM (ANALYZE) courier_outbox"
	}
	if _, err := d.bulk.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s %s: %w", q, d.label, err)
	}
	return nil
}

// releaseLeases puts every leased row back to pending, as if never
// claimed.
func (d *database) releaseLeases(ctx context.Context) error {
	_, err := d.db.ExecContext(ctx, `UPDATE courier_outbox SET status = 'pending', attempts = 0, lease_owner = NULL,
		lease_token = NULL, leased_at = NULL, lease_expires_at = NULL WHERE status = 'leased'`)
	return err
}

// openEngines prepares the engines named (benchkit.OpenEngines), each
// PostgreSQL one with a pool of pgPool connections.
func openEngines(ctx context.Context, names []string, pgPool int) ([]*engine, []string, func(), error) {
	return benchkit.OpenEngines(ctx, names, func(k benchkit.Engine) *engine {
		return &engine{name: k.Name, dir: k.Dir, adminURL: k.AdminURL, about: k.About, pool: pgPool}
	})
}

package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/store/internal/engine"
)

//go:embed sql
var sqlFiles embed.FS

// DriverName is the database/sql driver name of pgx's stdlib driver,
// which importing this package registers.
const DriverName = "pgx"

var pgEngine = &engine.Engine{
	Name:        "postgres",
	Driver:      isPgx,
	SQL:         must(fs.Sub(sqlFiles, "sql")),
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	Interpret:   interpret,
	Listen:      listen,
	Wake:        wake,
	Isolation:   sql.LevelReadCommitted, // see store.Store.Begin
	Clock:       clock,
	InTx:        inTx,
	// The schema guard on claim reads the catalog: at most once per
	// interval, so an altered schema stops claims within it.
	SchemaRecheck: 10 * time.Second,
	// listen holds a connection in LISTEN: never the pool's last one.
	ListenHoldsConn: true,
}

func init() {
	for _, d := range []string{"pgx", "pgx/v5", "postgres"} {
		engine.Register(d, pgEngine)
	}
}

// isPgx reports whether a pool named name, of driver d, is one of pgx's:
// under "postgres", lib/pq's name too, d must be pgx's own driver. Under
// pgx's names any driver is taken for pgx's, so that one wrapped for
// instrumentation serves (its wake-ups fall back to polling if it hides
// pgx's connections).
func isPgx(name string, d driver.Driver) bool {
	if name != "postgres" {
		return true
	}
	_, ok := d.(*stdlib.Driver)
	return ok
}

func must(f fs.FS, err error) fs.FS {
	if err != nil {
		panic(err) // the embedded tree has a sql directory
	}
	return f
}

// errConnString stands for pgx's error about a connection string it
// cannot parse: pgx quotes the string, hiding its password only as far as
// it can tell where the password ends (not when it holds an @, say).
var errConnString = errors.New("postgres: the pool's connection string cannot be parsed (not shown: it may hold a password)")

// errPreparedBehindPooler explains a statement prepared by name that
// the server has already, or has not: pgx's default query exec mode
// (cache_statement) prepares each statement once per connection, and a
// transaction-mode pooler runs the connection's next transaction on a
// server connection where another client prepared it, or none did.
var errPreparedBehindPooler = errors.New("a statement pgx prepared on one server connection met another: behind a transaction-mode pooler (PgBouncer, RDS Proxy, Supavisor), set default_query_exec_mode=simple_protocol in the connection URL, which prepares none")

// interpret reads PostgreSQL's SQLSTATE codes, and keeps a connection
// string out of the store's errors.
func interpret(err error) engine.Failure {
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return engine.Failure{Kind: engine.Unavailable, Err: errConnString}
	}
	if errors.Is(err, pgx.ErrTxClosed) { // an application's pgx.Tx (see Enqueue), used after its Commit or Rollback
		return engine.Failure{Kind: engine.Ended}
	}
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return engine.Failure{}
	}
	switch {
	case e.Code == "40001" || e.Code == "40P01" || e.Code == "55P03": // serialization, deadlock, lock not available
		return engine.Failure{Kind: engine.Busy}
	case e.Code == "25006": // read_only_sql_transaction
		return engine.Failure{Kind: engine.ReadOnly}
	case e.Code == "25P02": // in_failed_sql_transaction: a statement before this one failed
		return engine.Failure{Kind: engine.Aborted}
	case e.Code == "42P01": // undefined_table
		return engine.Failure{Kind: engine.Missing}
	case e.Code == "42501": // insufficient_privilege
		return engine.Failure{Kind: engine.Denied}
	case strings.HasPrefix(e.Code, "23"): // integrity constraint violation
		return engine.Failure{Kind: engine.Constraint, Constraint: e.ConstraintName}
	case e.Code == "P0001": // raise_exception: a trigger refused the row (on SQLite its RAISE(ABORT) is a constraint too); its message may hold values
		return engine.Failure{Kind: engine.Constraint, Constraint: "raise_exception"}
	case e.Code == "42P05" || e.Code == "26000": // duplicate_prepared_statement, invalid_sql_statement_name: the engine prepares none by name; pgx's statement cache does
		return engine.Failure{Kind: engine.Unavailable, Err: fmt.Errorf("%w: %w", e, errPreparedBehindPooler)}
	case strings.HasPrefix(e.Code, "08"), strings.HasPrefix(e.Code, "53"), strings.HasPrefix(e.Code, "58"), // connection, insufficient resources (disk full, out of memory), system (I/O)
		e.Code == "57P01" || e.Code == "57P02" || e.Code == "57P03": // admin shutdown, crash shutdown, cannot connect now
		return engine.Failure{Kind: engine.Unavailable}
	}
	return engine.Failure{}
}

// inTx reports whether a pgx connection is in a transaction: begun with
// database/sql's BeginTx or a BEGIN of its own, or failed in one ('T',
// 'E'; 'I' is idle).
func inTx(dc any) bool {
	c, ok := dc.(*stdlib.Conn)
	return ok && c.Conn().PgConn().TxStatus() != 'I'
}

// clock reads the server's clock: clock_timestamp, the time now, not the
// transaction's start as now() would be.
func clock(ctx context.Context, db *sqlx.DB) (time.Time, error) {
	var us int64
	err := db.QueryRowContext(ctx, "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint").Scan(&us)
	return time.UnixMicro(us), err
}

// channel is the channel outbox_enqueue notifies on commit.
const channel = "courier_outbox"

// wake notifies the channel the workers listen on, in every process.
func wake(ctx context.Context, db *sqlx.DB) error {
	_, err := db.ExecContext(ctx, "SELECT pg_notify('"+channel+"', '')")
	return err
}

// direct refuses a connection that goes through a pooler (PgBouncer, and
// the like, in any pool mode), before it LISTENs: the server process its
// statements run on is not the one it was given when it connected, whose
// process id a pooler makes up, as it answers cancel requests itself. In
// transaction mode a LISTEN runs on whichever server connection the
// pooler lends for it, and stays there once the pooler hands that
// connection to other clients: no notification reaches the worker, whose
// client waits on no server connection, and each one lands in a
// connection of another client, where pgx keeps it unread for as long as
// the connection lives. A session-mode pooler would keep the LISTEN, but
// no client can tell the two modes apart: the worker polls behind either.
func direct(ctx context.Context, conn *sql.Conn) error {
	var server int64
	if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&server); err != nil {
		return err
	}
	var given uint32
	if err := conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return errors.New("store: not a pgx connection")
		}
		given = c.Conn().PgConn().PID()
		return nil
	}); err != nil {
		return err
	}
	if int64(given) != server {
		return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "postgres: no wake-ups through a connection pooler " +
			"(the server process differs from the one the connection was given): the worker polls; " +
			"open the Store of a process that runs a worker on a direct connection to the server for wake-ups"}
	}
	return nil
}

// listen holds one connection in LISTEN and turns its notifications into
// wake-ups. When the connection fails the channel is closed: the worker
// falls back to polling and listens again later.
func listen(ctx context.Context, db *sqlx.DB) (<-chan struct{}, func(), error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := direct(ctx, conn); err != nil {
		conn.Close()
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "LISTEN "+channel); err != nil {
		conn.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		_ = conn.Raw(func(dc any) error {
			c, ok := dc.(*stdlib.Conn)
			if !ok {
				return errors.New("store: not a pgx connection")
			}
			for {
				if _, err := c.Conn().WaitForNotification(ctx); err != nil {
					return err
				}
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		})
		// The connection is still LISTENing, or was interrupted mid-wait:
		// it must not serve anyone again. database/sql drops a connection
		// that says it is bad, but a pgxpool's (stdlib.OpenDBFromPool)
		// goes back to that pool, which keeps it unless it is closed:
		// there it would stay LISTENing, its notifications unread and
		// the server's queue of them held back. So it is closed first.
		_ = conn.Raw(func(dc any) error {
			if c, ok := dc.(*stdlib.Conn); ok {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = c.Conn().Close(ctx)
			}
			return driver.ErrBadConn
		})
		conn.Close()
	}()
	return ch, func() { cancel(); <-done }, nil
}

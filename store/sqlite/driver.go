package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/writerctx"
)

// sqliteDriver is go-sqlite3 as courier opens it (DriverName). Its
// connections wake workers when an enqueue commits (hookCommits); are
// dropped once SQLite finds their database read-only, so the next use
// opens the file afresh; and, in the pools applications use, refuse a
// write from a request whose transaction holds the writer, which would
// otherwise wait for that very transaction until the busy timeout.
type sqliteDriver struct{ base *sqlite3.SQLiteDriver }

var courierDriver = &sqliteDriver{base: &sqlite3.SQLiteDriver{ConnectHook: hookCommits}}

// Open opens a connection of an application's pool.
func (d *sqliteDriver) Open(dsn string) (driver.Conn, error) {
	return d.connect(dsn, false)
}

// OpenConnector returns the connector of an application's pool.
func (d *sqliteDriver) OpenConnector(dsn string) (driver.Connector, error) {
	return &connector{d: d, dsn: dsn}, nil
}

// connector opens the connections of one pool: an application's, or
// (writer set) the one connection courier writes through.
type connector struct {
	d      *sqliteDriver
	dsn    string
	writer bool
}

func (c *connector) Connect(context.Context) (driver.Conn, error) {
	return c.d.connect(c.dsn, c.writer)
}
func (c *connector) Driver() driver.Driver { return c.d }

func (d *sqliteDriver) connect(dsn string, writer bool) (driver.Conn, error) {
	dc, err := d.base.Open(dsn)
	if err != nil {
		return nil, err
	}
	sc := dc.(*sqlite3.SQLiteConn)
	c := &conn{SQLiteConn: sc}
	if !writer {
		file, err := connFile(sc)
		if err != nil {
			sc.Close()
			return nil, err
		}
		// In memory there is no other writer: the Store writes through
		// this pool itself.
		c.guard = file != ""
		c.immediate = beginsImmediate(dsn)
	}
	return c, nil
}

// beginsImmediate reports whether a DSN's transactions take the write
// lock as they begin (go-sqlite3's _txlock).
func beginsImmediate(dsn string) bool {
	_, params, _ := strings.Cut(dsn, "?")
	v, _ := url.ParseQuery(params)
	lock := v.Get("_txlock")
	return lock == "immediate" || lock == "exclusive"
}

// errWriteOutside is a write through DB() from a request whose
// transaction holds the writer.
var errWriteOutside = &courier.Error{Code: courier.CodeWriteOutsideTransaction, Msg: "sqlite: write through the transaction your function was given: this request's transaction holds the database's one writer, so a write through Store.DB() would wait for it until the busy timeout"}

// conn is a go-sqlite3 connection with courier's checks.
type conn struct {
	*sqlite3.SQLiteConn
	guard     bool        // refuse writes whose context holds the writer
	immediate bool        // its transactions take the write lock as they begin
	readOnly  atomic.Bool // SQLite found the database read-only: never reuse
}

var (
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
)

// note remembers that SQLite answered err: a connection that found its
// database read-only stays so (SQLite opened the file read-only, or it
// was moved), so database/sql drops it and opens a fresh one next.
func (c *conn) note(err error) error {
	var e sqlite3.Error
	if errors.As(err, &e) && e.Code == sqlite3.ErrReadonly {
		c.readOnly.Store(true)
	}
	return err
}

// IsValid tells database/sql whether the connection may go back to the
// pool.
func (c *conn) IsValid() bool { return !c.readOnly.Load() }

// ResetSession refuses to hand out a connection found read-only.
func (c *conn) ResetSession(context.Context) error {
	if c.readOnly.Load() {
		return driver.ErrBadConn
	}
	return nil
}

// refuse returns errWriteOutside for a statement that writes, run from a
// context whose request holds the writer.
func (c *conn) refuse(ctx context.Context, query string) error {
	if !c.guard || !writerctx.Held(ctx) {
		return nil
	}
	st, err := c.SQLiteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil // running it reports the error
	}
	defer st.Close()
	if st.(*sqlite3.SQLiteStmt).Readonly() {
		return nil
	}
	return errWriteOutside
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.refuse(ctx, query); err != nil {
		return nil, err
	}
	res, err := c.SQLiteConn.ExecContext(ctx, query, args)
	return res, c.note(err)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.refuse(ctx, query); err != nil {
		return nil, err
	}
	r, err := c.SQLiteConn.QueryContext(ctx, query, args)
	if err != nil {
		return nil, c.note(err)
	}
	return c.rows(r), nil
}

func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := c.SQLiteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.note(err)
	}
	return &stmt{SQLiteStmt: st.(*sqlite3.SQLiteStmt), c: c}, nil
}

func (c *conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// BeginTx refuses, from a context whose request holds the writer, a
// transaction that would wait for the write lock as it begins.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.guard && c.immediate && writerctx.Held(ctx) {
		return nil, errWriteOutside
	}
	t, err := c.SQLiteConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.note(err)
	}
	return &tx{Tx: t, c: c}, nil
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// rows watches a result's steps: a statement that writes (RETURNING)
// meets a read-only database in its first.
func (c *conn) rows(r driver.Rows) driver.Rows {
	if sr, ok := r.(*sqlite3.SQLiteRows); ok {
		return &rows{SQLiteRows: sr, c: c}
	}
	return r
}

// rows is a result of a conn.
type rows struct {
	*sqlite3.SQLiteRows
	c *conn
}

func (r *rows) Next(dest []driver.Value) error { return r.c.note(r.SQLiteRows.Next(dest)) }

// stmt is a prepared statement of a conn.
type stmt struct {
	*sqlite3.SQLiteStmt
	c *conn
}

var (
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)
)

func (s *stmt) refuse(ctx context.Context) error {
	if s.c.guard && writerctx.Held(ctx) && !s.Readonly() {
		return errWriteOutside
	}
	return nil
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.refuse(ctx); err != nil {
		return nil, err
	}
	res, err := s.SQLiteStmt.ExecContext(ctx, args)
	return res, s.c.note(err)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if err := s.refuse(ctx); err != nil {
		return nil, err
	}
	r, err := s.SQLiteStmt.QueryContext(ctx, args)
	if err != nil {
		return nil, s.c.note(err)
	}
	return s.c.rows(r), nil
}

// tx is a transaction of a conn.
type tx struct {
	driver.Tx
	c *conn
}

func (t *tx) Commit() error { return t.c.note(t.Tx.Commit()) }

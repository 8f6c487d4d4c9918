package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier/internal/writerctx"
)

// sqliteDriver is go-sqlite3 as courier opens it (DriverName). Its
// connections wake workers when an enqueue commits (hookCommits); are
// dropped once SQLite finds their database read-only, so the next use
// opens the file afresh; begin a read-only transaction (sql.TxOptions's
// ReadOnly) deferred and query_only, so it never waits for the writer;
// and, in the pools applications use, refuse a write from a request whose
// transaction holds the writer, which would otherwise wait for that very
// transaction until the busy timeout. A connection that does not open
// because of its path (a directory missing, a directory given as the
// file) says so (openFailure); one to a file this process may not write
// is refused before SQLite opens it, where the kernel can say so
// (unwritable).
type sqliteDriver struct{ base *sqlite3.SQLiteDriver }

var courierDriver = &sqliteDriver{base: &sqlite3.SQLiteDriver{ConnectHook: hookCommits}}

// Open opens a connection of an application's pool.
func (d *sqliteDriver) Open(dsn string) (driver.Conn, error) {
	return d.connect(context.Background(), dsn, nil)
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
	writer *writerDriver
}

// writerDriver is the driver of the writer's pool (its sql.DB's Driver):
// it shows what the writer's looks found of its -wal file (walGone).
type writerDriver struct {
	*sqliteDriver
	shown *walSeen
}

// writerConnector returns the connector of the writer's pool for dsn,
// whose database file is file.
func writerConnector(dsn, file string) *connector {
	return &connector{d: courierDriver, dsn: dsn, writer: &writerDriver{sqliteDriver: courierDriver, shown: &walSeen{path: file + "-wal"}}}
}

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	var shown *walSeen
	if c.writer != nil {
		shown = c.writer.shown
	}
	return c.d.connect(ctx, c.dsn, shown)
}

func (c *connector) Driver() driver.Driver {
	if c.writer != nil {
		return c.writer
	}
	return c.d
}

// connect opens a connection, the writer's when shown is set (where its
// looks at the -wal file are shown); ctx bounds only its waits for a new
// file's locks (go-sqlite3 opens without a context).
func (d *sqliteDriver) connect(ctx context.Context, dsn string, shown *walSeen) (driver.Conn, error) {
	writer := shown != nil
	if err := unwritable(dsn); err != nil {
		return nil, err
	}
	dc, err := d.base.Open(dsn)
	// Connections opening a new file at once each turn it to WAL (the
	// DSN's journal_mode), and SQLite answers one of two doing so busy at
	// once, without its busy timeout: each holds a lock the other needs.
	// The one refused opens again, for as long in all as its busy timeout
	// would have waited; by then the other has made the file WAL.
	// Its request's context cuts the wait short.
	deadline := time.Now().Add(busyTimeout * time.Millisecond)
	for isBusy(err) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Millisecond):
		}
		dc, err = d.base.Open(dsn)
	}
	if err != nil {
		return nil, openFailure(dsn, err)
	}
	sc := dc.(*sqlite3.SQLiteConn)
	c := &conn{SQLiteConn: sc, writer: writer}
	if writer {
		if c.wal, err = boundWAL(sc, shown); err == nil { //nolint:contextcheck // a pragma of the writer's setup, run once at open
			_, err = sc.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", writerBusyStep), nil)
		}
		if err == nil {
			// The writer's statement journals grow in memory by small
			// chunks. Every claim and settle keeps one (a statement with
			// RETURNING does), and with temp_store's default SQLite
			// buffers it in 64 KiB of its own for each statement, which
			// cost a claim of eight rows in a large outbox three times
			// the UPDATE itself (BenchmarkClaim, BenchmarkSettle).
			// Courier's statements each change a batch bounded by its
			// limit or by the leases its workers hold; the package doc
			// says what applications writing in Store.Begin's
			// transactions should do.
			_, err = sc.ExecContext(ctx, "PRAGMA temp_store = MEMORY", nil)
		}
		if err != nil {
			sc.Close()
			return nil, err
		}
	} else {
		file, err := connFile(sc)
		if err != nil {
			sc.Close()
			return nil, err
		}
		// A pool in memory writes nothing a Store shares (store.Open
		// refuses one): nothing to guard.
		c.guard = file != ""
		c.immediate = beginsImmediate(dsn)
	}
	return c, nil
}

// openFailure is go-sqlite3's error err for a connection to dsn that did
// not open, saying why when the cause is the path's (cannotCreate): so
// that every pool of DriverName says it, the application's own as well as
// sqlite.Open's, under store.Migrate's and store.Open's errors.
func openFailure(dsn string, err error) error {
	if file := dsnFile(dsn); file != "" {
		if cerr := cannotCreate(file, err); cerr != nil {
			return cerr
		}
	}
	return err
}

// unwritable returns SQLite's read-only error for the database file dsn
// names (readOnlyFile), when the file is there and the kernel says this
// process may not write it, or its -wal or -shm file (writeAccess).
// SQLite would open such a file read-only without a word and, where the
// directory lets it, create the -wal and -shm files of a WAL database
// beside it: this process's, which the file's owner may not write, so
// that the owner's own processes could no longer open the database until
// someone removed them. The connection is refused before SQLite opens
// anything. Through a symlinked path, the -wal and -shm files looked at
// are those beside the file the link leads to, where SQLite keeps them.
// Nil for a file not there yet (SQLite creates it, this process's), in
// memory, or opened read-only on purpose (a file: URI's mode=ro or
// immutable=1: readOnlyMode), and wherever the kernel cannot say (off
// Unix, under a seccomp policy that refuses both faccessat2 and
// access(2)): the writer's check through SQLite (checkWritable), under
// Open and store.Open, still refuses such a file, once SQLite has opened
// it.
func unwritable(dsn string) error {
	file := dsnFile(dsn)
	if file == "" || file == ":memory:" || readOnlyMode(dsn) {
		return nil
	}
	target, err := filepath.EvalSymlinks(file)
	if err != nil {
		target = file // not there, or a failure SQLite's open will say
	}
	for _, f := range []string{target, target + "-wal", target + "-shm"} {
		errno, refused := refusesWrite(writeAccess(f))
		if !refused {
			continue // writable, not there, or a failure SQLite's open will say
		}
		err := error(sqlite3.Error{Code: sqlite3.ErrReadonly, SystemErrno: errno})
		if f != target {
			err = fmt.Errorf("%s: %w", f, err)
		}
		return readOnlyFile(file, err)
	}
	return nil
}

// refusesWrite reports whether err, writeAccess's, says this process may
// not write the file (EACCES, EPERM or EROFS), rather than that it is not
// there or nothing (writable, or the kernel cannot say), and returns that
// errno.
func refusesWrite(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	return errno, errors.As(err, &errno) && (errno == syscall.EACCES || errno == syscall.EPERM || errno == syscall.EROFS)
}

// readOnlyMode reports whether a go-sqlite3 DSN asks SQLite for a
// database it does not write to a file: a file: URI's mode=ro or
// mode=memory, or its immutable parameter true as SQLite reads it
// (uriBoolean). (SQLite reads a URI's parameters; go-sqlite3 takes them
// off a DSN of another form.)
func readOnlyMode(dsn string) bool {
	rest, uri := strings.CutPrefix(dsn, "file:")
	if !uri {
		return false
	}
	_, params, _ := strings.Cut(rest, "?")
	params, _, _ = strings.Cut(params, "#")
	v, _ := url.ParseQuery(params)
	mode := v.Get("mode")
	return mode == "ro" || mode == "memory" || uriBoolean(v.Get("immutable"))
}

// uriBoolean reports whether SQLite reads a URI parameter's value as
// true (sqlite3_uri_boolean): yes, true or on in any case, or a number
// other than 0 that fits 32 bits, decimal or hexadecimal after 0x, read
// up to the first character that is not one of its digits.
func uriBoolean(v string) bool {
	if v == "" || v[0] < '0' || v[0] > '9' {
		switch strings.ToLower(v) {
		case "yes", "true", "on":
			return true
		}
		return false
	}
	digits, base := v, 10
	if len(v) > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X') && isDigit(v[2], 16) {
		digits, base = v[2:], 16
	}
	end := 0
	for end < len(digits) && isDigit(digits[end], base) {
		end++
	}
	n, err := strconv.ParseInt(digits[:end], base, 32)
	return err == nil && n != 0
}

// isDigit reports whether c is a digit in base 10 or 16.
func isDigit(c byte, base int) bool {
	switch {
	case '0' <= c && c <= '9':
		return true
	case base == 16:
		c |= 0x20 // lower case
		return 'a' <= c && c <= 'f'
	}
	return false
}

// dsnFile returns the path of the file a go-sqlite3 DSN names, as SQLite
// reads it: a file: URI's path, percent-decoded (with an authority, only
// an empty one or localhost), or the DSN before its ?parameters, which
// go-sqlite3 takes off. It returns "" for a URI it cannot read.
func dsnFile(dsn string) string {
	rest, uri := strings.CutPrefix(dsn, "file:") // go-sqlite3's test, case and all
	if !uri {
		if pos := strings.IndexByte(dsn, '?'); pos >= 1 {
			dsn = dsn[:pos]
		}
		return dsn
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		authority, path, _ := strings.Cut(after, "/")
		if authority != "" && authority != "localhost" {
			return ""
		}
		rest = "/" + path
	}
	file, err := url.PathUnescape(rest)
	if err != nil {
		return ""
	}
	return file
}

// beginsImmediate reports whether a DSN's transactions take the write
// lock as they begin (go-sqlite3's _txlock).
func beginsImmediate(dsn string) bool {
	_, params, _ := strings.Cut(dsn, "?")
	v, _ := url.ParseQuery(params)
	lock := v.Get("_txlock")
	return lock == "immediate" || lock == "exclusive"
}

// conn is a go-sqlite3 connection with courier's checks.
type conn struct {
	*sqlite3.SQLiteConn
	writer    bool        // courier's one writer: waits for the write lock in steps (waitBusy)
	guard     bool        // refuse writes whose context holds the writer
	immediate bool        // its transactions take the write lock as they begin
	readOnly  atomic.Bool // SQLite found the database read-only, or query_only could not be reset: never reuse
	queryOnly bool        // a read-only transaction set query_only, to be reset as it ends
	wal       *walBound   // the writer's: keeps the -wal file bounded, and refuses writes once it is removed
	// busySince is when the writer began to wait for the write lock held
	// elsewhere (waitBusy), zero once a write got it: the writes queued
	// meanwhile have waited for it since.
	busySince time.Time
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
	if errors.As(err, &e) && e.Code == sqlite3.ErrReadonly && !c.queryOnly {
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

// refuse returns the error of every statement on a writer whose -wal file
// was removed (walBound.removal), and writerctx.ErrWriteOutside for a
// statement that writes, run from a context whose request holds the
// writer.
func (c *conn) refuse(ctx context.Context, query string) error {
	if err := c.wal.removal(c.SQLiteConn); err != nil { //nolint:contextcheck // the checkpoint that secures the removed -wal file's commits must not be cut short by ctx's end
		return err
	}
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
	return writerctx.ErrWriteOutside
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if err := c.refuse(ctx, query); err != nil {
		return nil, err
	}
	res, err := waitBusy(ctx, c, func() (driver.Result, error) { return c.SQLiteConn.ExecContext(ctx, query, args) })
	c.committed(err) //nolint:contextcheck // the -wal file's reset puts the busy timeout back after it: ctx's end must not cut that short
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
// transaction that would wait for the write lock as it begins. A
// read-only one takes no lock as it begins (see beginReadOnly).
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.ReadOnly {
		return c.beginReadOnly(ctx)
	}
	if c.guard && c.immediate && writerctx.Held(ctx) {
		return nil, writerctx.ErrWriteOutside
	}
	if err := c.wal.removal(c.SQLiteConn); err != nil { //nolint:contextcheck // the checkpoint that secures the removed -wal file's commits must not be cut short by ctx's end
		return nil, err
	}
	t, err := waitBusy(ctx, c, func() (driver.Tx, error) { return c.SQLiteConn.BeginTx(ctx, opts) })
	if err != nil {
		return nil, c.note(err)
	}
	return &tx{Tx: t, c: c}, nil
}

// waitBusy runs op, a transaction's begin or a statement outside one,
// again while SQLite answers busy: another connection (the application's
// pool, another process) holds the write lock. On the writer each try
// waits up to writerBusyStep inside SQLite, whose wait nothing can cut
// short, and ctx's end cuts the wait short between tries, so that a
// Worker's Stop or a request's end is not held up for busyTimeout. It
// gives up once the write has waited busyTimeout for the lock, as
// another connection would: counted from when it asked for the writer
// (the moment ctx is marked with, writerctx.WithAsked; else its first
// try) or, if later, when the writer began to wait for the lock. A write
// queued in Go for the writer behind others that waited has waited with
// them, rather than wait busyTimeout once its turn comes (the n-th of n
// requests n times as long); one queued behind the Store's own
// transaction, or that asks after another gave up, waits its whole
// busyTimeout. Other connections wait inside SQLite, as the DSN says.
func waitBusy[T any](ctx context.Context, c *conn, op func() (T, error)) (T, error) {
	if !c.writer || !c.AutoCommit() { // in a transaction the writer holds the lock already
		return op()
	}
	asked, marked := writerctx.Asked(ctx)
	v, err := op()
	if !isBusy(err) {
		c.busySince = time.Time{}
		return v, err
	}
	now := time.Now()
	if c.busySince.IsZero() {
		c.busySince = now
	}
	if !marked {
		asked = now
	}
	deadline := c.busySince
	if asked.After(deadline) {
		deadline = asked
	}
	deadline = deadline.Add(busyTimeout * time.Millisecond)
	pause := time.NewTimer(time.Millisecond)
	defer pause.Stop()
	for isBusy(err) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-pause.C: // a busy answered at once would otherwise spin
		}
		v, err = op()
		pause.Reset(time.Millisecond)
	}
	if !isBusy(err) {
		c.busySince = time.Time{}
	}
	return v, err
}

// isBusy reports whether err is SQLite's busy: the write lock is held
// by another connection.
func isBusy(err error) bool {
	var e sqlite3.Error
	return errors.As(err, &e) && e.Code == sqlite3.ErrBusy
}

func (c *conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// beginReadOnly begins a read-only transaction: a plain (deferred) BEGIN,
// whatever the DSN's _txlock, so in WAL mode it reads the last commit
// without waiting for a writer, and query_only for its duration, so a
// write in it fails as SQLite's read-only error. query_only is reset as
// it ends (readTx); a connection on which that fails is not reused.
func (c *conn) beginReadOnly(ctx context.Context) (driver.Tx, error) {
	c.queryOnly = true
	_, err := c.SQLiteConn.ExecContext(ctx, "PRAGMA query_only = 1", nil)
	if err == nil {
		_, err = c.SQLiteConn.ExecContext(ctx, "BEGIN", nil)
	}
	if err != nil {
		c.resetQueryOnly() //nolint:contextcheck // the reset must run even when ctx has ended
		return nil, err
	}
	return &readTx{c: c}, nil
}

// resetQueryOnly ends query_only, which a read-only transaction set; if it
// cannot, the connection is dropped rather than handed out read-only.
func (c *conn) resetQueryOnly() {
	if _, err := c.SQLiteConn.ExecContext(context.Background(), "PRAGMA query_only = 0", nil); err != nil {
		c.readOnly.Store(true)
	}
	c.queryOnly = false
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

// refuse is conn.refuse for a prepared statement.
func (s *stmt) refuse(ctx context.Context) error {
	if err := s.c.wal.removal(s.c.SQLiteConn); err != nil { //nolint:contextcheck // as in conn.refuse
		return err
	}
	if s.c.guard && writerctx.Held(ctx) && !s.Readonly() {
		return writerctx.ErrWriteOutside
	}
	return nil
}

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if err := s.refuse(ctx); err != nil {
		return nil, err
	}
	res, err := waitBusy(ctx, s.c, func() (driver.Result, error) { return s.SQLiteStmt.ExecContext(ctx, args) })
	s.c.committed(err) //nolint:contextcheck // as in conn.ExecContext
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

func (t *tx) Commit() error {
	err := t.Tx.Commit()
	t.c.committed(err)
	return t.c.note(err)
}

// committed is called after a statement or a commit that may have
// committed a write: on the writer, it keeps the -wal file bounded.
func (c *conn) committed(err error) {
	if c.wal != nil && err == nil && c.AutoCommit() && !c.wal.committed(c.SQLiteConn) {
		c.readOnly.Store(true) // its busy timeout is not the DSN's: never reuse
	}
}

// readTx is a read-only transaction of a conn (see beginReadOnly). As
// go-sqlite3's own transaction, it is over once Commit returns, even when
// the COMMIT failed.
type readTx struct{ c *conn }

func (t *readTx) Commit() error {
	defer t.c.resetQueryOnly()
	if _, err := t.c.SQLiteConn.ExecContext(context.Background(), "COMMIT", nil); err != nil {
		_, _ = t.c.SQLiteConn.ExecContext(context.Background(), "ROLLBACK", nil)
		return err
	}
	return nil
}

func (t *readTx) Rollback() error {
	defer t.c.resetQueryOnly()
	_, err := t.c.SQLiteConn.ExecContext(context.Background(), "ROLLBACK", nil)
	return err
}

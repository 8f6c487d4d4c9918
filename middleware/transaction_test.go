package middleware_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/problem"
	"github.com/courier-go/courier/internal/verified"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// txBundle is a SQLite store with the tables the handlers under test write.
type txBundle struct {
	store *store.Store
	db    *sqlx.DB
	path  string
}

func setupTx(t *testing.T) txBundle {
	t.Helper()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := sqlite.Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	db := s.DB()
	db.MustExecContext(t.Context(), `
		CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
		CREATE TABLE parents (id INTEGER PRIMARY KEY);
		-- checked at COMMIT, so a violation makes the commit itself fail
		CREATE TABLE children (
			id        INTEGER PRIMARY KEY,
			parent_id INTEGER NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED
		);`)
	return txBundle{store: s, db: db, path: path}
}

// countItems counts committed items, on a connection of its own.
func countItems(ctx context.Context, db *sqlx.DB) (int, error) {
	var n int
	err := db.GetContext(ctx, &n, `SELECT count(*) FROM items`)
	return n, err
}

// insertItem inserts an item in the request's transaction.
func insertItem(t *testing.T, r *http.Request) {
	t.Helper()
	tx, ok := middleware.TxFromContext(r.Context())
	if !ok {
		t.Error("no transaction in the request's context")
		return
	}
	if _, err := tx.ExecContext(r.Context(), `INSERT INTO items (name) VALUES ('a')`); err != nil {
		t.Errorf("insert: %v", err)
	}
}

// observeSend sets X-Outer before next runs, as an outer middleware would,
// and X-Rows-At-Send to the number of committed items at the moment the
// response starts to reach the client.
func observeSend(db *sqlx.DB, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Outer", "kept")
		next.ServeHTTP(&sendObserver{ResponseWriter: w, db: db, ctx: r.Context()}, r)
	})
}

type sendObserver struct {
	http.ResponseWriter
	db      *sqlx.DB
	ctx     context.Context
	started bool
}

func (o *sendObserver) WriteHeader(code int) {
	if !o.started {
		o.started = true
		n, err := countItems(o.ctx, o.db)
		v := strconv.Itoa(n)
		if err != nil {
			v = "error: " + err.Error()
		}
		o.Header().Set("X-Rows-At-Send", v)
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *sendObserver) Unwrap() http.ResponseWriter { return o.ResponseWriter }

func (o *sendObserver) Write(p []byte) (int, error) {
	if !o.started {
		o.WriteHeader(http.StatusOK)
	}
	return o.ResponseWriter.Write(p)
}

func TestTransaction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		handle      func(t *testing.T, w http.ResponseWriter, r *http.Request)
		wantCode    int
		wantBody    string
		wantProblem courier.Code // the response is a problem with this code
		wantRows    int
	}{
		{
			name: "200 with a body commits",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				rc := http.NewResponseController(w)
				if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
					t.Errorf("SetWriteDeadline through Unwrap: %v", err)
				}
				io.WriteString(w, "ok")
				if err := rc.Flush(); err != nil { // held back all the same
					t.Errorf("Flush: %v", err)
				}
				w.(http.Flusher).Flush()
			},
			wantCode: http.StatusOK, wantBody: "ok", wantRows: 1,
		},
		{
			name: "a handler that commits itself has its answer sent",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				tx, _ := middleware.TxFromContext(r.Context())
				if err := tx.Commit(); err != nil {
					t.Errorf("commit: %v", err)
				}
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusCreated)
			},
			wantCode: http.StatusCreated, wantRows: 1,
		},
		{
			name: "201 without a body commits",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusCreated)
			},
			wantCode: http.StatusCreated, wantRows: 1,
		},
		{
			name: "nothing written commits as 200",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
			},
			wantCode: http.StatusOK, wantRows: 1,
		},
		{
			name: "204 commits",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusNoContent)
				if _, err := io.WriteString(w, "dropped"); !errors.Is(err, http.ErrBodyNotAllowed) {
					t.Errorf("Write after 204 = %v, want ErrBodyNotAllowed", err)
				}
			},
			wantCode: http.StatusNoContent, wantRows: 1,
		},
		{
			name: "303 commits",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.Header().Set("Location", "/items/1")
				w.WriteHeader(http.StatusSeeOther)
			},
			wantCode: http.StatusSeeOther, wantRows: 1,
		},
		{
			name: "informational status then 200 commits",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusEarlyHints)
				io.WriteString(w, "ok")
			},
			wantCode: http.StatusOK, wantBody: "ok", wantRows: 1,
		},
		{
			name: "first WriteHeader wins: 201 then 500 commits",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusCreated)
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, "created")
			},
			wantCode: http.StatusCreated, wantBody: "created", wantRows: 1,
		},
		{
			name: "first WriteHeader wins: 422 then 200 rolls back",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusUnprocessableEntity)
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, "invalid")
			},
			wantCode: http.StatusUnprocessableEntity, wantBody: "invalid",
		},
		{
			name: "400 rolls back",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, "bad")
			},
			wantCode: http.StatusBadRequest, wantBody: "bad",
		},
		{
			name: "409 problem rolls back",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				problem.Error(w, http.StatusConflict, courier.CodeIdempotencyCollision, "")
			},
			wantCode: http.StatusConflict, wantProblem: courier.CodeIdempotencyCollision,
		},
		{
			name: "500 rolls back",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusInternalServerError)
			},
			wantCode: http.StatusInternalServerError,
		},
		{
			name: "failed commit answers 503, not the handler's 201",
			handle: func(t *testing.T, w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				tx, _ := middleware.TxFromContext(r.Context())
				if _, err := tx.ExecContext(r.Context(), `INSERT INTO children (parent_id) VALUES (99)`); err != nil {
					t.Errorf("insert child: %v", err)
				}
				w.Header().Set("X-Handler", "set")
				w.WriteHeader(http.StatusCreated)
				io.WriteString(w, "created")
			},
			wantCode: http.StatusServiceUnavailable, wantProblem: courier.CodeInternal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupTx(t)
			h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tt.handle(t, w, r)
			}))
			srv := httptest.NewServer(observeSend(b.db, h))
			t.Cleanup(srv.Close)
			c := srv.Client()
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

			resp := post(t, c, srv.URL, nil, false, nil)
			got := readAll(t, resp)
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status = %d, want %d (body %q)", resp.StatusCode, tt.wantCode, got)
			}
			if tt.wantProblem != "" {
				if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != tt.wantProblem {
					t.Errorf("code = %q, want %q", p.Code, tt.wantProblem)
				}
				if ra := resp.Header.Get("Retry-After"); (resp.StatusCode == http.StatusServiceUnavailable) != (ra == "1") {
					t.Errorf("Retry-After = %q with status %d, want 1 exactly on a 503", ra, resp.StatusCode)
				}
			} else if string(got) != tt.wantBody {
				t.Errorf("body = %q, want %q", got, tt.wantBody)
			}
			if resp.StatusCode != http.StatusNoContent && resp.ContentLength != int64(len(got)) {
				t.Errorf("Content-Length = %d, want %d", resp.ContentLength, len(got))
			}

			// The handler's headers travel with its own response only.
			wantHandler := "set"
			if tt.wantProblem == courier.CodeInternal {
				wantHandler = ""
			}
			if h := resp.Header.Get("X-Handler"); h != wantHandler {
				t.Errorf("X-Handler = %q, want %q", h, wantHandler)
			}
			if h := resp.Header.Get("X-Outer"); h != "kept" {
				t.Errorf("X-Outer = %q, want the outer middleware's header kept", h)
			}
			// Settled before anything reached the client.
			if at := resp.Header.Get("X-Rows-At-Send"); at != strconv.Itoa(tt.wantRows) {
				t.Errorf("committed rows when the response started = %s, want %d", at, tt.wantRows)
			}
			if n, err := countItems(t.Context(), b.db); err != nil || n != tt.wantRows {
				t.Errorf("committed rows = %d (%v), want %d", n, err, tt.wantRows)
			}
		})
	}
}

// A panicking handler's work is rolled back, the panic goes on up with its
// own value, nothing is written, and the connection is free for the next
// request (SQLite has one writer: a leaked transaction would block it).
func TestTransactionPanicRollsBack(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	type sentinel struct{ msg string }
	boom := &sentinel{"boom"}
	var panicking atomic.Bool
	panicking.Store(true)
	h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		w.Header().Set("X-Handler", "set")
		io.WriteString(w, "partial")
		if panicking.Load() {
			panic(boom)
		}
	}))

	rec := httptest.NewRecorder()
	got := func() (v any) {
		defer func() { v = recover() }()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil))
		return nil
	}()
	if got != boom {
		t.Fatalf("recovered %v, want the handler's own panic value", got)
	}
	if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Errorf("wrote %v %q before the panic went up, want nothing", rec.Header(), rec.Body)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
		t.Fatalf("committed rows = %d (%v), want 0", n, err)
	}

	panicking.Store(false)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("next request: status = %d, want 200 (body %q)", rec.Code, rec.Body)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != 1 {
		t.Errorf("committed rows after the next request = %d (%v), want 1", n, err)
	}
}

// Under Recover, over a real connection, the panic becomes a 500 problem
// and nothing the handler wrote is committed or sent.
func TestTransactionUnderRecover(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	h := middleware.Recover(nil)(middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		io.WriteString(w, "partial")
		panic("boom")
	})))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	resp := post(t, srv.Client(), srv.URL, nil, false, nil)
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500 (body %q)", resp.StatusCode, got)
	}
	if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
		t.Errorf("committed rows = %d (%v), want 0", n, err)
	}
}

// TestTransactionMarksTheWriterHeld: under Transaction(s.Begin) on SQLite
// the request's transaction holds the one writer, and a write next made
// other than through it (Store.Begin, a Store method that writes, a write
// through Store.DB()) waited for the request itself: until its context
// ended, or the busy timeout. next's context is now marked as holding the
// writer, so each fails at once with write_outside_transaction, while
// writes through the transaction and reads through DB() go on.
func TestTransactionMarksTheWriterHeld(t *testing.T) {
	t.Parallel()
	refused := map[string]func(ctx context.Context, s *store.Store) error{
		"Store.Begin": func(ctx context.Context, s *store.Store) error {
			tx, err := s.Begin(ctx)
			if err == nil {
				tx.Rollback()
			}
			return err
		},
		"Endpoints.Disable": func(ctx context.Context, s *store.Store) error {
			return s.Endpoints.Disable(ctx, "https://r.example/h")
		},
		"write through DB()": func(ctx context.Context, s *store.Store) error {
			_, err := s.DB().ExecContext(ctx, `INSERT INTO items (name) VALUES ('through DB()')`)
			return err
		},
	}
	for name, write := range refused {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupTx(t)
			var got error
			h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Bounds the wait for the writer, should there be one.
				ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
				defer cancel()
				insertItem(t, r)
				if _, err := countItems(ctx, b.db); err != nil {
					t.Errorf("read through DB(): %v", err)
				}
				got = write(ctx, b.store)
				w.WriteHeader(http.StatusCreated)
			}))
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)

			resp := post(t, srv.Client(), srv.URL, nil, false, nil)
			readAll(t, resp)
			if courier.CodeOf(got) != courier.CodeWriteOutsideTransaction {
				t.Fatalf("%s in the request: %v, want code write_outside_transaction", name, got)
			}
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("status = %d, want 201", resp.StatusCode)
			}
			if n, err := countItems(t.Context(), b.db); err != nil || n != 1 {
				t.Errorf("committed rows = %d (%v), want the transaction's 1", n, err)
			}
		})
	}
}

// TestTransactionBeginFails: a begin that fails, or returns neither a
// transaction nor an error (it panicked at the commit), is answered 503
// before next runs.
func TestTransactionBeginFails(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(b.path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for name, begin := range map[string]func(ctx context.Context) (*sqlx.Tx, error){
		"failing":  func(ctx context.Context) (*sqlx.Tx, error) { return db.BeginTxx(ctx, nil) },
		"nil, nil": func(context.Context) (*sqlx.Tx, error) { return nil, nil },
	} {
		t.Run(name, func(t *testing.T) { beginFails(t, begin) })
	}
}

func beginFails(t *testing.T, begin func(ctx context.Context) (*sqlx.Tx, error)) {
	var called atomic.Bool
	h := middleware.Transaction(begin)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called.Store(true) }))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status = %d, want 503", rec.Code)
	}
	if p := readProblem(t, rec.Code, rec.Header(), rec.Body.Bytes()); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1", ra)
	}
	if called.Load() {
		t.Error("next was called without a transaction")
	}
}

func TestTransactionPanicsOnNilDB(t *testing.T) {
	t.Parallel()
	mustPanic(t, func() { middleware.Transaction(nil) })
}

// TestTransactionRolledBackAsItsContextEndedIsNoSuccess: the request's
// context ends (a deadline of a middleware in front) after next wrote its
// success and before Transaction commits: database/sql rolls the
// transaction back, and its commit fails as one next ended itself would.
// Transaction sent next's 200 for effects rolled back; it answers 503.
func TestTransactionRolledBackAsItsContextEndedIsNoSuccess(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	type cancelKey struct{}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		w.WriteHeader(http.StatusOK)
		r.Context().Value(cancelKey{}).(context.CancelFunc)() // the deadline in front runs out
		tx, _ := middleware.TxFromContext(r.Context())
		for { // until database/sql has rolled tx back
			if _, err := tx.ExecContext(context.WithoutCancel(r.Context()), "SELECT 1"); errors.Is(err, sql.ErrTxDone) {
				break
			}
			runtime.Gosched()
		}
	})
	deadline := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, cancelKey{}, cancel)))
		})
	}
	rec := httptest.NewRecorder()
	deadline(middleware.Transaction(b.store.Begin)(app)).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil))
	n, err := countItems(t.Context(), b.db)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusServiceUnavailable || n != 0 {
		t.Fatalf("answered %d with %d items committed; want 503 and none", rec.Code, n)
	}
}

// TestTransactionRefusesHijack: http.ResponseController reached the
// server's writer through the held writer's Unwrap and hijacked the
// connection, so next's answer went to the client before the transaction
// was settled: here a 200 for effects whose commit then failed. The held
// writer refuses to be hijacked, and the client gets the commit's 503.
func TestTransactionRefusesHijack(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	var hijackErr error
	h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		tx, _ := middleware.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO children (parent_id) VALUES (99)`); err != nil {
			t.Errorf("insert child: %v", err)
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		hijackErr = err
		if err != nil {
			w.WriteHeader(http.StatusCreated)
			return
		}
		defer conn.Close()
		io.WriteString(rw, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		rw.Flush()
	}))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	resp := post(t, srv.Client(), srv.URL, nil, false, nil)
	got := readAll(t, resp)
	n, err := countItems(t.Context(), b.db)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || n != 0 {
		t.Fatalf("client got %d %q with %d items committed; want 503 and none", resp.StatusCode, got, n)
	}
	if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
	if !errors.Is(hijackErr, http.ErrNotSupported) {
		t.Errorf("Hijack under Transaction = %v, want http.ErrNotSupported", hijackErr)
	}
}

// TestReceiverChainUnderConcurrency: the documented chain, under many
// concurrent requests that end every way it has (committed, rolled back by
// a 4xx, a panic, a bad signature, a body too large before and after it is
// reserved, over the Budget), gives back every reserved byte, commits
// exactly the answers that said so, and never runs next unverified.
func TestReceiverChainUnderConcurrency(t *testing.T) {
	t.Parallel()
	const maxBytes, perKind = 64, 12
	b := setupTx(t)
	vb := setupVerify(t)
	budget := middleware.NewBudget(4 * maxBytes)
	var unverified atomic.Int32
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := verified.Body(r.Context())
		if _, ok := middleware.PrincipalFromContext(r.Context()); !ok {
			unverified.Add(1)
		}
		insertItem(t, r)
		switch string(body) {
		case "reject":
			w.WriteHeader(http.StatusUnprocessableEntity)
		case "panic":
			panic("boom")
		default:
			io.WriteString(w, "ok")
		}
	})
	limits := middleware.BodyLimits{MaxBytes: maxBytes, Budget: budget}
	srv := httptest.NewServer(middleware.Recover(nil)(middleware.Verify(vb.verifier, limits)(middleware.Transaction(b.store.Begin)(app))))
	t.Cleanup(srv.Close)

	type kind struct {
		body    []byte
		chunked bool
		tamper  bool
		want    []int // acceptable statuses
	}
	busy := http.StatusServiceUnavailable
	kinds := []kind{
		{body: []byte("commit"), want: []int{http.StatusOK, busy}},
		{body: []byte("reject"), want: []int{http.StatusUnprocessableEntity, busy}},
		{body: []byte("panic"), want: []int{http.StatusInternalServerError, busy}},
		{body: []byte("commit"), tamper: true, want: []int{http.StatusUnauthorized, busy}},
		{body: bytes.Repeat([]byte("a"), 2*maxBytes), want: []int{http.StatusRequestEntityTooLarge}},
		{body: bytes.Repeat([]byte("a"), 2*maxBytes), chunked: true, want: []int{http.StatusRequestEntityTooLarge, busy}},
	}
	var committed atomic.Int32
	errs := make(chan error, len(kinds)*perKind)
	for range perKind {
		for _, k := range kinds {
			go func() {
				var rd io.Reader = bytes.NewReader(k.body)
				if k.chunked {
					rd = struct{ io.Reader }{rd}
				}
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, rd)
				if err != nil {
					errs <- err
					return
				}
				if err := vb.signer.Sign(req, signature.Message{ID: "n-1", Body: k.body, Time: vb.now}); err != nil {
					errs <- err
					return
				}
				if k.tamper {
					req.Body = io.NopCloser(strings.NewReader("COMMIT"))
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					errs <- err
					return
				}
				if resp.StatusCode == http.StatusOK {
					committed.Add(1)
				}
				if !slices.Contains(k.want, resp.StatusCode) {
					err = fmt.Errorf("%q (chunked %v, tampered %v): %d %q, want one of %v", k.body, k.chunked, k.tamper, resp.StatusCode, got, k.want)
				}
				errs <- err
			}()
		}
	}
	for range len(kinds) * perKind {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := budget.InUse(); n != 0 {
		t.Errorf("InUse = %d after every request, want 0", n)
	}
	if n := unverified.Load(); n != 0 {
		t.Errorf("next ran %d times without a principal", n)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != int(committed.Load()) {
		t.Errorf("committed rows = %d (%v), want one for each of the %d answers 200", n, err, committed.Load())
	}
}

// txEngines open a Store on each engine with the items table; PostgreSQL
// where a server can be had (COURIER_PG_REQUIRE=1 makes it required).
var txEngines = []struct {
	name string
	open func(t *testing.T) txBundle
}{
	{"sqlite", setupTx},
	{"postgres", func(t *testing.T) txBundle {
		t.Helper()
		s := couriertest.PostgresStore(t, store.Config{})
		db := s.DB()
		db.MustExecContext(t.Context(), `
			CREATE TABLE items (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE);
			CREATE TABLE parents (id BIGINT PRIMARY KEY);
			CREATE TABLE children (
				id        BIGSERIAL PRIMARY KEY,
				parent_id BIGINT NOT NULL REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED
			)`)
		return txBundle{store: s, db: db}
	}},
}

// TestTransactionClientGoneMidHandler: the client goes away while next
// works in the request's transaction, and next goes on to answer 200.
// The request's context ending rolls the transaction back, unless the
// commit gets in first (the transaction's context, derived from the
// request's, ends a moment after it): either way Transaction's answer says what
// happened, 503 with nothing committed or 200 with all of it, never a
// success over a rollback.
func TestTransactionClientGoneMidHandler(t *testing.T) {
	t.Parallel()
	for _, e := range txEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			b := e.open(t)
			inserted, done := make(chan struct{}), make(chan int, 1)
			app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				close(inserted)
				<-r.Context().Done() // the client is gone
				io.WriteString(w, "ok")
			})
			h := middleware.Transaction(b.store.Begin)(app)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sw := &statusWriter{ResponseWriter: w}
				h.ServeHTTP(sw, r)
				done <- sw.status
			}))
			t.Cleanup(srv.Close)

			ctx, cancel := context.WithCancel(t.Context())
			go func() { <-inserted; cancel() }()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
			if resp, err := srv.Client().Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("client got %d, want its request canceled", resp.StatusCode)
			}
			status := <-done
			n, err := countItems(t.Context(), b.db)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[int]int{http.StatusServiceUnavailable: 0, http.StatusOK: 1}; want[status] != n || (status != http.StatusOK && status != http.StatusServiceUnavailable) {
				t.Errorf("Transaction answered %d with %d rows committed, want 503 with none or 200 with one", status, n)
			}
		})
	}
}

// TestTransactionCommitFailsOnEachEngine: next answers 201 for work whose
// commit fails: a deferred constraint on either engine, or, on
// PostgreSQL, a statement next saw fail and went on past (PostgreSQL
// refuses the rest of that transaction and turns its COMMIT into a
// rollback). The client gets 503 internal_error, and nothing is committed.
func TestTransactionCommitFailsOnEachEngine(t *testing.T) {
	t.Parallel()
	work := []struct {
		name   string
		pgOnly bool // SQLite goes on after a failed statement, and commits
		do     func(t *testing.T, r *http.Request, tx *sqlx.Tx)
	}{
		{name: "deferred constraint", do: func(t *testing.T, r *http.Request, tx *sqlx.Tx) {
			if _, err := tx.ExecContext(r.Context(), `INSERT INTO children (parent_id) VALUES (99)`); err != nil {
				t.Errorf("insert child: %v", err)
			}
		}},
		{name: "a statement failed", pgOnly: true, do: func(t *testing.T, r *http.Request, tx *sqlx.Tx) {
			if _, err := tx.ExecContext(r.Context(), `INSERT INTO items (name) VALUES ('a')`); err == nil {
				t.Error("duplicate insert succeeded")
			}
		}},
	}
	for _, e := range txEngines {
		for _, w := range work {
			if w.pgOnly && e.name != "postgres" {
				continue
			}
			t.Run(e.name+"/"+w.name, func(t *testing.T) {
				t.Parallel()
				b := e.open(t)
				h := middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					insertItem(t, r)
					tx, _ := middleware.TxFromContext(r.Context())
					w.do(t, r, tx)
					rw.WriteHeader(http.StatusCreated)
				}))
				srv := httptest.NewServer(h)
				t.Cleanup(srv.Close)
				resp := post(t, srv.Client(), srv.URL, nil, false, nil)
				got := readAll(t, resp)
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("status = %d, want 503 (body %q)", resp.StatusCode, got)
				}
				if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
					t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
				}
				if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
					t.Errorf("committed rows = %d (%v), want 0", n, err)
				}
			})
		}
	}
}

// TestRecoverInsideTransaction: with Recover inside Transaction, a panic
// after next wrote part of its response found the response started and
// aborted the connection, though Transaction had held every byte of it:
// the client got a broken connection for a 500 that could still be sent.
func TestRecoverInsideTransaction(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	h := middleware.Transaction(b.store.Begin)(middleware.Recover(nil)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		w.Header().Set("X-Handler", "set")
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush() // held all the same
		panic("boom")
	})))
	srv := httptest.NewServer(observeSend(b.db, h))
	t.Cleanup(srv.Close)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v, want a 500", err)
	}
	got := readAll(t, resp)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500 (body %q)", resp.StatusCode, got)
	}
	if p := readProblem(t, resp.StatusCode, resp.Header, got); p.Code != courier.CodeInternal {
		t.Errorf("code = %q, want %q", p.Code, courier.CodeInternal)
	}
	if h := resp.Header; h.Get("X-Handler") != "" || h.Get("X-Outer") != "kept" {
		t.Errorf("headers %v, want the outer middleware's only", h)
	}
	if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
		t.Errorf("committed rows = %d (%v), want 0", n, err)
	}
}

// TestTransactionOverAClosedStoreIs503: Transaction over the Begin of a
// Store that was closed (a shutdown that closed it before the server was
// done) answers 503 internal_error with Retry-After, and next never runs.
func TestTransactionOverAClosedStoreIs503(t *testing.T) {
	t.Parallel()
	b := setupTx(t)
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	beginFails(t, b.store.Begin)
}

package middleware_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/ctxtest"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/middleware"
)

// TestTransactionFailureIsLogged: a transaction Transaction could not
// commit (a deferred constraint next's work broke, on either engine; on
// PostgreSQL, a statement next went on past, which aborted it) or begin
// was answered 503 and logged nowhere: the operator saw a client's
// retries and no cause. Under a Recover, it is logged at Error through
// Recover's logger, with its status, code and cause (saying what may
// abort a transaction), never the request's body; without one, the
// answer is the same, and the line goes to slog's default logger
// (TestTransactionWithoutRecoverIsHeard).
func TestTransactionFailureIsLogged(t *testing.T) {
	t.Parallel()
	const secret = "body-marker-5d2e"
	for _, e := range txEngines {
		for _, tc := range []struct {
			name, msg string
			begin     func(b txBundle) func(ctx context.Context) (*sqlx.Tx, error)
			// aborted: next goes on past a failed statement (PostgreSQL
			// then rolls the commit back), rather than break a deferred
			// constraint.
			aborted bool
		}{
			{name: "commit", msg: "middleware: transaction could not commit", begin: func(b txBundle) func(ctx context.Context) (*sqlx.Tx, error) { return b.store.Begin }},
			{name: "commit of an aborted transaction", msg: "middleware: transaction could not commit", aborted: true,
				begin: func(b txBundle) func(ctx context.Context) (*sqlx.Tx, error) { return b.store.Begin }},
			{name: "begin", msg: "middleware: transaction could not begin", begin: func(txBundle) func(ctx context.Context) (*sqlx.Tx, error) {
				return func(context.Context) (*sqlx.Tx, error) { return nil, errors.New("no connection") }
			}},
		} {
			if tc.aborted && e.name != "postgres" {
				continue // SQLite goes on after a failed statement, and commits
			}
			t.Run(e.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				b := e.open(t)
				app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					tx, _ := middleware.TxFromContext(r.Context())
					if tc.aborted {
						insertItem(t, r)
						if _, err := tx.ExecContext(r.Context(), `INSERT INTO items (name) VALUES ('a')`); err == nil {
							t.Error("duplicate insert succeeded")
						}
					} else if _, err := tx.ExecContext(r.Context(), tx.Rebind(`INSERT INTO children (parent_id) VALUES (99)`)); err != nil {
						t.Errorf("insert child: %v", err)
					}
					w.WriteHeader(http.StatusCreated)
					w.Write(body)
				})
				for _, recovered := range []bool{true, false} {
					var logs logtest.Records
					h := middleware.Transaction(tc.begin(b))(app)
					if recovered {
						h = middleware.Recover(slog.New(&logs))(h)
					}
					srv := httptest.NewServer(h)
					resp := post(t, srv.Client(), srv.URL, []byte(secret), false, nil)
					got := readAll(t, resp)
					srv.Close()
					if p := readProblem(t, resp.StatusCode, resp.Header, got); resp.StatusCode != http.StatusServiceUnavailable || p.Code != courier.CodeInternal {
						t.Fatalf("answered %d %s, want 503 internal_error", resp.StatusCode, got)
					}
					recs := logs.All()
					if !recovered {
						continue
					}
					if len(recs) != 1 {
						t.Fatalf("%d log records %v, want 1", len(recs), recs)
					}
					r := recs[0]
					a := map[string]string{}
					r.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value.String(); return true })
					if r.Level != slog.LevelError || r.Message != tc.msg || a[logkey.Code] != string(courier.CodeInternal) ||
						a[logkey.HTTPStatus] != "503" || a[logkey.Error] == "" || len(logkey.Undocumented(r)) != 0 {
						t.Fatalf("logged %s %q %v, want Error %q with code, http_status and error", r.Level, r.Message, a, tc.msg)
					}
					if tc.aborted && !strings.Contains(a[logkey.Error], "aborted") {
						t.Fatalf("logged error %q, want it to say a failed statement aborted the transaction", a[logkey.Error])
					}
					if strings.Contains(a[logkey.Error], secret) {
						t.Fatalf("the log line holds the request's body: %v", a)
					}
				}
			})
		}
	}
}

// TestTransactionEndedByItsClientIsLoggedAtInfo: the client goes away
// while next works (net/http ends the request's context, and database/sql
// rolls the transaction back; next waits for that, and answers 200):
// Transaction answers 503, logged at Info as a request its client ended,
// without an error, not as a database that failed; a request whose
// deadline passed is logged at Error, with the deadline as the cause, and
// so is one whose context was cancelled with a cause of its own (a
// server's BaseContext at shutdown), with that cause: it was logged as a
// client that went away.
func TestTransactionEndedByItsClientIsLoggedAtInfo(t *testing.T) {
	t.Parallel()
	type cancelKey struct{}
	shuttingDown := errors.New("the server is shutting down")
	for _, ends := range []string{"client gone", "deadline", "cancelled with a cause"} {
		t.Run(ends, func(t *testing.T) {
			t.Parallel()
			b := setupTx(t)
			var logs logtest.Records
			h := middleware.Recover(slog.New(&logs))(middleware.Transaction(b.store.Begin)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				insertItem(t, r)
				r.Context().Value(cancelKey{}).(func())() // the client goes away, or the deadline passes
				<-r.Context().Done()
				tx, _ := middleware.TxFromContext(r.Context())
				for { // until database/sql has rolled tx back
					if _, err := tx.ExecContext(context.WithoutCancel(r.Context()), "SELECT 1"); errors.Is(err, sql.ErrTxDone) {
						break
					}
					runtime.Gosched()
				}
				w.WriteHeader(http.StatusOK)
			})))
			var ctx context.Context
			var end func()
			switch ends {
			case "deadline":
				ctx, end = ctxtest.WithDeadline(t.Context())
			case "cancelled with a cause":
				var cancel context.CancelCauseFunc
				ctx, cancel = context.WithCancelCause(t.Context())
				end = func() { cancel(shuttingDown) }
				defer cancel(nil)
			default:
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(t.Context())
				end = func() { cancel() }
				defer cancel()
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequestWithContext(context.WithValue(ctx, cancelKey{}, end), http.MethodPost, "/", nil))
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("answered %d %s, want 503", rec.Code, rec.Body)
			}
			if n, err := countItems(t.Context(), b.db); err != nil || n != 0 {
				t.Fatalf("committed rows = %d (%v), want 0", n, err)
			}
			recs := logs.All()
			if len(recs) != 1 || len(logkey.Undocumented(recs[0])) != 0 {
				t.Fatalf("log records %v, want one", recs)
			}
			r := recs[0]
			a := map[string]string{}
			r.Attrs(func(at slog.Attr) bool { a[at.Key] = at.Value.String(); return true })
			switch {
			case ends == "client gone" && (r.Level != slog.LevelInfo || r.Message != "middleware: transaction ended by its client" || a[logkey.Error] != ""):
				t.Fatalf("logged %s %q %v, want the transaction ended by its client, at Info", r.Level, r.Message, a)
			case ends == "deadline" && (r.Level != slog.LevelError || !strings.Contains(a[logkey.Error], context.DeadlineExceeded.Error())):
				t.Fatalf("logged %s %q %v, want Error with the deadline as the cause", r.Level, r.Message, a)
			case ends == "cancelled with a cause" && (r.Level != slog.LevelError || !strings.Contains(a[logkey.Error], shuttingDown.Error())):
				t.Fatalf("logged %s %q %v, want Error with the context's cause", r.Level, r.Message, a)
			}
		})
	}
}

package handler_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/ctxtest"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/logtest"
	"github.com/courier-go/courier/store"
)

// The tests of this file run application functions that misuse the
// transaction they are given, in every receiver, and check what the
// sender gets, what is stored and what is logged, and that the
// redelivery then behaves.

// TestAFunctionThatGoesOnPastAFailedStatement: on PostgreSQL a statement
// that fails aborts its transaction (SQLSTATE 25P02 for every statement
// after it, and COMMIT rolls back). A function that ignores such a
// failure and returns nil cannot have its effects committed: the request
// is answered 503 internal_error with Retry-After (a lost transaction,
// as the store answers a statement run in one), nothing of it is stored,
// and the line at Error says the transaction was aborted, with none of
// the request's content. A Terminal receiver logged only "commit
// unexpectedly resulted in rollback", as if the database had failed. The
// redelivery runs the function again and is accepted once.
func TestAFunctionThatGoesOnPastAFailedStatement(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := openPostgresStore(t, store.Config{})
		if _, err := s.DB().Exec("CREATE TABLE app_effects (k TEXT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		var logs logtest.Records
		var once atomic.Bool
		e := target.open(t, anyOptions{store: s, logger: slog.New(&logs), appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO app_effects (k) VALUES ('a')"); err != nil {
				return err
			}
			if once.CompareAndSwap(false, true) { // the first run inserts again, and ignores the failure
				if _, err := tx.ExecContext(ctx, "INSERT INTO app_effects (k) VALUES ('a')"); err == nil {
					t.Error("the second insert succeeded")
				}
			}
			return nil
		}})
		rec := serve(e.handler, e.request(t))
		if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal || rec.Header().Get("Retry-After") == "" {
			t.Fatalf("answered %d %s (Retry-After %q), want 503 internal_error with Retry-After", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
		if inbox, _ := e.written(t); inbox != 0 || rows(t, s, "app_effects") != 0 {
			t.Fatalf("%d inbox records, %d effects stored; want none", inbox, rows(t, s, "app_effects"))
		}
		recs := logs.All()
		if len(recs) != 1 || recs[0].Level != slog.LevelError || len(logkey.Undocumented(recs[0])) != 0 {
			t.Fatalf("log records %v, want one at Error", recs)
		}
		cause := attrs(recs[0])[logkey.Error]
		if !strings.Contains(cause, "aborted") || strings.Contains(cause, bodyMarker) {
			t.Fatalf("logged error %q: want it to say the transaction was aborted, without the request's content", cause)
		}
		if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		if inbox, _ := e.written(t); inbox != 1 || rows(t, s, "app_effects") != 1 || e.calls.Load() != 2 {
			t.Fatalf("%d inbox records, %d effects after %d calls; want 1, 1 after 2", inbox, rows(t, s, "app_effects"), e.calls.Load())
		}
	})
}

// TestAnEnqueueInTheFunctionCommitsWithTheInboxRecord: a function that
// enqueues a notification of its own through the transaction it is given
// (Outbox.Enqueue with tx: allowed, unlike the Store's writes in
// transactions of their own) commits it with the Inbox record, on both
// engines, or neither: a run that fails after enqueuing leaves no
// delivery and no completed record, the redelivery enqueues it and is
// accepted, and the next redelivery is answered from the Inbox without
// enqueuing again.
func TestAnEnqueueInTheFunctionCommitsWithTheInboxRecord(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
				s := engine.open(t)
				var runs atomic.Int32
				e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
					if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "relayed-1", Endpoint: "https://next.example/hooks",
						Payload: []byte(`{"relayed":true}`)}); err != nil {
						return err
					}
					if runs.Add(1) == 1 {
						return errors.New("application trouble after the enqueue")
					}
					return nil
				}})
				completed := func() int {
					var n int
					if err := s.DB().Get(&n, "SELECT COUNT(*) FROM courier_inbox WHERE status = 'completed'"); err != nil {
						t.Fatal(err)
					}
					return n
				}
				rec := serve(e.handler, e.request(t))
				if p := problemOf(t, rec); rec.Code != http.StatusInternalServerError || p.Code != courier.CodeHandlerFailed {
					t.Fatalf("the failed run: answered %d %s, want 500 handler_failed", rec.Code, rec.Body)
				}
				if _, outbox := e.written(t); outbox != 0 || completed() != 0 {
					t.Fatalf("after the failed run: %d deliveries, %d completed records; want none", outbox, completed())
				}
				for i := range 2 {
					if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
						t.Fatalf("redelivery %d: answered %d %s, want %d", i+1, rec.Code, rec.Body, e.ok)
					}
					if _, outbox := e.written(t); outbox != 1 || completed() != 1 || e.calls.Load() != 2 {
						t.Fatalf("after redelivery %d: %d deliveries, %d completed records after %d calls; want 1, 1 after 2",
							i+1, outbox, completed(), e.calls.Load())
					}
				}
			})
		})
	}
}

// TestARequestEndedUnderTheFunctionIsLoggedAsSuch: the request's context
// ends while the function runs (its client goes away, or its deadline
// passes), and the function goes on and returns nil; database/sql has
// rolled its transaction back by then. The request is answered 503
// internal_error and nothing is stored, on both engines; the redelivery
// is accepted. The log line said "sql: transaction has already been
// committed or rolled back", at Error for a client that went away too
// (an alert for every hang-up), as if the store had failed. It is logged
// as a request ended by its client (Info), or with its deadline as the
// cause (Error). A context cancelled with a cause of its own (a server's
// BaseContext at shutdown) is no client's doing: it was logged as a
// client that went away, at Info, though the client got the answer; it
// is logged at Error with the cause.
// errShuttingDown is the cause a server cancels its requests' contexts
// with, at shutdown.
var errShuttingDown = errors.New("the server is shutting down")

func TestARequestEndedUnderTheFunctionIsLoggedAsSuch(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		for _, ends := range []string{"client gone", "deadline", "cancelled with a cause"} {
			t.Run(engine.name+"/"+ends, func(t *testing.T) {
				t.Parallel()
				eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
					var logs logtest.Records
					var once atomic.Bool
					e := target.open(t, anyOptions{store: engine.open(t), logger: slog.New(&logs), appTx: func(ctx context.Context, tx *sqlx.Tx) error {
						if !once.CompareAndSwap(false, true) {
							return nil
						}
						ctx.Value(requestCancelKey{}).(func())() // the client goes away, or the deadline passes
						<-ctx.Done()
						for { // until database/sql has rolled tx back
							if _, err := tx.ExecContext(context.WithoutCancel(ctx), "SELECT 1"); errors.Is(err, sql.ErrTxDone) {
								return nil
							}
							runtime.Gosched()
						}
					}})
					req := e.request(t)
					var ctx context.Context
					var end func()
					switch ends {
					case "deadline":
						ctx, end = ctxtest.WithDeadline(req.Context())
					case "cancelled with a cause":
						var cancel context.CancelCauseFunc
						ctx, cancel = context.WithCancelCause(req.Context())
						end = func() { cancel(errShuttingDown) }
						defer cancel(nil)
					default:
						var cancel context.CancelFunc
						ctx, cancel = context.WithCancel(req.Context())
						end = func() { cancel() }
						defer cancel()
					}
					rec := serve(e.handler, req.WithContext(context.WithValue(ctx, requestCancelKey{}, end)))
					if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal {
						t.Fatalf("answered %d %s, want 503 internal_error", rec.Code, rec.Body)
					}
					if inbox, _ := e.written(t); inbox != 0 {
						t.Fatalf("%d inbox records, want none", inbox)
					}
					recs := logs.All()
					if len(recs) != 1 || len(logkey.Undocumented(recs[0])) != 0 {
						t.Fatalf("log records %v, want one", recs)
					}
					switch r := recs[0]; {
					case ends == "client gone" && (r.Level != slog.LevelInfo || r.Message != "handler: request ended by its client"):
						t.Fatalf("logged %s %q %v, want the request ended by its client, at Info", r.Level, r.Message, attrs(r))
					case ends == "deadline" && (r.Level != slog.LevelError || !strings.Contains(attrs(r)[logkey.Error], context.DeadlineExceeded.Error())):
						t.Fatalf("logged %s %q %v, want Error with the deadline as the cause", r.Level, r.Message, attrs(r))
					case ends == "cancelled with a cause" && (r.Level != slog.LevelError || !strings.Contains(attrs(r)[logkey.Error], errShuttingDown.Error())):
						t.Fatalf("logged %s %q %v, want Error with the context's cause", r.Level, r.Message, attrs(r))
					}
					if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
						t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
					}
					if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 2 {
						t.Fatalf("%d inbox records after %d calls; want 1 after 2", inbox, e.calls.Load())
					}
				})
			})
		}
	}
}

// TestATransactionUsedAfterTheFunctionReturnedWritesNothing: a function
// that hands its transaction to a goroutine, which writes through it once
// the request is answered. The receiver committed the transaction when
// the function returned: the late write fails with sql.ErrTxDone and
// writes nothing, on both engines; what the function wrote before it
// returned is committed with the Inbox record, and the redelivery is
// answered from it.
func TestATransactionUsedAfterTheFunctionReturnedWritesNothing(t *testing.T) {
	t.Parallel()
	for _, engine := range engines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
				s := engine.open(t)
				if _, err := s.DB().Exec("CREATE TABLE app_effects (k TEXT NOT NULL)"); err != nil {
					t.Fatal(err)
				}
				answered, late := make(chan struct{}), make(chan error, 1)
				e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
					go func() {
						<-answered
						_, err := tx.ExecContext(context.WithoutCancel(ctx), "INSERT INTO app_effects (k) VALUES ('late')")
						late <- err
					}()
					_, err := tx.ExecContext(ctx, "INSERT INTO app_effects (k) VALUES ('own')")
					return err
				}})
				if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
					t.Fatalf("answered %d %s, want %d", rec.Code, rec.Body, e.ok)
				}
				close(answered)
				if err := <-late; !errors.Is(err, sql.ErrTxDone) {
					t.Fatalf("the write after the function returned: %v, want sql.ErrTxDone", err)
				}
				if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
					t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
				}
				if inbox, _ := e.written(t); inbox != 1 || rows(t, s, "app_effects") != 1 || e.calls.Load() != 1 {
					t.Fatalf("%d inbox records, %d effects after %d calls; want 1, 1 after 1", inbox, rows(t, s, "app_effects"), e.calls.Load())
				}
			})
		})
	}
}

// codedError is an application's error type with a code of its own.
type codedError struct{ code string }

func (e codedError) Error() string { return "app: " + e.code }
func (e codedError) Code() string  { return e.code }

// TestWhatTheFunctionReturnsIsAnsweredAsItsOwn: the errors a function may
// return, wrapped, each answered by every receiver as the package doc's
// table says, with nothing stored, and logged (a 5xx at Error, with the
// cause; the request is not gone, so a context error of the function's
// own is no client's). A courier code the store or the request would be
// answered with (invalid_argument, a validation error, in_progress) is
// the application's failure here: 500 handler_failed, never 400 or
// another 503. A database_unavailable is the store's: 503 with
// Retry-After. A wrapped Reject is a refusal. The redelivery, the
// function succeeding, is accepted.
func TestWhatTheFunctionReturnsIsAnsweredAsItsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    func(ctx context.Context) error
		status int
		code   courier.Code
	}{
		{"its own error type with a code", func(context.Context) error { return fmt.Errorf("apply: %w", codedError{"ledger_closed"}) }, 500, courier.CodeHandlerFailed},
		{"invalid_argument", func(context.Context) error { return fmt.Errorf("apply: %w", courier.CodeInvalidArgument) }, 500, courier.CodeHandlerFailed},
		{"a validation error", func(context.Context) error {
			return fmt.Errorf("apply: %w", &ack.ValidationError{Fields: []ack.FieldError{{Field: "x", Rule: "required"}}})
		}, 500, courier.CodeHandlerFailed},
		{"in_progress", func(context.Context) error { return fmt.Errorf("apply: %w", courier.CodeInProgress) }, 500, courier.CodeHandlerFailed},
		{"its own deadline", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 0)
			defer cancel()
			<-ctx.Done()
			return fmt.Errorf("calling a service: %w", ctx.Err())
		}, 500, courier.CodeHandlerFailed},
		{"its own cancellation", func(ctx context.Context) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return fmt.Errorf("calling a service: %w", ctx.Err())
		}, 500, courier.CodeHandlerFailed},
		{"database_unavailable", func(context.Context) error { return fmt.Errorf("relay: %w", courier.CodeDatabaseUnavailable) }, 503, courier.CodeInternal},
		{"a wrapped rejection", func(context.Context) error { return fmt.Errorf("apply: %w", handler.Reject("plan_unknown", "")) }, 422, "plan_unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
				var logs logtest.Records
				var once atomic.Bool
				e := target.open(t, anyOptions{logger: slog.New(&logs), app: func(ctx context.Context) error {
					if once.CompareAndSwap(false, true) {
						return tc.err(ctx)
					}
					return nil
				}})
				rec := serve(e.handler, e.request(t))
				if p := problemOf(t, rec); rec.Code != tc.status || p.Code != tc.code {
					t.Fatalf("answered %d %s, want %d %s", rec.Code, rec.Body, tc.status, tc.code)
				}
				if ra := rec.Header().Get("Retry-After"); (tc.status == 503) != (ra != "") {
					t.Fatalf("answered %d with Retry-After %q", rec.Code, ra)
				}
				if inbox, _ := e.written(t); inbox != 0 {
					t.Fatalf("%d inbox records, want none", inbox)
				}
				recs := logs.All()
				wantLevel := slog.LevelInfo
				if tc.status >= 500 {
					wantLevel = slog.LevelError
				}
				if len(recs) != 1 || recs[0].Level != wantLevel || (tc.status >= 500) != (attrs(recs[0])[logkey.Error] != "") ||
					strings.Contains(attrs(recs[0])[logkey.Error], bodyMarker) {
					t.Fatalf("log records %v, want one at %s", recs, wantLevel)
				}
				if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
					t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
				}
				if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 2 {
					t.Fatalf("%d inbox records after %d calls; want 1 after 2", inbox, e.calls.Load())
				}
			})
		})
	}
}

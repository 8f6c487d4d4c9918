package handler_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestAFunctionThatEndsItsTransactionHasFailed: a function must leave its
// transaction's commit or rollback to the receiver; one that ends tx
// itself has failed (500 handler_failed), not the store (503, which it
// was answered before). One that commits tx itself commits its effects
// with the Inbox record of a Receiver or a Source, so the redelivery is
// answered from the record without the function running again; a Source
// stores its response in a transaction of its own and answers it at once
// (before, its record stayed processing and every redelivery was answered
// 503 in_progress, for good). A Reporting receiver completes its claim
// after the function, so there, as its doc says, the retry runs the
// function again. One that rolls tx back itself has written nothing, and
// the redelivery runs it again.
func TestAFunctionThatEndsItsTransactionHasFailed(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name  string
		end   func(tx *sqlx.Tx) error
		first func(target anyReceiver, ok int) (int, courier.Code)
		calls int32
	}{
		{"commit", (*sqlx.Tx).Commit, func(target anyReceiver, ok int) (int, courier.Code) {
			if target.name == "Source" {
				return ok, ""
			}
			return http.StatusInternalServerError, courier.CodeHandlerFailed
		}, 1},
		{"rollback", (*sqlx.Tx).Rollback, func(anyReceiver, int) (int, courier.Code) {
			return http.StatusInternalServerError, courier.CodeHandlerFailed
		}, 2},
	}
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		for _, end := range ends {
			t.Run(end.name, func(t *testing.T) {
				var ended atomic.Bool // the first call only
				e := target.open(t, anyOptions{appTx: func(_ context.Context, tx *sqlx.Tx) error {
					if ended.CompareAndSwap(false, true) {
						return end.end(tx)
					}
					return nil
				}})
				rec := serve(e.handler, e.request(t))
				status, code := end.first(target, e.ok)
				if rec.Code != status || (code != "" && problemOf(t, rec).Code != code) {
					t.Fatalf("the function ended its transaction (%s): answered %d %s, want %d %s", end.name, rec.Code, rec.Body, status, code)
				}
				if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
					t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
				}
				var processing int
				if err := e.store.DB().Get(&processing, "SELECT COUNT(*) FROM courier_inbox WHERE status <> 'completed'"); err != nil {
					t.Fatal(err)
				}
				calls := end.calls
				if target.name == "Reporting" {
					calls = 2 // its claim completes after the function
				}
				if inbox, _ := e.written(t); inbox != 1 || processing != 0 || e.calls.Load() != calls {
					t.Fatalf("%d inbox records (%d not completed) after %d calls; want 1 completed after %d", inbox, processing, e.calls.Load(), calls)
				}
			})
		}
	})
}

// TestATransactionEndedWithItsRequestIsNotTheFunctions: the request's
// context ends after the function returned and before the receiver
// commits: database/sql rolls the transaction back, and the commit fails
// as it would for a function that ended it itself. That is not the
// function's failure: 503 internal_error, as for a store that could not
// commit, and the redelivery runs the function again.
func TestATransactionEndedWithItsRequestIsNotTheFunctions(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		type cancelKey struct{}
		var once atomic.Bool
		e := target.open(t, anyOptions{appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			if once.CompareAndSwap(false, true) {
				ctx.Value(cancelKey{}).(context.CancelFunc)() // the request ends
				for {                                         // until database/sql has rolled tx back
					if _, err := tx.ExecContext(context.WithoutCancel(ctx), "SELECT 1"); errors.Is(err, sql.ErrTxDone) {
						break
					}
					runtime.Gosched()
				}
			}
			return nil
		}})
		req := e.request(t)
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		rec := serve(e.handler, req.WithContext(context.WithValue(ctx, cancelKey{}, context.CancelFunc(cancel))))
		if p := problemOf(t, rec); rec.Code != http.StatusServiceUnavailable || p.Code != courier.CodeInternal {
			t.Fatalf("the request ended before the commit: answered %d %s, want 503 internal_error", rec.Code, rec.Body)
		}
		if rec = serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		if inbox, _ := e.written(t); inbox != 1 || e.calls.Load() != 2 {
			t.Fatalf("%d inbox records after %d calls; want 1 after 2", inbox, e.calls.Load())
		}
	})
}

// TestAFunctionThatCommitsAndThenFailsIsNotStuck: a function that commits
// its transaction itself and then fails (here: returns an error). A
// Source's record, committed still processing, answered every redelivery
// 503 in_progress, for good; it is given back, and the retry runs the
// function again, as a Reporting receiver's claim is. A Receiver's record
// was committed completed: the redelivery is answered from it.
func TestAFunctionThatCommitsAndThenFailsIsNotStuck(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		var failed atomic.Bool
		e := target.open(t, anyOptions{appTx: func(_ context.Context, tx *sqlx.Tx) error {
			if failed.CompareAndSwap(false, true) {
				if err := tx.Commit(); err != nil {
					return err
				}
				return errors.New("a step after the commit failed")
			}
			return nil
		}})
		if rec := serve(e.handler, e.request(t)); rec.Code != http.StatusInternalServerError || problemOf(t, rec).Code != courier.CodeHandlerFailed {
			t.Fatalf("the function failed: answered %d %s, want 500 handler_failed", rec.Code, rec.Body)
		}
		if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the redelivery: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		calls := int32(2)
		if target.name == "Terminal" {
			calls = 1 // its record was committed completed
		}
		if e.calls.Load() != calls {
			t.Fatalf("the function ran %d times, want %d", e.calls.Load(), calls)
		}
	})
}

// TestASourceCompletesOnlyItsOwnRecord: request A's function rolls its
// transaction back itself and returns nil, so A's record is gone; before
// A stores its response alone, request B of the same command records
// afresh and its function commits itself. A completed B's record with its
// own response and answered 200 applied though nothing of A was applied.
// A's record is fenced by its token: A's function failed.
func TestASourceCompletesOnlyItsOwnRecord(t *testing.T) {
	t.Parallel()
	s := anyStore(t)
	verifier, signer := anyStandardWebhooks(t)
	body := func(note string) []byte {
		return sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"note":"`+note+`"}`)
	}
	post := func(b []byte, attempt string) *http.Request {
		req := anySigned(t, signer, "change:r1", b)
		req.Header.Set(ack.AttemptHeader, attempt)
		return req
	}
	var h http.Handler
	var calls atomic.Int32
	bCommitted, aAnswered, bDone := make(chan struct{}), make(chan struct{}), make(chan int)
	src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest},
		func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			switch calls.Add(1) {
			case 1: // A rolls back itself and says nothing; B comes meanwhile
				if err := tx.Rollback(); err != nil {
					return err
				}
				go func() { bDone <- serve(h, post(body("B"), "1")).Code }()
				<-bCommitted
			case 2: // B commits itself, and waits for A's answer
				if err := tx.Commit(); err != nil {
					return err
				}
				close(bCommitted)
				<-aAnswered
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	h = src
	recA := serve(h, post(body("A"), "1"))
	close(aAnswered)
	codeB := <-bDone
	if recA.Code != http.StatusInternalServerError || codeB != http.StatusOK {
		t.Fatalf("A, rolled back, answered %d %s; B, committed, answered %d; want 500 and 200", recA.Code, recA.Body, codeB)
	}
}

type requestCancelKey struct{}

// sourceNotStuck runs a Source whose first call does first(ctx, tx),
// which may end the first request (its context's requestCancelKey), and
// then checks that the redeliveries are answered 200, not 503 in_progress
// for good, and, unless wantCalls is 0, that the function ran wantCalls
// times. A panic of the first request (a Logger's) is the server's to
// recover, as net/http does.
func sourceNotStuck(t *testing.T, logger func(cancel *atomic.Pointer[context.CancelFunc]) *slog.Logger,
	wantCalls int32, first func(ctx context.Context, tx *sqlx.Tx) error) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { sourceNotStuckOn(t, pg, logger, wantCalls, first) })
	}
}

func sourceNotStuckOn(t *testing.T, pg bool, logger func(cancel *atomic.Pointer[context.CancelFunc]) *slog.Logger,
	wantCalls int32, first func(ctx context.Context, tx *sqlx.Tx) error) {
	s := anyStore(t)
	if pg {
		s = openPostgresStore(t, store.Config{})
	}
	verifier, signer := anyStandardWebhooks(t)
	var cancelp atomic.Pointer[context.CancelFunc]
	var calls atomic.Int32
	var lg *slog.Logger
	if logger != nil {
		lg = logger(&cancelp)
	}
	src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest, Logger: lg},
		func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			if calls.Add(1) == 1 {
				return first(ctx, tx)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	post := oneCommand(t, signer)
	req := post()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	cf := context.CancelFunc(cancel)
	cancelp.Store(&cf)
	firstCode := 0
	func() {
		defer func() { _ = recover() }()
		firstCode = serve(src, req.WithContext(context.WithValue(ctx, requestCancelKey{}, cf))).Code
	}()
	for i := range 3 {
		rec := serve(src, post())
		if rec.Code != http.StatusOK {
			var status string
			_ = s.DB().Get(&status, "SELECT status FROM courier_inbox")
			t.Fatalf("first request %d; redelivery %d: answered %d %s (record %q, function ran %d times); want 200: the record is stuck processing for good", firstCode, i+1, rec.Code, rec.Body, status, calls.Load())
		}
	}
	if wantCalls != 0 && calls.Load() != wantCalls {
		t.Fatalf("the function ran %d times, want %d", calls.Load(), wantCalls)
	}
}

// TestASourceCommittedByItsFunctionIsNotStuck: a Source function that
// commits its transaction itself left the command's record committed
// processing, answered in_progress to every redelivery for good, when
// the request then ended: a later step of the function failed as it did,
// or it returned nil but the record could not be completed in the
// request's transaction, or the Logger panicked at the Source's warning
// before the response was stored alone. A function that failed has its
// record given back (and runs again); one that returned nil has its
// response stored alone (and runs once), whenever the request ends.
func TestASourceCommittedByItsFunctionIsNotStuck(t *testing.T) {
	t.Parallel()
	t.Run("then fails as the request ends", testSourceCommitThenFailAsRequestEnds)
	t.Run("then returns as the request ends", testSourceCommitThenRequestEnds)
	t.Run("and the request ends as the Source warns", testSourceCompleteAloneAsRequestEnds)
	t.Run("and the Logger panics at the Source's warning", testSourceLoggerPanicsAtItsWarning)
}

func testSourceCommitThenFailAsRequestEnds(t *testing.T) {
	sourceNotStuck(t, nil, 2, func(ctx context.Context, tx *sqlx.Tx) error {
		if err := tx.Commit(); err != nil {
			return err
		}
		ctx.Value(requestCancelKey{}).(context.CancelFunc)() // the client goes away
		return ctx.Err()                                     // e.g. a call made with ctx
	})
}

func testSourceCommitThenRequestEnds(t *testing.T) {
	sourceNotStuck(t, nil, 1, func(ctx context.Context, tx *sqlx.Tx) error {
		if err := tx.Commit(); err != nil {
			return err
		}
		ctx.Value(requestCancelKey{}).(context.CancelFunc)()
		return nil
	})
}

// cancelOnWarn cancels the request as a Source logs that its function
// ended the transaction: the request ends while the response is stored
// alone.
type cancelOnWarn struct {
	slog.Handler
	cancel *atomic.Pointer[context.CancelFunc]
}

func (h cancelOnWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOnWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		(*h.cancel.Load())()
	}
	return nil
}

func testSourceCompleteAloneAsRequestEnds(t *testing.T) {
	sourceNotStuck(t, func(c *atomic.Pointer[context.CancelFunc]) *slog.Logger {
		return slog.New(cancelOnWarn{Handler: slog.DiscardHandler, cancel: c})
	}, 1, func(ctx context.Context, tx *sqlx.Tx) error {
		return tx.Commit()
	})
}

// panicOnWarn is a Logger's handler that panics at Warn.
type panicOnWarn struct{ slog.Handler }

func (panicOnWarn) Enabled(context.Context, slog.Level) bool { return true }
func (panicOnWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		panic("the Logger broke")
	}
	return nil
}

func testSourceLoggerPanicsAtItsWarning(t *testing.T) {
	sourceNotStuck(t, func(*atomic.Pointer[context.CancelFunc]) *slog.Logger {
		return slog.New(panicOnWarn{Handler: slog.DiscardHandler})
	}, 1, func(ctx context.Context, tx *sqlx.Tx) error {
		return tx.Commit()
	})
}

// TestASourceRecordNotGivenBackIsGivenBackByTheRedelivery: a Source
// function committed its transaction itself and returned nil, and the
// store then stayed away (here: another connection holds SQLite's write
// lock) longer than the Source tries to store the response and then to
// give the record back. The record, left committed processing, answered
// every redelivery in_progress until Prune; the Source remembers it, and
// the redelivery gives it back first and runs the function.
func TestASourceRecordNotGivenBackIsGivenBackByTheRedelivery(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "source.db")
	s, err := sqlite.Open(t.Context(), file, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	other, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(file, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	verifier, signer := anyStandardWebhooks(t)
	testCtx := t.Context()
	var calls atomic.Int32
	var lock *sqlx.Tx
	src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: verifier, CapabilitiesSHA256: sourceDigest},
		func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			if calls.Add(1) > 1 {
				return nil
			}
			if err := tx.Commit(); err != nil {
				return err
			}
			// The store goes away: another connection, not the request's,
			// takes the write lock.
			var err error
			if lock, err = other.BeginTxx(testCtx, nil); err == nil {
				_, err = lock.Exec("UPDATE courier_schema SET version = version WHERE 0")
			}
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	post := oneCommand(t, signer)
	if rec := serve(src, post()); rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("with the store away: answered %d %s, want 503", rec.Code, rec.Body)
	}
	if err := lock.Rollback(); err != nil { // the store is back
		t.Fatal(err)
	}
	if rec := serve(src, post()); rec.Code != http.StatusOK || calls.Load() != 2 {
		t.Fatalf("the redelivery: answered %d %s after %d calls; want 200, the function run again", rec.Code, rec.Body, calls.Load())
	}
}

// oneCommand returns a maker of requests of one command, change:r1, at
// attempt 1, signed afresh each time: a request and its redeliveries.
func oneCommand(t *testing.T, signer signature.Signer) func() *http.Request {
	body := sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"note":"x"}`)
	return func() *http.Request {
		req := anySigned(t, signer, "change:r1", body)
		req.Header.Set(ack.AttemptHeader, "1")
		return req
	}
}

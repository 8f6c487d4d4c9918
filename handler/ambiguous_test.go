package handler_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
)

// TestACommitWhoseOutcomeIsUnknownIsNotAppliedTwice: on PostgreSQL the
// client goes away while the receiver's COMMIT is on the server, and the
// driver gives the commit up (it closes the connection as the request's
// context ends), so the receiver cannot tell whether it committed: it
// answers 503 internal_error. The server then commits it, the record with
// the function's writes. A Reporting receiver gives its claim back after
// a failed commit: the give-back waits for the committing transaction and
// then finds the claim completed, so it takes nothing back. The sender's
// retry is a duplicate, answered without running the function again, and
// the function's effect is written once.
func TestACommitWhoseOutcomeIsUnknownIsNotAppliedTwice(t *testing.T) {
	t.Parallel()
	eachReceiver(t, true, func(t *testing.T, target anyReceiver) {
		s := openPostgresStore(t, store.Config{})
		if _, err := s.DB().Exec("CREATE TABLE gated_effects (n INTEGER NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		gate := pgtest.HoldCommits(t, s.DB().DB, "gated_effects")
		e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO gated_effects (n) VALUES (1)")
			return err
		}})
		req := e.request(t)
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		first := make(chan *httptest.ResponseRecorder, 1)
		go func() { first <- serve(e.handler, req.WithContext(ctx)) }()
		gate.WaitHeld(t)
		cancel() // the client goes away while the COMMIT is on the server
		if target.name == "Reporting" {
			// Its claim's give-back waits for the committing transaction.
			pgtest.WaitForActivity(t, s.DB().DB, "wait_event_type = 'Lock' AND strpos(query, 'courier_inbox') > 0")
			gate.Open(t)
		}
		rec := <-first
		if target.name != "Reporting" {
			gate.Open(t)
		}
		if rec.Code != http.StatusServiceUnavailable || problemOf(t, rec).Code != courier.CodeInternal {
			t.Fatalf("the commit's outcome unknown: answered %d %s, want 503 internal_error", rec.Code, rec.Body)
		}
		if rec := serve(e.handler, e.request(t)); rec.Code != e.ok {
			t.Fatalf("the retry: answered %d %s, want %d", rec.Code, rec.Body, e.ok)
		}
		var effects, processing int
		if err := s.DB().Get(&effects, "SELECT COUNT(*) FROM gated_effects"); err != nil {
			t.Fatal(err)
		}
		if err := s.DB().Get(&processing, "SELECT COUNT(*) FROM courier_inbox WHERE status <> 'completed'"); err != nil {
			t.Fatal(err)
		}
		if effects != 1 || e.calls.Load() != 1 || processing != 0 {
			t.Fatalf("%d effects after %d calls, %d records not completed; want 1 after 1, none", effects, e.calls.Load(), processing)
		}
	})
}

// TestAClaimWhoseCommitIsCutByTheClientIsGivenBack: a Reporting receiver
// commits its claim on its own before the function runs. The client goes
// away while that COMMIT is on the server. The claim's COMMIT runs on, a
// few seconds at most (the store's
// TestAClaimWhoseContextEndsAsItCommitsIsReturned shows it, whatever the
// time); the request, ended, then gives the claim back, and the sender's
// retry processes the delivery, where a claim committed unheard of would
// answer every retry 503 in_progress until it went stale (StaleAfter, 5
// minutes by default).
func TestAClaimWhoseCommitIsCutByTheClientIsGivenBack(t *testing.T) {
	t.Parallel()
	s, e, gate, first := claimCommitCut(t)
	gate.Open(t)
	rec := <-first
	if rec.Code != http.StatusServiceUnavailable || e.calls.Load() != 0 {
		t.Fatalf("the request ended: answered %d %s after %d calls, want 503 after none", rec.Code, rec.Body, e.calls.Load())
	}
	if rec := serve(e.handler, e.request(t)); rec.Code != e.ok || e.calls.Load() != 1 {
		t.Fatalf("the retry: answered %d %s after %d calls, want %d after 1", rec.Code, rec.Body, e.calls.Load(), e.ok)
	}
	var processing int
	if err := s.DB().Get(&processing, "SELECT COUNT(*) FROM courier_inbox WHERE status <> 'completed'"); err != nil {
		t.Fatal(err)
	}
	if processing != 0 {
		t.Fatalf("%d records not completed, want none", processing)
	}
}

// TestAClaimWhoseCommitHangsIsGivenUpOnOnceTheClientIsGone: a Reporting
// receiver's claim COMMIT runs on when the client goes away, but not for
// ever: one that hangs on the server (a synchronous standby away, say) is
// given up a few seconds after the request ended, and the request answers
// 503 without running the function. The receiver held the request, and
// its connection of the pool, until the database answered, however long
// that took. The store's
// TestAClaimWhoseCommitHangsIsGivenUpOnceItsWindowEnds shows the give-up
// with a window it ends itself; this test is the one that waits out the
// real window (5 s): the receiver's request is answered with nothing but
// the store's own timer to end it.
func TestAClaimWhoseCommitHangsIsGivenUpOnOnceTheClientIsGone(t *testing.T) {
	t.Parallel()
	_, e, gate, first := claimCommitCut(t) // the COMMIT held until the test opens it
	select {
	case rec := <-first:
		if rec.Code != http.StatusServiceUnavailable || e.calls.Load() != 0 {
			t.Errorf("the request ended: answered %d %s after %d calls, want 503 after none", rec.Code, rec.Body, e.calls.Load())
		}
	case <-time.After(time.Minute): // bounded, so that a receiver that waits for the COMMIT fails the test
		gate.Open(t)
		<-first
		t.Fatal("the request ended, its claim's COMMIT held: not answered after a minute")
	}
	gate.Open(t)
}

// claimCommitCut opens a Reporting receiver (the one that commits a claim
// on its own, before the function runs) on PostgreSQL and sends it a
// delivery whose claim's COMMIT the gate it returns holds on the server;
// once the COMMIT is held, the request's context ends, as when the client
// goes away. The request's answer comes on the channel it returns.
func claimCommitCut(t *testing.T) (*store.Store, *anyEnv, *pgtest.CommitGate, <-chan *httptest.ResponseRecorder) {
	t.Helper()
	receivers := anyReceivers()
	reporting := receivers[slices.IndexFunc(receivers, func(r anyReceiver) bool { return r.name == "Reporting" })]
	s := openPostgresStore(t, store.Config{})
	gate := pgtest.HoldCommits(t, s.DB().DB, "courier_inbox")
	e := reporting.open(t, anyOptions{store: s})
	req := e.request(t)
	ctx, cancel := context.WithCancel(req.Context())
	t.Cleanup(cancel)
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(e.handler, req.WithContext(ctx)) }()
	gate.WaitHeld(t)
	cancel()
	return s, e, gate, first
}

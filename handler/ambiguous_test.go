package handler_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// commitGate is a PostgreSQL database whose transactions that write to
// table can hold their COMMIT: a deferred constraint trigger on it takes
// an advisory lock, which fires as the transaction commits, before its
// commit record is written, and waits while the test holds the lock,
// whatever the client does meanwhile.
type commitGate struct {
	db   *sqlx.DB
	conn *sql.Conn // holds the lock
}

// commitGateKey is the advisory lock a held COMMIT waits for.
const commitGateKey = 740_521

// newCommitGate puts the trigger on table, in s's database, for its
// inserts, and holds the lock: every COMMIT of an insert into table waits.
func newCommitGate(t *testing.T, s *store.Store, table string) *commitGate {
	t.Helper()
	ctx := t.Context()
	db := s.DB()
	for _, stmt := range []string{
		// A cancel request (pgx sends one as it gives a query up) is
		// ignored: it comes too late for this COMMIT, as one that arrives
		// once the commit record is written does.
		`CREATE FUNCTION ` + table + `_gate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			LOOP
				BEGIN
					PERFORM pg_advisory_xact_lock(` + strconv.Itoa(commitGateKey) + `);
					RETURN NULL;
				EXCEPTION WHEN query_canceled THEN
				END;
			END LOOP;
		END $$`,
		"CREATE CONSTRAINT TRIGGER " + table + "_gate AFTER INSERT ON " + table +
			" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + table + "_gate()",
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", commitGateKey); err != nil {
		t.Fatal(err)
	}
	return &commitGate{db: db, conn: conn}
}

// open lets the held COMMITs go on, and every one after.
func (g *commitGate) open(t *testing.T) {
	t.Helper()
	if _, err := g.conn.ExecContext(t.Context(), "SELECT pg_advisory_unlock($1)", commitGateKey); err != nil {
		t.Fatal(err)
	}
}

// waitHeld waits until a COMMIT waits at the gate.
func (g *commitGate) waitHeld(t *testing.T) {
	t.Helper()
	waitForActivity(t, g.db, "wait_event_type = 'Lock' AND wait_event = 'advisory'")
}

// waitForActivity waits until a session of db's database is as where says
// (a condition on pg_stat_activity).
func waitForActivity(t *testing.T, db *sqlx.DB, where string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		var n int
		if err := db.GetContext(ctx, &n, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "+where); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no session in pg_stat_activity where %s", where)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

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
		gate := newCommitGate(t, s, "gated_effects")
		e := target.open(t, anyOptions{store: s, appTx: func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO gated_effects (n) VALUES (1)")
			return err
		}})
		req := e.request(t)
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		first := make(chan *httptest.ResponseRecorder, 1)
		go func() { first <- serve(e.handler, req.WithContext(ctx)) }()
		gate.waitHeld(t)
		cancel() // the client goes away while the COMMIT is on the server
		if target.name == "Reporting" {
			// Its claim's give-back waits for the committing transaction.
			waitForActivity(t, s.DB(), "wait_event_type = 'Lock' AND strpos(query, 'courier_inbox') > 0")
			gate.open(t)
		}
		rec := <-first
		if target.name != "Reporting" {
			gate.open(t)
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
// away while that COMMIT is on the server. Before, the driver gave the
// COMMIT up with the request's context and the receiver answered at once,
// giving nothing back, while the server committed the claim: every retry
// of the delivery was answered 503 in_progress until the claim went stale
// (StaleAfter, 5 minutes by default). The claim's COMMIT now runs to its
// end, whatever becomes of the request meanwhile; the request, ended, then
// gives the claim back, and the sender's retry processes the delivery.
func TestAClaimWhoseCommitIsCutByTheClientIsGivenBack(t *testing.T) {
	t.Parallel()
	s, e, gate, first := claimCommitCut(t)
	// A receiver that gives the COMMIT up answers at once; one that
	// lets it run to its end answers once the gate opens. The wait is
	// bounded so that the latter is not held for good.
	var rec *httptest.ResponseRecorder
	select {
	case rec = <-first:
	case <-time.After(time.Second):
	}
	gate.open(t)
	if rec == nil {
		rec = <-first
	}
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
// 503. The receiver held the request, and its connection of the pool,
// until the database answered, however long that took.
func TestAClaimWhoseCommitHangsIsGivenUpOnOnceTheClientIsGone(t *testing.T) {
	t.Parallel()
	_, e, gate, first := claimCommitCut(t) // the COMMIT held until the test opens it
	select {
	case rec := <-first:
		if rec.Code != http.StatusServiceUnavailable || e.calls.Load() != 0 {
			t.Errorf("the request ended: answered %d %s after %d calls, want 503 after none", rec.Code, rec.Body, e.calls.Load())
		}
	case <-time.After(time.Minute): // bounded, so that a receiver that waits for the COMMIT fails the test
		gate.open(t)
		<-first
		t.Fatal("the request ended, its claim's COMMIT held: not answered after a minute")
	}
	gate.open(t)
}

// claimCommitCut opens a Reporting receiver (the one that commits a claim
// on its own, before the function runs) on PostgreSQL and sends it a
// delivery whose claim's COMMIT the gate it returns holds on the server;
// once the COMMIT is held, the request's context ends, as when the client
// goes away. The request's answer comes on the channel it returns.
func claimCommitCut(t *testing.T) (*store.Store, *anyEnv, *commitGate, <-chan *httptest.ResponseRecorder) {
	t.Helper()
	receivers := anyReceivers()
	reporting := receivers[slices.IndexFunc(receivers, func(r anyReceiver) bool { return r.name == "Reporting" })]
	s := openPostgresStore(t, store.Config{})
	gate := newCommitGate(t, s, "courier_inbox")
	e := reporting.open(t, anyOptions{store: s})
	req := e.request(t)
	ctx, cancel := context.WithCancel(req.Context())
	t.Cleanup(cancel)
	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- serve(e.handler, req.WithContext(ctx)) }()
	gate.waitHeld(t)
	cancel()
	return s, e, gate, first
}

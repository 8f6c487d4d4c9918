package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The tests of this file hold the receivers to their promise where it is
// hardest: redeliveries that arrive while the first delivery is still
// being processed, on both engines. Each asserts from the database that
// the application's effect happened exactly once, and that every answer
// is one the receiver's documentation allows.

// answered is one request's answer.
type answered struct {
	status     int
	code       courier.Code
	retryAfter string
	body       []byte
}

// answerOf reads resp into an answered.
func answerOf(resp *http.Response, body []byte) answered {
	a := answered{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: body}
	if resp.StatusCode >= 400 {
		var p reportingProblem
		_ = json.Unmarshal(body, &p)
		a.code = p.Code
	}
	return a
}

// async runs post on a goroutine; the answer arrives on the channel.
func async(post func() answered) <-chan answered {
	done := make(chan answered, 1)
	go func() { done <- post() }()
	return done
}

// step is what one run of a test's application function does after
// writing its effect: wait until hold is closed (when it is set, closing
// started first), then fail (when fail is set).
type step struct {
	started, hold chan struct{}
	fail          bool
	once          sync.Once
}

func blocked() *step { return &step{started: make(chan struct{}), hold: make(chan struct{})} }

// resume lets a held run go on; again, it does nothing.
func (st *step) resume() {
	if st != nil && st.hold != nil {
		st.once.Do(func() { close(st.hold) })
	}
}

// steps are the runs of a test's function, in call order; runs past the
// last one only write their effect.
type steps struct {
	mu  sync.Mutex
	all []*step
	n   int
}

func (s *steps) next(ctx context.Context) error {
	s.mu.Lock()
	var st *step
	if s.n < len(s.all) {
		st = s.all[s.n]
	}
	s.n++
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	if st.hold != nil {
		close(st.started)
		select {
		case <-st.hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if st.fail {
		return errors.New("application trouble")
	}
	return nil
}

// resumeAll resumes every held run, when a test ends early, so no
// request stays blocked past the server's Close.
func (s *steps) resumeAll() {
	for _, st := range s.all {
		st.resume()
	}
}

// waitForLockWaiters waits until n statements on the Inbox, in db's
// PostgreSQL database, wait for a lock.
func waitForLockWaiters(t *testing.T, db *sqlx.DB, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for {
		var waiting int
		if err := db.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND strpos(query, 'courier_inbox') > 0`); err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d statements wait for a lock, want %d", waiting, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// wantCompleted checks that the Inbox holds n records, all completed:
// the records of keys, or all of them when keys is empty.
func wantCompleted(t *testing.T, s *store.Store, n int, keys ...string) {
	t.Helper()
	var got []string
	for _, k := range keys {
		var st []string
		if err := s.DB().Select(&st, s.DB().Rebind("SELECT status FROM courier_inbox WHERE dedupe_key = ?"), k); err != nil {
			t.Fatal(err)
		}
		got = append(got, st...)
	}
	if len(keys) == 0 {
		if err := s.DB().Select(&got, "SELECT status FROM courier_inbox"); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != n {
		t.Fatalf("%d inbox records %v, want %d", len(got), got, n)
	}
	for _, st := range got {
		if st != "completed" {
			t.Fatalf("inbox records %v, want all completed", got)
		}
	}
}

// deliveryEffects counts the effects recordDelivery wrote for key.
func deliveryEffects(t *testing.T, s *store.Store, key string) int {
	t.Helper()
	var n int
	if err := s.DB().Get(&n, s.DB().Rebind("SELECT COUNT(*) FROM reporting_effects WHERE idempotency_key = ?"), key); err != nil {
		t.Fatal(err)
	}
	return n
}

func wantAnswer(t *testing.T, who string, got answered, status int, code courier.Code) {
	t.Helper()
	if got.status != status || got.code != code {
		t.Fatalf("%s: %d %s %q, want %d %s", who, got.status, got.code, got.body, status, code)
	}
	if status == http.StatusServiceUnavailable && got.retryAfter == "" {
		t.Fatalf("%s: 503 without Retry-After", who)
	}
	if status == http.StatusOK && len(got.body) != 0 {
		t.Fatalf("%s: 200 with body %q, want the reporting profile's empty one", who, got.body)
	}
}

// TestExactlyOnceReportingTakeOver: the first request's function runs
// longer than StaleAfter; the sender's retry takes the claim over and
// processes the delivery. The first then resumes: its claim was taken
// over, so it rolls back (503 in_progress, which the sender retries and
// finds answered), whether it resumes before or after the take-over
// commits, and whether the take-over itself failed and a third request
// processed the delivery. Retries that race the take-over find the key
// held (503 in_progress): one request at a time takes a claim over. The
// effect is written once, the Inbox ends completed. On SQLite the first's
// transaction holds the one writer, so the retry waits for it and finds
// the delivery completed.
func TestExactlyOnceReportingTakeOver(t *testing.T) {
	t.Parallel()
	const stale = 30 * time.Second
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		base := setupReporting(t, reportingOptions{postgres: true}) // the store, and its clock
		for i, tc := range []struct {
			name string
			// second is the take-over's step; third: a third request
			// comes, before (thirdFirst) or after the first resumes.
			second            func() *step
			third, thirdFirst bool
			// racing: as many retries more race the take-over; each
			// is answered 503 in_progress, the take-over holding the key.
			racing int
		}{
			{name: "first resumes after the take-over commits", second: func() *step { return nil }},
			{name: "first resumes while the take-over runs", second: blocked},
			{name: "take-over fails, first resumes, a third retry", second: func() *step { return &step{fail: true} }, third: true},
			{name: "take-over fails, a third retry, first resumes", second: func() *step { return &step{fail: true} }, third: true, thirdFirst: true},
			{name: "retries race to take over", second: blocked, racing: 8},
		} {
			t.Run(tc.name, func(t *testing.T) {
				first, second := blocked(), tc.second()
				s := &steps{all: []*step{first, second}}
				b := setupReporting(t, reportingOptions{store: base.store, staleAfter: stale, fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
					if err := recordDelivery(ctx, tx, n); err != nil {
						return err
					}
					return s.next(ctx)
				}})
				t.Cleanup(s.resumeAll)
				key := fmt.Sprintf("whk_takeover_%010d", i)
				report := taskWebhook(key, "", "working")
				post := func() answered { return answerOf(b.post(t, report)) }

				firstDone := async(post)
				<-first.started
				base.clock.Advance(2 * stale)
				defer base.clock.Advance(-2 * stale) // near real time again, for the signatures' expiry
				switch {
				case second == nil:
					wantAnswer(t, "take-over", post(), http.StatusOK, "")
					first.resume()
					wantAnswer(t, "first", <-firstDone, http.StatusServiceUnavailable, courier.CodeInProgress)
				case second.hold != nil:
					// The take-over and tc.racing more retries, released
					// together: one takes the claim over, the others find
					// it holding the key.
					gate := make(chan struct{})
					answers := make(chan answered, 1+tc.racing)
					for range 1 + tc.racing {
						req := b.request(t, report)
						go func() { <-gate; answers <- answerOf(b.do(t, req, report)) }()
					}
					close(gate)
					<-second.started
					for i := range tc.racing {
						wantAnswer(t, "racing retry "+strconv.Itoa(i), <-answers, http.StatusServiceUnavailable, courier.CodeInProgress)
					}
					secondDone := (<-chan answered)(answers)
					first.resume()
					wantAnswer(t, "first", <-firstDone, http.StatusServiceUnavailable, courier.CodeInProgress)
					second.resume()
					wantAnswer(t, "take-over", <-secondDone, http.StatusOK, "")
				default:
					wantAnswer(t, "take-over", post(), http.StatusInternalServerError, courier.CodeHandlerFailed)
					if tc.thirdFirst {
						wantAnswer(t, "third", post(), http.StatusOK, "")
					}
					first.resume()
					wantAnswer(t, "first", <-firstDone, http.StatusServiceUnavailable, courier.CodeInProgress)
					if !tc.thirdFirst {
						wantAnswer(t, "third", post(), http.StatusOK, "")
					}
				}
				wantAnswer(t, "a later retry", post(), http.StatusOK, "")
				wantCalls := int32(2)
				if tc.third {
					wantCalls = 3
				}
				if effects := deliveryEffects(t, b.store, key); effects != 1 || b.calls.Load() != wantCalls {
					t.Fatalf("%d effects, %d calls; want 1 and %d", effects, b.calls.Load(), wantCalls)
				}
				wantCompleted(t, b.store, 1, key)
			})
		}
	})
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		first := blocked()
		s := &steps{all: []*step{first}}
		b := setupReporting(t, reportingOptions{staleAfter: stale, fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
			if err := recordDelivery(ctx, tx, n); err != nil {
				return err
			}
			return s.next(ctx)
		}})
		t.Cleanup(s.resumeAll)
		report := deliveryReport(t)
		post := func() answered { return answerOf(b.post(t, report)) }
		firstDone := async(post)
		<-first.started
		b.clock.Advance(2 * stale)
		retryDone := async(post) // waits for the writer the first holds
		first.resume()
		wantAnswer(t, "first", <-firstDone, http.StatusOK, "")
		wantAnswer(t, "retry", <-retryDone, http.StatusOK, "")
		if _, effects := b.written(t); effects != 1 || b.calls.Load() != 1 {
			t.Fatalf("%d effects, %d calls; want 1 and 1", effects, b.calls.Load())
		}
		wantCompleted(t, b.store, 1)
	})
}

// TestExactlyOnceReportingTakeOverOfATerminalReEmission: a terminal task
// webhook's first delivery runs past StaleAfter, holding the record of its
// notification_id. A re-emission under another idempotency_key and the
// first's own retry (which takes the first's claim over) arrive
// meanwhile, and wait for the first's transaction. On PostgreSQL the
// first resumes and rolls back, its claim taken over; of the two waiting,
// one runs the function and the other is a duplicate. On SQLite the
// first's transaction holds the one writer, so both wait for it and are
// duplicates. The terminal effect is written once; all three keys end
// completed.
func TestExactlyOnceReportingTakeOverOfATerminalReEmission(t *testing.T) {
	t.Parallel()
	const stale = 30 * time.Second
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			first := blocked()
			s := &steps{all: []*step{first}}
			b := setupReporting(t, reportingOptions{postgres: engine.postgres, staleAfter: stale, fn: func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
				if err := recordDelivery(ctx, tx, n); err != nil {
					return err
				}
				return s.next(ctx)
			}})
			t.Cleanup(s.resumeAll)
			const id = "task_456.terminal"
			one := taskWebhook("whk_takeover_000000001", id, "completed")
			two := taskWebhook("whk_takeover_000000002", id, "completed")

			firstDone := async(func() answered { return answerOf(b.post(t, one)) })
			<-first.started
			reEmission := async(func() answered { return answerOf(b.post(t, two)) })
			if engine.postgres {
				waitForLockWaiters(t, b.store.DB(), 1)
			}
			b.clock.Advance(2 * stale)
			retry := async(func() answered { return answerOf(b.post(t, one)) })
			if engine.postgres {
				waitForLockWaiters(t, b.store.DB(), 2)
			}
			first.resume()
			wantCalls := int32(1)
			if engine.postgres { // taken over: rolled back
				wantAnswer(t, "first", <-firstDone, http.StatusServiceUnavailable, courier.CodeInProgress)
				wantCalls = 2
			} else { // the retry waited for the writer
				wantAnswer(t, "first", <-firstDone, http.StatusOK, "")
			}
			wantAnswer(t, "re-emission", <-reEmission, http.StatusOK, "")
			wantAnswer(t, "retry", <-retry, http.StatusOK, "")
			wantAnswer(t, "a later retry", answerOf(b.post(t, one)), http.StatusOK, "")
			if _, effects := b.written(t); effects != 1 || b.calls.Load() != wantCalls {
				t.Fatalf("%d effects, %d calls; want 1 and %d", effects, b.calls.Load(), wantCalls)
			}
			wantCompleted(t, b.store, 3)
		})
	}
}

// TestExactlyOnceReportingConcurrentReEmissions: N terminal re-emissions
// of one notification_id, each under its own idempotency_key, released
// together: the terminal effect is written once, every answer is 200 (a
// request may find another holding its own key only if it is a retry of
// it, and none is here), and every key ends completed.
func TestExactlyOnceReportingConcurrentReEmissions(t *testing.T) {
	t.Parallel()
	const n = 12
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			b := setupReporting(t, reportingOptions{postgres: engine.postgres})
			gate := make(chan struct{})
			var done []<-chan answered
			for i := range n {
				body := taskWebhook(fmt.Sprintf("whk_together_%09d", i), "task_456.terminal", "completed")
				req := b.request(t, body)
				done = append(done, async(func() answered { <-gate; return answerOf(b.do(t, req, body)) }))
			}
			close(gate)
			for i, d := range done {
				wantAnswer(t, "re-emission "+strconv.Itoa(i), <-d, http.StatusOK, "")
			}
			if _, effects := b.written(t); effects != 1 || b.calls.Load() != 1 {
				t.Fatalf("%d effects, %d calls; want 1 and 1", effects, b.calls.Load())
			}
			wantCompleted(t, b.store, n+1)
		})
	}
}

// TestExactlyOnceReportingConcurrentDuplicates: N identical deliveries
// released together. One claims the key and processes it; each other is
// answered 200 (a duplicate of the completed delivery) or 503 in_progress
// with Retry-After (the key was held when it came), nothing else. The
// effect is written once, and the sender's retry of any of them is 200.
func TestExactlyOnceReportingConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const n = 20
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			b := setupReporting(t, reportingOptions{postgres: engine.postgres})
			report := deliveryReport(t)
			gate := make(chan struct{})
			var done []<-chan answered
			for range n {
				req := b.request(t, report)
				done = append(done, async(func() answered { <-gate; return answerOf(b.do(t, req, report)) }))
			}
			close(gate)
			for i, d := range done {
				a := <-d
				if a.status == http.StatusServiceUnavailable {
					wantAnswer(t, "delivery "+strconv.Itoa(i), a, http.StatusServiceUnavailable, courier.CodeInProgress)
				} else {
					wantAnswer(t, "delivery "+strconv.Itoa(i), a, http.StatusOK, "")
				}
			}
			wantAnswer(t, "a retry", answerOf(b.post(t, report)), http.StatusOK, "")
			if _, effects := b.written(t); effects != 1 || b.calls.Load() != 1 {
				t.Fatalf("%d effects, %d calls; want 1 and 1", effects, b.calls.Load())
			}
			wantCompleted(t, b.store, 1)
		})
	}
}

// openEngine opens a Store on a fresh database of the engine.
func openEngine(t *testing.T, postgres bool) *store.Store {
	t.Helper()
	if postgres {
		return openPostgresStore(t, store.Config{})
	}
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// redeliveryCase is one way redeliveries meet the first delivery.
type redeliveryCase struct {
	name string
	// held: the first run of the function waits, with its transaction
	// open, until every redelivery is sent (on PostgreSQL: until they wait
	// for its lock); fails: it then fails.
	held, fails bool
}

var redeliveryCases = []redeliveryCase{
	{name: "released together"},
	{name: "while the first's transaction is open", held: true},
	{name: "while the first's transaction is open, which fails", held: true, fails: true},
}

// firstStep is the step of the first run of the function for c.
func (c redeliveryCase) firstStep() *step {
	if !c.held {
		return nil
	}
	st := blocked()
	st.fail = c.fails
	return st
}

// concurrentRedeliveries sends n identical deliveries of the notification
// recorded under key (send) while the first is processed as c says
// (first: the first run's step), and checks that the function's effect is
// written once (effects), that every 2xx answer is the same bytes, and that
// only the held first, when it fails, is answered otherwise (500
// handler_failed).
func concurrentRedeliveries(t *testing.T, c redeliveryCase, s *store.Store, postgres bool, first *step, n int, key string, send func() answered, effects func() int) {
	t.Helper()
	var done []<-chan answered
	var firstDone <-chan answered
	gate := make(chan struct{})
	if c.held {
		firstDone = async(send)
		<-first.started
		n--
	}
	for range n {
		done = append(done, async(func() answered { <-gate; return send() }))
	}
	close(gate)
	if c.held {
		if postgres { // the redeliveries wait for the first's record
			waitForLockWaiters(t, s.DB(), n)
		}
		first.resume()
		a := <-firstDone
		if c.fails {
			wantStatus(t, "first", a, http.StatusInternalServerError, courier.CodeHandlerFailed)
		} else {
			done = append(done, answeredNow(a))
		}
	}
	var ok []byte
	for i, d := range done {
		a := <-d
		wantStatus(t, "delivery "+strconv.Itoa(i), a, http.StatusOK, "")
		if ok == nil {
			ok = a.body
		} else if !bytes.Equal(a.body, ok) {
			t.Fatalf("delivery %d answered %q, another %q: want the same Ack", i, a.body, ok)
		}
	}
	if got := effects(); got != 1 {
		t.Fatalf("%d effects, want 1", got)
	}
	wantCompleted(t, s, 1, key)
}

// answeredNow is a channel that holds a.
func answeredNow(a answered) <-chan answered {
	c := make(chan answered, 1)
	c <- a
	return c
}

func wantStatus(t *testing.T, who string, got answered, status int, code courier.Code) {
	t.Helper()
	if got.status != status || got.code != code {
		t.Fatalf("%s: %d %s %q, want %d %s", who, got.status, got.code, got.body, status, code)
	}
	if status == http.StatusOK && len(got.body) == 0 {
		t.Fatalf("%s: 200 without an Ack", who)
	}
}

// effectsCount returns e's count for key.
func effectsCount(t *testing.T, e *couriertest.Effects, key string) func() int {
	return func() int {
		n, err := e.Count(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// TestExactlyOnceReceiverConcurrentRedeliveries: 20 identical deliveries
// of a terminal notification (a one-phase receipt: record, function and
// Ack in one transaction) on each engine: the effect is written once and
// every 200 carries the same Ack, also when they arrive while the first's
// transaction is open, and when that one then fails (one of the waiting
// redeliveries processes it instead).
func TestExactlyOnceReceiverConcurrentRedeliveries(t *testing.T) {
	t.Parallel()
	runRedeliveryCases(t, 20, func(t *testing.T, s *store.Store, effects *couriertest.Effects, st *steps, i int) (http.Handler, string, func(*httptest.Server) answered) {
		keys := couriertest.StandardWebhooksKeys("cms-host")
		rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier}, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			if err := effects.Record(ctx, tx, n.EventID); err != nil {
				return err
			}
			return st.next(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		event := "evt-concurrent-" + strconv.Itoa(i)
		note, payload := terminal(t, event)
		return rcv, event, func(srv *httptest.Server) answered {
			return doRequest(t, srv, couriertest.NewRequest(srv.URL, note.NotificationID, payload, keys.Signer))
		}
	})
}

// TestExactlyOnceSourceConcurrentRedeliveries: the same for a Source's
// command (recorded in the function's transaction): applied once, every
// 200 the same command response, the one stored when it was applied,
// though the redeliveries are the sender's next attempt.
func TestExactlyOnceSourceConcurrentRedeliveries(t *testing.T) {
	t.Parallel()
	runRedeliveryCases(t, 20, func(t *testing.T, s *store.Store, effects *couriertest.Effects, st *steps, i int) (http.Handler, string, func(*httptest.Server) answered) {
		keys := couriertest.StandardWebhooksKeys("host")
		src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: keys.Verifier, CapabilitiesSHA256: sourceDigest}, func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
			if err := effects.Record(ctx, tx, c.DedupeKey()); err != nil {
				return err
			}
			return st.next(ctx)
		})
		if err != nil {
			t.Fatal(err)
		}
		id := "r" + strconv.Itoa(i)
		key := ack.OperationChange + ":" + id
		body := sourceCommand(t, ack.OperationChange, id, sourceDigest, `{"a":1}`)
		var sent atomic.Int32
		return src, key, func(srv *httptest.Server) answered { // the first as attempt 1, the redeliveries as 2
			req := couriertest.NewRequest(srv.URL, key, body, keys.Signer)
			req.Header.Set(ack.AttemptHeader, strconv.Itoa(min(2, int(sent.Add(1)))))
			return doRequest(t, srv, req)
		}
	})
}

// redeliveryTarget makes the receiver under test for case i on s: its
// function records the delivery into effects, under the key it returns,
// and then takes st's next step. send sends one delivery to srv.
type redeliveryTarget func(t *testing.T, s *store.Store, effects *couriertest.Effects, st *steps, i int) (h http.Handler, key string, send func(srv *httptest.Server) answered)

// runRedeliveryCases runs every redelivery case, n deliveries each, on
// each engine, against the receiver target makes.
func runRedeliveryCases(t *testing.T, n int, target redeliveryTarget) {
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			s := openEngine(t, engine.postgres)
			effects, err := couriertest.NewEffects(t.Context(), s)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range redeliveryCases {
				t.Run(c.name, func(t *testing.T) {
					st := &steps{all: []*step{c.firstStep()}}
					h, key, send := target(t, s, effects, st, i)
					srv := httptest.NewServer(h)
					t.Cleanup(srv.Close)
					t.Cleanup(st.resumeAll) // before the server's Close, which waits for the held run
					concurrentRedeliveries(t, c, s, engine.postgres, st.all[0], n, key, func() answered { return send(srv) }, effectsCount(t, effects, key))
				})
			}
		})
	}
}

// doRequest sends req to srv.
func doRequest(t *testing.T, srv *httptest.Server, req *http.Request) answered {
	req = req.WithContext(t.Context())
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Error(err) // Error, not Fatal: runs on other goroutines
		return answered{}
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return answerOf(resp, out)
}

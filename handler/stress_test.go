package handler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
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
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// The stress test of this file holds every receiver to its promise under
// a storm: many requests at once for a few notifications, from two senders
// sharing their dedupe keys, while the application's function fails,
// refuses, panics or is slow at random, and Inbox.Prune runs beside them:
// with a retention far shorter than the storm, deleting records as they
// complete, and with one longer, deleting none of the storm's (where each
// notification must then complete exactly once). The schedule is
// random (seeded); the verdict is not, for it asserts only what must hold
// whatever the interleaving, read from the database:
//
//   - the function's effect commits exactly when, and in the transaction
//     in which, its Inbox record is completed: one effect per completion,
//     counted per (sender, key) by triggers on courier_inbox, and no more
//     completions than the record's lives (one, and one more for each time
//     Prune deleted it);
//   - nothing a failed, refused or panicked run wrote stays;
//   - every 200 carries an Ack one of the key's completions stored, and so
//     the same bytes for as long as one record lives;
//   - the answers are only those the documentation allows;
//   - each sender's keys are its own: both senders' records complete;
//   - once the storm is over, a redelivery is answered from the Inbox,
//     byte for byte, without running the function.

// stressSenders share every dedupe key.
var stressSenders = []string{"sender-a.example", "sender-b.example"}

// stressKeys is how many notifications a storm sends; the first two take
// most of its requests.
const stressKeys = 6

// stressFn is what a target's function does: fn, given the Inbox key the
// notification is recorded under.
type stressFn func(ctx context.Context, tx *sqlx.Tx, key string) error

// stressTarget is a receiver under stress.
type stressTarget struct {
	name string
	// handler returns the receiver of verifier's sender on s, running fn.
	handler func(t *testing.T, s *store.Store, verifier signature.Verifier, fn stressFn, hook func(handler.Event)) http.Handler
	// notification returns the Inbox key, the message id it is signed
	// under and the body of notification i.
	notification func(t *testing.T, i int) (key, id string, body []byte)
	// inProgress: the receiver may answer a concurrent duplicate 503
	// in_progress (a two-phase receipt).
	inProgress bool
	// attempts: requests carry a Courier-Attempt of 1 or 2, at random.
	attempts bool
}

// stressNote is a payload of the courier profile: courier's own Ack.
type stressNote struct {
	ID     string `json:"id" validate:"required"`
	Amount int    `json:"amount"`
}

func (n stressNote) DedupeKey() string { return n.ID }

func stressTargets() []stressTarget {
	return []stressTarget{
		{
			name: "receiver",
			handler: func(t *testing.T, s *store.Store, v signature.Verifier, fn stressFn, hook func(handler.Event)) http.Handler {
				return stressReceiver(t, s, v, hook, func(ctx context.Context, tx *sqlx.Tx, n stressNote) error { return fn(ctx, tx, n.ID) })
			},
			notification: func(t *testing.T, i int) (string, string, []byte) {
				id := "note-" + strconv.Itoa(i)
				return id, id, []byte(`{"id":"` + id + `","amount":` + strconv.Itoa(100+i) + `}`)
			},
		},
		{
			name: "terminal",
			handler: func(t *testing.T, s *store.Store, v signature.Verifier, fn stressFn, hook func(handler.Event)) http.Handler {
				return stressReceiver(t, s, v, hook, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error { return fn(ctx, tx, n.EventID) })
			},
			notification: func(t *testing.T, i int) (string, string, []byte) {
				n, body := terminal(t, "evt-stress-"+strconv.Itoa(i))
				return n.EventID, n.NotificationID, body
			},
		},
		{
			name: "reporting",
			handler: func(t *testing.T, s *store.Store, v signature.Verifier, fn stressFn, hook func(handler.Event)) http.Handler {
				rp, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: v, Hook: hook}, func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
					return fn(ctx, tx, n.IdempotencyKey)
				})
				if err != nil {
					t.Fatal(err)
				}
				return rp
			},
			notification: func(t *testing.T, i int) (string, string, []byte) {
				key := fmt.Sprintf("whk_stress_%010d", i)
				return key, key, taskWebhook(key, "", "working")
			},
			inProgress: true,
		},
		{
			name: "source",
			handler: func(t *testing.T, s *store.Store, v signature.Verifier, fn stressFn, hook func(handler.Event)) http.Handler {
				src, err := handler.NewSource(handler.SourceConfig{Store: s, Verifier: v, Hook: hook, CapabilitiesSHA256: sourceDigest}, func(ctx context.Context, tx *sqlx.Tx, c ack.Command) error {
					return fn(ctx, tx, c.DedupeKey())
				})
				if err != nil {
					t.Fatal(err)
				}
				return src
			},
			notification: func(t *testing.T, i int) (string, string, []byte) {
				id := "stress" + strconv.Itoa(i)
				key := ack.OperationChange + ":" + id
				return key, key, sourceCommand(t, ack.OperationChange, id, sourceDigest, `{"n":`+strconv.Itoa(i)+`}`)
			},
			attempts: true,
		},
	}
}

func stressReceiver[T ack.Notification](t *testing.T, s *store.Store, v signature.Verifier, hook func(handler.Event), fn handler.Func[T]) http.Handler {
	t.Helper()
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: v, Hook: hook}, fn)
	if err != nil {
		t.Fatal(err)
	}
	return rcv
}

// What a run of the function does, after writing its effect.
const (
	stressApply  = "applied"
	stressFail   = "failed"
	stressReject = "rejected"
	stressPanic  = "panicked"
	stressSlow   = "slow" // applied, after a pause with its transaction open
)

var stressBehaviours = []string{stressApply, stressApply, stressFail, stressReject, stressPanic, stressSlow}

// stressRun is one storm against one target on one engine.
type stressRun struct {
	t      *testing.T
	s      *store.Store
	target stressTarget
	notes  []stressNotification // the storm's notifications
	insert string
	// mu guards rnd, the function's draws, and answers.
	mu      sync.Mutex
	rnd     *rand.Rand
	answers map[stressID][]answered
	quiet   atomic.Bool  // the function only applies
	calls   atomic.Int64 // runs of the function
	// accepted counts each sender's answers its Hook reported accepted.
	accepted map[string]*atomic.Int64
	servers  map[string]*httptest.Server
	signers  map[string]signature.Signer
}

// stressNotification is what target.notification returns.
type stressNotification struct {
	key, id string
	body    []byte
}

// stressID is one sender's notification.
type stressID struct{ sender, key string }

// fn is sender's function: it writes its effect, then does what the
// seeded draw says.
func (r *stressRun) fn(sender string) stressFn {
	return func(ctx context.Context, tx *sqlx.Tx, key string) error {
		r.calls.Add(1)
		behaviour := stressApply
		pause := time.Duration(0)
		if !r.quiet.Load() {
			r.mu.Lock()
			behaviour = stressBehaviours[r.rnd.IntN(len(stressBehaviours))]
			pause = time.Duration(r.rnd.IntN(3000)) * time.Microsecond
			r.mu.Unlock()
		}
		outcome := behaviour
		if behaviour == stressSlow {
			outcome = stressApply
		}
		if _, err := tx.ExecContext(ctx, r.insert, sender, key, outcome); err != nil {
			return err
		}
		switch behaviour {
		case stressSlow:
			time.Sleep(pause) // load, not synchronization: widens the window a duplicate meets
		case stressFail:
			return errors.New("stress: application trouble")
		case stressReject:
			return handler.Reject("", "stress: refused")
		case stressPanic:
			panic("stress: the function panics")
		}
		return nil
	}
}

// send sends sender's notification i, and keeps the answer.
func (r *stressRun) send(sender string, i int, attempt int) answered {
	t := r.t
	key, body := r.notes[i].key, r.notes[i].body
	srv := r.servers[sender]
	req := couriertest.NewRequest(srv.URL, r.notes[i].id, body, r.signers[sender])
	if r.target.attempts {
		req.Header.Set(ack.AttemptHeader, strconv.Itoa(attempt))
	}
	a := doRequest(t, srv, req)
	r.mu.Lock()
	r.answers[stressID{sender, key}] = append(r.answers[stressID{sender, key}], a)
	r.mu.Unlock()
	return a
}

// allowed reports whether a is an answer the receiver may give in a storm.
func (r *stressRun) allowed(a answered) bool {
	switch {
	case a.status == http.StatusOK:
		return r.target.name == "reporting" || len(a.body) > 0
	case a.status == http.StatusInternalServerError:
		return a.code == courier.CodeHandlerFailed || a.code == courier.CodeInternal // failed; panicked
	case a.status == http.StatusUnprocessableEntity:
		return a.code == courier.CodeRejected
	case a.status == http.StatusServiceUnavailable:
		return r.target.inProgress && a.code == courier.CodeInProgress && a.retryAfter != ""
	}
	return false
}

// stressSchema is the effects table and the triggers that log, per
// (sender, key), each completion of an Inbox record (with the Ack it
// stores) and each deletion of a completed one, in the transaction that
// made it.
var stressSchema = map[string][]string{
	"sqlite": {
		`CREATE TABLE stress_effects (sender TEXT NOT NULL, dedupe_key TEXT NOT NULL, outcome TEXT NOT NULL)`,
		`CREATE TABLE stress_log (sender TEXT NOT NULL, dedupe_key TEXT NOT NULL, event TEXT NOT NULL, ack BLOB)`,
		`CREATE TRIGGER stress_inserted AFTER INSERT ON courier_inbox WHEN NEW.status = 'completed'
			BEGIN INSERT INTO stress_log VALUES (NEW.sender, NEW.dedupe_key, 'completed', NEW.ack); END`,
		`CREATE TRIGGER stress_completed AFTER UPDATE ON courier_inbox WHEN NEW.status = 'completed' AND OLD.status = 'processing'
			BEGIN INSERT INTO stress_log VALUES (NEW.sender, NEW.dedupe_key, 'completed', NEW.ack); END`,
		`CREATE TRIGGER stress_deleted AFTER DELETE ON courier_inbox WHEN OLD.status = 'completed'
			BEGIN INSERT INTO stress_log VALUES (OLD.sender, OLD.dedupe_key, 'deleted', NULL); END`,
	},
	"postgres": {
		`CREATE TABLE stress_effects (sender TEXT NOT NULL, dedupe_key TEXT NOT NULL, outcome TEXT NOT NULL)`,
		`CREATE TABLE stress_log (sender TEXT NOT NULL, dedupe_key TEXT NOT NULL, event TEXT NOT NULL, ack BYTEA)`,
		`CREATE FUNCTION stress_log_inbox() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP = 'DELETE' THEN
				IF OLD.status = 'completed' THEN
					INSERT INTO stress_log VALUES (OLD.sender, OLD.dedupe_key, 'deleted', NULL);
				END IF;
				RETURN OLD;
			END IF;
			IF NEW.status = 'completed' AND (TG_OP = 'INSERT' OR OLD.status = 'processing') THEN
				INSERT INTO stress_log VALUES (NEW.sender, NEW.dedupe_key, 'completed', NEW.ack);
			END IF;
			RETURN NEW;
		END $$`,
		`CREATE TRIGGER stress_log_inbox AFTER INSERT OR UPDATE OR DELETE ON courier_inbox
			FOR EACH ROW EXECUTE FUNCTION stress_log_inbox()`,
	},
}

// TestExactlyOnceUnderStress runs a storm against every receiver on each
// engine; see the top of this file for what it asserts.
func TestExactlyOnceUnderStress(t *testing.T) {
	t.Parallel()
	for _, engine := range reportingEngines {
		t.Run(engine.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			s := openEngine(t, engine.postgres)
			for _, stmt := range stressSchema[s.Engine()] {
				if _, err := s.DB().Exec(stmt); err != nil {
					t.Fatal(err)
				}
			}
			storm := 0
			for ti, target := range stressTargets() {
				t.Run(target.name, func(t *testing.T) {
					// Pruning every record as soon as it is 25 ms old, and
					// pruning none of the storm's: then each notification
					// completes once, and its every 200 is one Ack.
					for _, retention := range []time.Duration{25 * time.Millisecond, time.Hour} {
						base := storm * stressKeys // each storm's notifications are its own
						storm++
						t.Run("retention "+retention.String(), func(t *testing.T) { stressStorm(t, s, target, retention, base, uint64(ti)) })
					}
				})
			}
			t.Logf("%s: %v", engine.name, time.Since(start))
		})
	}
}

// stressStorm runs a storm against target on s, with Prune beside it at
// retention, sending notifications base to base+stressKeys-1.
func stressStorm(t *testing.T, s *store.Store, target stressTarget, retention time.Duration, base int, seed uint64) {
	const (
		goroutines = 8
		requests   = 24 // per goroutine
	)
	r := &stressRun{
		t: t, s: s, target: target,
		insert:   s.DB().Rebind("INSERT INTO stress_effects (sender, dedupe_key, outcome) VALUES (?, ?, ?)"),
		rnd:      rand.New(rand.NewPCG(seed, 0x5eed)),
		answers:  map[stressID][]answered{},
		accepted: map[string]*atomic.Int64{},
		servers:  map[string]*httptest.Server{},
		signers:  map[string]signature.Signer{},
	}
	for i := range stressKeys {
		var n stressNotification
		n.key, n.id, n.body = target.notification(t, base+i)
		r.notes = append(r.notes, n)
	}
	for _, sender := range stressSenders {
		keys := couriertest.StandardWebhooksKeys(sender)
		accepted := &atomic.Int64{}
		r.accepted[sender], r.signers[sender] = accepted, keys.Signer
		h := target.handler(t, s, keys.Verifier, r.fn(sender), func(e handler.Event) {
			if e.Outcome == handler.OutcomeAccepted {
				accepted.Add(1)
			}
		})
		srv := httptest.NewServer(middleware.Recover(nil)(h)) // a panic re-raised by the receiver answers 500 internal_error
		t.Cleanup(srv.Close)
		r.servers[sender] = srv
	}

	// Prune beside the storm, until it ends. The inbox keeps records at
	// least a day, so the pruner is another Store on the database whose
	// clock is that day, less the retention, ahead: it deletes the records
	// older than retention.
	pruner, err := store.Open(t.Context(), s.DB(), store.Config{Now: func() time.Time { return time.Now().Add(24*time.Hour - retention) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pruner.Close() })
	ctx, stopPrune := context.WithCancel(t.Context())
	pruned := make(chan int, 1)
	go func() {
		total := 0
		defer func() { pruned <- total }()
		for ctx.Err() == nil {
			n, err := pruner.Inbox.Prune(ctx, store.PruneParams{OlderThan: 24 * time.Hour, BatchSize: 2})
			total += n
			if err != nil && ctx.Err() == nil {
				t.Errorf("prune: %v", err)
				return
			}
			time.Sleep(time.Millisecond) // pacing, not synchronization
		}
	}()

	gate := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		rnd := rand.New(rand.NewPCG(seed, uint64(g)+1))
		type call struct{ sender, i, attempt int }
		plan := make([]call, requests)
		for k := range plan {
			i := rnd.IntN(2) // most requests are for the first two notifications
			if rnd.IntN(4) == 0 {
				i = rnd.IntN(stressKeys)
			}
			plan[k] = call{sender: rnd.IntN(len(stressSenders)), i: i, attempt: 1 + rnd.IntN(2)}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			for _, c := range plan {
				if a := r.send(stressSenders[c.sender], c.i, c.attempt); !r.allowed(a) {
					t.Errorf("storm: %d %s %q: not an answer the receiver may give", a.status, a.code, a.body)
				}
			}
		}()
	}
	close(gate)
	wg.Wait()
	stopPrune()
	deletes := <-pruned

	// The storm is over: each notification, sent again by a function that
	// only applies, is answered 200; and sent once more, from the Inbox,
	// the same bytes, without running the function.
	r.quiet.Store(true)
	for _, sender := range stressSenders {
		for i := range stressKeys {
			key := r.notes[i].key
			first := r.send(sender, i, 2)
			wantStatusOK(t, r, sender+" "+key+" after the storm", first)
			calls := r.calls.Load()
			again := r.send(sender, i, 1)
			wantStatusOK(t, r, sender+" "+key+": a redelivery after the storm", again)
			if !bytes.Equal(again.body, first.body) {
				t.Errorf("%s %s: a redelivery after the storm answered %q, the first %q", sender, key, again.body, first.body)
			}
			if got := r.calls.Load(); got != calls {
				t.Errorf("%s %s: a redelivery after the storm ran the function %d times", sender, key, got-calls)
			}
		}
	}
	r.verify(deletes)
}

func wantStatusOK(t *testing.T, r *stressRun, who string, a answered) {
	t.Helper()
	if a.status != http.StatusOK || (r.target.name != "reporting" && len(a.body) == 0) {
		t.Errorf("%s: %d %s %q, want 200 with the Ack", who, a.status, a.code, a.body)
	}
}

// verify reads the database and checks the storm's invariants.
func (r *stressRun) verify(deletes int) {
	t := r.t
	type logRow struct {
		Sender string `db:"sender"`
		Key    string `db:"dedupe_key"`
		Event  string `db:"event"`
		Ack    []byte `db:"ack"`
	}
	var log []logRow
	if err := r.s.DB().Select(&log, "SELECT sender, dedupe_key, event, ack FROM stress_log"); err != nil {
		t.Fatal(err)
	}
	var effects []struct {
		Sender  string `db:"sender"`
		Key     string `db:"dedupe_key"`
		Outcome string `db:"outcome"`
	}
	if err := r.s.DB().Select(&effects, "SELECT sender, dedupe_key, outcome FROM stress_effects"); err != nil {
		t.Fatal(err)
	}
	var records []struct {
		Sender string `db:"sender"`
		Key    string `db:"dedupe_key"`
		Status string `db:"status"`
	}
	if err := r.s.DB().Select(&records, "SELECT sender, dedupe_key, status FROM courier_inbox"); err != nil {
		t.Fatal(err)
	}
	completions := map[stressID][][]byte{}
	deleted := map[stressID]int{}
	for _, l := range log {
		id := stressID{l.Sender, l.Key}
		if l.Event == "completed" {
			completions[id] = append(completions[id], l.Ack)
		} else {
			deleted[id]++
		}
	}
	applied := map[stressID]int{}
	kept := map[string]int{} // effects of runs that did not apply, by what they did
	for _, e := range effects {
		if e.Outcome != stressApply {
			kept[e.Sender+" "+e.Key+": a run that "+e.Outcome]++
			continue
		}
		applied[stressID{e.Sender, e.Key}]++
	}
	for what, n := range kept {
		t.Errorf("%s: %d effects kept", what, n)
	}
	present := map[stressID]bool{}
	for _, rec := range records {
		if rec.Status != "completed" {
			t.Errorf("%s %s: the record is left %s", rec.Sender, rec.Key, rec.Status)
		}
		present[stressID{rec.Sender, rec.Key}] = true
	}
	once := 0
	for _, sender := range stressSenders {
		total := 0 // completions of the sender's records
		for i := range stressKeys {
			key := r.notes[i].key
			id := stressID{sender, key}
			c := len(completions[id])
			total += c
			if !present[id] {
				t.Errorf("%s %s: no record after the storm", sender, key)
			}
			// One completion per life of the record: the first, and one
			// after each time Prune deleted it.
			if lives := deleted[id] + 1; c > lives || c == 0 {
				t.Errorf("%s %s: %d completions of a record that lived %d times", sender, key, c, lives)
			}
			// One effect per completion: written in its transaction.
			if applied[id] != c {
				t.Errorf("%s %s: %d effects, %d completions of its record; want one effect per completion", sender, key, applied[id], c)
			}
			if c == 1 {
				once++
			}
			stray, example := 0, []byte(nil)
			for _, a := range r.answers[id] {
				if a.status == http.StatusOK && !slices.ContainsFunc(completions[id], func(stored []byte) bool { return bytes.Equal(stored, a.body) }) {
					stray, example = stray+1, a.body
				}
			}
			if stray > 0 {
				t.Errorf("%s %s: %d answers 200 with an Ack no completion of its record stored, such as %q", sender, key, stray, example)
			}
		}
		// Each completion was answered once as processed now (the Hook's
		// accepted), and no other answer was.
		if got := r.accepted[sender].Load(); got != int64(total) {
			t.Errorf("%s: %d answers reported accepted, %d completions", sender, got, total)
		}
	}
	status := map[int]int{}
	for _, as := range r.answers {
		for _, a := range as {
			status[a.status]++
		}
	}
	t.Logf("answers %v; function runs %d; prune deleted %d records; %d of %d notifications completed once",
		status, r.calls.Load(), deletes, once, len(stressSenders)*stressKeys)
}

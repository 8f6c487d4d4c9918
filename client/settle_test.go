package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestSettlerGroupsOutcomes: outcomes that arrive while a settle
// transaction waits are settled together in the next one, each caller gets
// its own result, and a lost lease in the batch fails only its own outcome.
// Each call's recorded is called once, before the call returns: the lease
// is the worker's no more, lost or settled.
func TestSettlerGroupsOutcomes(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 12
	tx, err := s.DB().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: fmt.Sprintf("n%02d", i), Endpoint: "https://example.com/hook", Payload: []byte(`{}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: n, Lease: time.Minute})
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}

	// The first settle runs alone and waits for the writer, held by a
	// transaction of the test's; the others queue behind it.
	var mu sync.Mutex
	var batches []int
	st := &settler{apply: func(ctx context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
		mu.Lock()
		batches = append(batches, len(ocs))
		mu.Unlock()
		return protocol.For(s).Settle(ctx, ocs...)
	}}
	hold, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		i   int
		st  protocol.Settled
		err error
	}
	results := make(chan result, n)
	var recorded [n]int
	settle := func(i int) {
		oc := protocol.Outcome{Lease: claimed[i].Lease, Result: protocol.Succeeded}
		if i == n-1 {
			oc.Lease.Token = "not-the-token"
		}
		got, err := st.settle(ctx, oc, func() { mu.Lock(); recorded[i]++; mu.Unlock() })
		mu.Lock()
		if recorded[i] != 1 {
			t.Errorf("outcome %d: recorded called %d times before settle returned, want 1", i, recorded[i])
		}
		mu.Unlock()
		results <- result{i, got, err}
	}
	go settle(0)
	waitFor(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.running && len(st.queue) == 0 })
	for i := 1; i < n; i++ {
		go settle(i)
	}
	waitFor(t, func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.queue) == n-1 })
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}

	for range n {
		r := <-results
		switch {
		case r.err != nil:
			t.Errorf("outcome %d: %v", r.i, r.err)
		case r.i == n-1:
			if !errors.Is(r.st.Err, courier.CodeLeaseLost) {
				t.Errorf("outcome with a wrong token: %+v, want lease lost", r.st)
			}
		case r.st.Err != nil || r.st.Status != courier.StatusSucceeded:
			t.Errorf("outcome %d: %+v, want succeeded", r.i, r.st)
		}
	}
	if len(batches) != 2 || batches[0] != 1 || batches[1] != n-1 {
		t.Errorf("settle transactions of %v outcomes, want [1 %d]", batches, n-1)
	}
	for i, c := range claimed[:n-1] {
		d, err := s.Outbox.Get(ctx, c.DeliveryID)
		if err != nil || d.Status != courier.StatusSucceeded {
			t.Errorf("delivery %d: %+v, %v", i, d.Status, err)
		}
	}
}

// TestSettlerBatchOutlivesOneCallersContext: the call handed the lead
// runs the next batch. Its own ctx ended while it waited, yet the batch
// runs, with that ctx's values, under the latest deadline of its calls'
// contexts and no one's cancellation: the other call's outcome, whose ctx
// is live, is recorded, and so is the leader's own (the lease fences it).
func TestSettlerBatchOutlivesOneCallersContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	type call struct {
		ids      []int64
		err      error
		deadline time.Time
		value    any
	}
	calls := make(chan call, 2)
	gate := make(chan struct{})
	st := &settler{apply: func(ctx context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
		c := call{err: ctx.Err(), value: ctx.Value(key{})}
		c.deadline, _ = ctx.Deadline()
		for _, oc := range ocs {
			c.ids = append(c.ids, oc.Lease.DeliveryID)
		}
		calls <- c
		if c.ids[0] == 1 {
			<-gate
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out := make([]protocol.Settled, len(ocs))
		for i := range out {
			out[i].Status = courier.StatusSucceeded
		}
		return out, nil
	}}
	type result struct {
		st  protocol.Settled
		err error
	}
	settle := func(ctx context.Context, id int64) <-chan result {
		ch := make(chan result, 1)
		go func() {
			s, err := st.settle(ctx, protocol.Outcome{Lease: protocol.Lease{DeliveryID: id}, Result: protocol.Succeeded}, nil)
			ch <- result{s, err}
		}()
		return ch
	}
	queued := func(n int) func() bool {
		return func() bool { st.mu.Lock(); defer st.mu.Unlock(); return len(st.queue) == n }
	}

	first := settle(context.Background(), 1)
	if c := <-calls; len(c.ids) != 1 || c.ids[0] != 1 {
		t.Fatalf("first batch %v, want [1]", c.ids)
	}
	// Queued first, so handed the lead: its ctx's deadline passed.
	ended, cancelEnded := context.WithDeadline(context.WithValue(context.Background(), key{}, "leader"), time.Now().Add(-time.Second))
	defer cancelEnded()
	second := settle(ended, 2)
	waitFor(t, queued(1))
	liveDeadline := time.Now().Add(time.Hour)
	live, cancelLive := context.WithDeadline(context.Background(), liveDeadline)
	defer cancelLive()
	third := settle(live, 3)
	waitFor(t, queued(2))
	close(gate)

	c := <-calls
	if len(c.ids) != 2 || c.ids[0] != 2 || c.ids[1] != 3 {
		t.Fatalf("second batch %v, want [2 3]", c.ids)
	}
	if c.err != nil || !c.deadline.Equal(liveDeadline) || c.value != "leader" {
		t.Fatalf("second batch ran with ctx error %v, deadline %v, value %v; want none, %v (the latest), the leader's", c.err, c.deadline, c.value, liveDeadline)
	}
	for id, ch := range map[int]<-chan result{1: first, 2: second, 3: third} {
		if r := <-ch; r.err != nil || r.st.Status != courier.StatusSucceeded {
			t.Errorf("outcome %d: %+v, %v; want succeeded", id, r.st, r.err)
		}
	}
}

// TestSettlerTellsOnlyOfOutcomesItRecorded: recorded is called for an
// outcome the store recorded, or found its lease lost (the lease is the
// worker's no more either way), and not for one it could not write, alone
// or in a transaction that failed, nor for one it refused as invalid (the
// store applies none of it): that lease is held still, and a Run told of
// it would claim for room that is not there.
func TestSettlerTellsOnlyOfOutcomesItRecorded(t *testing.T) {
	t.Parallel()
	errHeld := errors.New("the row is held by another transaction")
	st := &settler{apply: func(_ context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
		switch ocs[0].Lease.DeliveryID {
		case 1:
			return []protocol.Settled{{Status: courier.StatusSucceeded}}, nil
		case 2:
			return []protocol.Settled{{Err: courier.CodeLeaseLost}}, nil
		case 3:
			return []protocol.Settled{{Err: errHeld}}, nil
		case 4:
			return []protocol.Settled{{Err: courier.CodeInvalidArgument}}, nil
		default:
			return nil, errHeld
		}
	}}
	for id, want := range map[int64]bool{1: true, 2: true, 3: false, 4: false, 5: false} {
		told := false
		_, _ = st.settle(t.Context(), protocol.Outcome{Lease: protocol.Lease{DeliveryID: id}, Result: protocol.Succeeded}, func() { told = true })
		if told != want {
			t.Errorf("outcome %d: recorded called = %t, want %t", id, told, want)
		}
	}
}

// waitFor polls cond until it holds, yielding between tries.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSettleRetriesTransientFailuresWithinTheLease: a settle the store
// refuses for a passing reason (a busy database) is tried again until it
// lands, so an attempt that was sent is recorded and not sent again; one
// that keeps failing gives up when its lease window has passed; invalid
// input is not retried.
func TestSettleRetriesTransientFailuresWithinTheLease(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
			NotificationID: fmt.Sprintf("n%d", i), Endpoint: "https://example.com/hook", Payload: []byte(`{}`),
		}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 2, Lease: time.Minute})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	w, err := NewWorker(Config{Store: s, Signer: nopSigner{}})
	if err != nil {
		t.Fatal(err)
	}
	busy := errors.New("store: outbox_settle: store: database busy: database is locked")
	var calls int
	failFirst := func(n int) func(context.Context, ...protocol.Outcome) ([]protocol.Settled, error) {
		return func(ctx context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
			calls++
			if calls <= n {
				return nil, busy
			}
			return protocol.For(s).Settle(ctx, ocs...)
		}
	}

	w.settler = &settler{apply: failFirst(3)}
	got, err := w.settle(ctx, protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Succeeded}, time.Minute, nil)
	if err != nil || got.Err != nil || got.Status != courier.StatusSucceeded || calls != 4 {
		t.Fatalf("settle after 3 busy failures = %+v, %v in %d calls; want succeeded in 4", got, err, calls)
	}

	calls = 0
	w.settler = &settler{apply: failFirst(1 << 30)}
	started := time.Now()
	if _, err := w.settle(ctx, protocol.Outcome{Lease: claimed[1].Lease, Result: protocol.Succeeded}, 0, nil); !errors.Is(err, busy) {
		t.Fatalf("settle that keeps failing = %v, want the store's error", err)
	}
	if waited := time.Since(started); waited < minPersistWindow || calls < 2 {
		t.Fatalf("gave up after %v and %d calls, want retries for at least %v", waited, calls, minPersistWindow)
	}

	calls = 0
	w.settler = &settler{apply: func(ctx context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
		calls++
		return protocol.For(s).Settle(ctx, ocs...)
	}}
	if _, err := w.settle(ctx, protocol.Outcome{Lease: claimed[1].Lease, Result: "unknown"}, time.Minute, nil); courier.CodeOf(err) != courier.CodeInvalidArgument || calls != 1 {
		t.Fatalf("invalid outcome: %v after %d calls, want invalid_argument at once", err, calls)
	}
}

// nopSigner signs nothing; the settle tests send no request.
type nopSigner struct{}

func (nopSigner) Sign(*http.Request, signature.Message) error { return nil }

// TestASettleWhoseGoroutineEndsLeavesTheNextToRun: the call that runs a
// batch handed the next transaction on only once apply returned. A store
// callback that ended its goroutine inside apply (runtime.Goexit, as a
// test's t.FailNow in a Hook does) left the settler running for good:
// the calls batched with it, and every settle after, waited forever. The
// others of the batch now hear that it ended without an answer, and the
// next settle runs.
func TestASettleWhoseGoroutineEndsLeavesTheNextToRun(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	st := &settler{apply: func(_ context.Context, ocs ...protocol.Outcome) ([]protocol.Settled, error) {
		switch calls.Add(1) {
		case 1: // alone in its batch, while two more calls queue
			<-release
			runtime.Goexit()
		case 2: // the batch of those two
			runtime.Goexit()
		}
		return make([]protocol.Settled, len(ocs)), nil
	}}
	ended := make(chan struct{}, 2)
	results := make(chan error, 2)
	settle := func() {
		defer func() { ended <- struct{}{} }()
		_, err := st.settle(t.Context(), protocol.Outcome{}, nil)
		results <- err
	}
	go settle()
	for calls.Load() == 0 { // the first call is in apply
		runtime.Gosched()
	}
	go settle()
	go settle()
	for waiting := 0; waiting < 2; runtime.Gosched() { // both wait for the next transaction
		st.mu.Lock()
		waiting = len(st.queue)
		st.mu.Unlock()
	}
	close(release)
	for range 3 { // two goroutines end inside apply; the third returns
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("a settle call still waits 10s after the call it was batched with ended: the settler is held for good")
		}
	}
	if len(results) != 1 {
		t.Fatalf("%d calls returned; want the one batched with a call that ended", len(results))
	}
	if err := <-results; !errors.Is(err, courier.CodeInternal) {
		t.Fatalf("the outcome batched with the call that ended: %v; want internal_error, to be written again", err)
	}
	next := make(chan error, 1)
	go func() {
		_, err := st.settle(t.Context(), protocol.Outcome{}, nil)
		next <- err
	}()
	select {
	case err := <-next:
		if err != nil || calls.Load() != 3 {
			t.Fatalf("the next settle: %v after %d applies; want it applied", err, calls.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next settle still waits after 10s: the settler is held for good")
	}
}

// TestAnOutcomeRefusedAsInvalidIsReportedUnrecorded: an outcome the store
// refuses as invalid comes back with its refusal as both the settle's
// error and its Settled.Err. The log line took the one for a lost lease
// (code lease_lost) while saying the settle failed, and the Event said
// both LeaseLost and Unrecorded, which its docs say cannot be. It is
// reported as what it is: not recorded, with the attempt's own code.
func TestAnOutcomeRefusedAsInvalidIsReportedUnrecorded(t *testing.T) {
	logs := &lineCapture{}
	var got []Event
	w := &Worker{cfg: Config{Logger: slog.New(logs), Hook: func(e Event) { got = append(got, e) }}}
	invalid := fmt.Errorf("%w: an outcome the store refuses", courier.CodeInvalidArgument)
	c := protocol.Claimed{Lease: protocol.Lease{DeliveryID: 7, Attempt: 1}, Endpoint: "https://example.com/hook"}
	oc := protocol.Outcome{Result: protocol.Retry, Code: courier.CodeReceiverUnavailable}
	w.report(t.Context(), c, oc, protocol.Settled{Err: invalid}, invalid)
	if len(logs.records) != 1 || logs.records[0].msg != "worker: settle failed" || logs.records[0].attrs["code"] != string(courier.CodeReceiverUnavailable) {
		t.Errorf("logged %+v; want one \"worker: settle failed\" line with the attempt's code", logs.records)
	}
	if len(got) != 1 || got[0].LeaseLost || !got[0].Unrecorded || got[0].Code != courier.CodeReceiverUnavailable {
		t.Errorf("events %+v; want one, unrecorded, its lease not lost, with the attempt's code", got)
	}
}

// lineCapture keeps the message and the string attributes of each
// record it handles.
type lineCapture struct {
	records []struct {
		msg   string
		attrs map[string]string
	}
}

func (c *lineCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCapture) Handle(_ context.Context, r slog.Record) error {
	attrs := make(map[string]string)
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	c.records = append(c.records, struct {
		msg   string
		attrs map[string]string
	}{r.Message, attrs})
	return nil
}
func (c *lineCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCapture) WithGroup(string) slog.Handler      { return c }

package storetest_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// flagStress makes TestConcurrentOperationsNeverDeadlock a long run.
var flagStress = flag.Bool("storetest.stress", false, "run TestConcurrentOperationsNeverDeadlock long: 600 steps per goroutine rather than 100")

// TestConcurrentOperationsNeverDeadlock runs workers, applications and
// operators at once over a few endpoints and ordering keys, so that
// their transactions meet on the same rows all the time: no operation
// ever loses a deadlock (SQLSTATE 40P01) or waits for a lock past a
// bound (55P03), and the database detects no deadlock, even one a settle
// recovered from by settling again. Once everything is sent, the outbox
// checks out and no ordering key is left. Each goroutine's operations are
// drawn from a seed the test logs; how they interleave is the
// scheduler's.
//
// It runs short by default, and long with -storetest.stress, as many
// times as -count asks: go test ./store/internal/storetest -run
// TestConcurrentOperationsNeverDeadlock -storetest.stress -count=100.
func TestConcurrentOperationsNeverDeadlock(t *testing.T) {
	const goroutines = 8
	steps := 100
	if *flagStress {
		steps = 600
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	cfg := store.Config{
		OrderingOnFailure: store.OrderingSkipFailed,
		MaxAttempts:       3,
		Breaker:           store.BreakerConfig{Threshold: 2, Cooldown: 20 * time.Millisecond, DisableAfter: 300 * time.Millisecond},
	}
	stores := couriertest.PostgresStores(t, 3, cfg)
	ctx := t.Context()
	fastDeadlockDetection(t, stores)
	watch := watchDeadlocks(t, stores)

	endpoints := []string{
		"https://receiver.example/a", "https://receiver.example/b",
		"https://receiver.example/c", "https://receiver.example/d",
	}
	keys := []string{"", "K1", "K2", "K3"}
	for _, ep := range endpoints[:2] {
		if _, err := stores[0].Subscriptions.Create(ctx, stores[0].DB(), store.SubscriptionParams{
			Tenant: "t", Endpoint: ep, EventTypes: []string{"*"}, KeyID: "k1", Profile: ack.ProfileNone,
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := stores[0].Endpoints.SetLimits(ctx, endpoints[2], store.Limits{MaxInFlight: 2}); err != nil {
		t.Fatal(err)
	}
	if err := stores[0].Endpoints.SetLimits(ctx, endpoints[3], store.Limits{Rate: 200, Burst: 3}); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		bad    []string
		counts = map[string]int{}
		ids    []int64
	)
	note := func(op string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			counts[op+" ok"]++
			return
		}
		counts[op+" "+string(courier.CodeOf(err))]++
		if lockFailure(err) {
			bad = append(bad, fmt.Sprintf("%s: %v%s", op, err, lockDetail(err)))
		}
	}
	remember := func(id int64) {
		mu.Lock()
		ids = append(ids, id)
		mu.Unlock()
	}
	someID := func(r *rand.Rand) int64 {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return 1
		}
		return ids[r.IntN(len(ids))]
	}

	var wg sync.WaitGroup
	for g := range goroutines {
		r := rand.New(rand.NewPCG(seed, uint64(g)))
		s := stores[g%len(stores)]
		owner := fmt.Sprintf("w%d", g)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []protocol.Claimed
			settle := func(cs []protocol.Claimed) {
				var ocs []protocol.Outcome
				for _, c := range cs {
					oc := protocol.Outcome{Lease: c.Lease}
					switch r.IntN(4) {
					case 0:
						oc.Result = protocol.Succeeded
					case 1:
						oc.Result, oc.Code, oc.HTTPStatus, oc.RetryDelay = protocol.Retry, courier.CodeReceiverUnavailable, 503, time.Duration(r.IntN(20))*time.Millisecond
					case 2:
						oc.Result, oc.Code, oc.HTTPStatus = protocol.Failed, courier.CodeReceiverRejected, 400
					case 3:
						oc.Result, oc.Code = protocol.Retry, courier.CodeWorkerStopped
					}
					ocs = append(ocs, oc)
				}
				st, err := protocol.For(s).Settle(ctx, ocs...)
				note("settle", err)
				for _, x := range st {
					note("settle outcome", x.Err)
				}
			}
			for i := range steps {
				ep, key := endpoints[r.IntN(len(endpoints))], keys[r.IntN(len(keys))]
				nid := fmt.Sprintf("%s-%d", owner, i)
				switch op := r.IntN(20); {
				case op < 3:
					var e store.Enqueued
					note("enqueue", inTx(t, s, func(tx store.DBTX) (err error) { //nolint:contextcheck // inTx begins on t.Context(), ctx itself
						e, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: nid, Endpoint: ep, Payload: []byte(`{}`), OrderingKey: key, Priority: r.IntN(2)})
						return err
					}))
					if e.ID != 0 {
						remember(e.ID)
					}
				case op < 5:
					var ps []store.EnqueueParams
					for j := range 1 + r.IntN(4) {
						ps = append(ps, store.EnqueueParams{NotificationID: fmt.Sprintf("%s.%d", nid, j), Endpoint: endpoints[r.IntN(len(endpoints))], Payload: []byte(`{}`), OrderingKey: keys[r.IntN(len(keys))]})
					}
					var es []store.Enqueued
					note("enqueue many", inTx(t, s, func(tx store.DBTX) (err error) { //nolint:contextcheck // inTx begins on t.Context(), ctx itself
						es, err = s.Outbox.EnqueueMany(ctx, tx, ps)
						return err
					}))
					for _, e := range es {
						remember(e.ID)
					}
				case op < 6:
					var ps []store.Published
					note("publish", inTx(t, s, func(tx store.DBTX) (err error) { //nolint:contextcheck // inTx begins on t.Context(), ctx itself
						ps, err = s.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "t", EventType: "order.updated", EventID: nid, Payload: []byte(`{}`), OrderingKey: key})
						return err
					}))
					for _, p := range ps {
						remember(p.ID)
					}
				case op < 10:
					lease := time.Minute
					if r.IntN(4) == 0 {
						lease = 30 * time.Millisecond // expires under another claim
					}
					got, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: owner, Limit: 1 + r.IntN(5), Lease: lease})
					note("claim", err)
					held = append(held, got...)
				case op < 13:
					n := r.IntN(len(held) + 1)
					if n > 0 {
						settle(held[:n])
						held = held[n:]
					}
				case op < 14:
					if n := r.IntN(len(held) + 1); n > 0 {
						var ls []protocol.Lease
						for _, c := range held[:n] {
							ls = append(ls, c.Lease)
						}
						_, err := protocol.For(s).Release(ctx, ls...)
						note("release", err)
						held = held[n:]
					}
				case op < 15:
					var err error
					switch r.IntN(3) {
					case 0:
						_, err = s.Outbox.Redrive(ctx, store.RedriveParams{})
					case 1:
						_, err = s.Outbox.Redrive(ctx, store.RedriveParams{Endpoint: ep})
					case 2:
						_, err = s.Outbox.Redrive(ctx, store.RedriveParams{ID: someID(r)})
					}
					note("redrive", err)
				case op < 16:
					note("cancel", s.Outbox.Cancel(ctx, someID(r)))
				case op < 17:
					if r.IntN(2) == 0 {
						note("disable", s.Endpoints.Disable(ctx, ep))
					} else {
						note("enable", s.Endpoints.Enable(ctx, ep))
					}
				case op < 18:
					note("set limits", s.Endpoints.SetLimits(ctx, ep, store.Limits{MaxInFlight: r.IntN(3), Rate: float64(r.IntN(2) * 100)}))
				case op < 19:
					_, err := s.Outbox.Prune(ctx, store.PruneParams{OlderThan: time.Duration(1+r.IntN(2)) * time.Millisecond, BatchSize: 1 + r.IntN(5)})
					note("prune", err)
				default:
					note("enable", s.Endpoints.Enable(ctx, ep))
				}
			}
			if len(held) > 0 {
				settle(held)
			}
		}()
	}
	wg.Wait()
	t.Logf("operations: %v", counts)
	if len(bad) > 0 {
		t.Fatalf("seed %d: %d operations failed on a lock:\n%s", seed, len(bad), strings.Join(bad, "\n"))
	}

	drain(t, stores[0], endpoints)
	h, err := stores[0].Outbox.Check(ctx, 100_000)
	if err != nil || len(h.Invalid) > 0 {
		t.Fatalf("seed %d: check after draining: %v, invalid %v", seed, err, h.Invalid)
	}
	var left []string
	if err := stores[0].DB().SelectContext(ctx, &left, `SELECT endpoint || ' ' || ordering_key || ' head ' || head_id FROM courier_ordering_keys`); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("seed %d: ordering keys left after draining: %v", seed, left)
	}
	watch.wantNone(t, fmt.Sprintf("seed %d: ", seed))
}

// lockFailure reports whether err is a lost deadlock or a lock wait past
// its bound, however the store wrapped it.
func lockFailure(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "40P01") || strings.Contains(msg, "55P03") || strings.Contains(msg, "deadlock")
}

// lockDetail is what PostgreSQL said of a lost deadlock beyond its
// message: the transactions in the circle, what each waited for and the
// statement it ran.
func lockDetail(err error) string {
	var e *pgconn.PgError
	if !errors.As(err, &e) || e.Detail == "" {
		return ""
	}
	return "\n\t" + strings.ReplaceAll(e.Detail, "\n", "\n\t")
}

// fastDeadlockDetection has the database look for deadlocks after 20ms
// of waiting rather than a second, in the Stores' connections from now
// on: a deadlock then ends as one, not as a settle's lock timeout.
func fastDeadlockDetection(t *testing.T, stores []*store.Store) {
	t.Helper()
	db := stores[0].DB()
	var name string
	if err := db.GetContext(t.Context(), &name, `SELECT current_database()`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), fmt.Sprintf(`ALTER DATABASE %q SET deadlock_timeout = '20ms'`, name)); err != nil {
		t.Fatal(err)
	}
	for _, s := range stores { // idle connections go; new ones read the setting
		s.DB().SetMaxIdleConns(0)
		s.DB().SetMaxIdleConns(32)
	}
}

// deadlockWatch counts the deadlocks PostgreSQL detects in the Stores'
// database from its start on, even one a settle recovered from by settling
// again: the database's count (pg_stat_database), and what the throwaway
// server logged, which tells the statements that met. The count may lag:
// a backend's statistics reach it as the backend flushes them, which can
// be after it has left pg_stat_activity, while the server logs a deadlock
// as it detects it; so the log is read too, where the role may read it.
// Tests that watch for deadlocks do not run in parallel: any other
// deadlock the server logs meanwhile is another test's of the package, and
// a bug as well.
type deadlockWatch struct {
	stores  []*store.Store
	logFrom int64 // the log's size at the start; -1: the log cannot be read
}

// serverLog is where the throwaway server (internal/pgtest) writes its
// log, beside its data directory.
const serverLog = `current_setting('data_directory') || '/../postgres.log'`

// watchDeadlocks starts watching the database of stores.
func watchDeadlocks(t *testing.T, stores []*store.Store) *deadlockWatch {
	t.Helper()
	w := &deadlockWatch{stores: stores, logFrom: -1}
	if err := stores[0].DB().GetContext(t.Context(), &w.logFrom, `SELECT size FROM pg_stat_file(`+serverLog+`)`); err != nil {
		w.logFrom = -1 // another server, or a role that may not read files
	}
	return w
}

// detected closes the Stores' connections, so their backends report what
// they counted, and returns how many deadlocks the database counted and
// what the server logged of those it detected since the watch began
// ("" if none, or the log cannot be read).
func (w *deadlockWatch) detected(t *testing.T) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	db, err := w.stores[0].DB().Conn(ctx) // kept while the rest go
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range w.stores {
		s.Close()
		s.DB().SetMaxIdleConns(0)
	}
	for {
		var backends int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&backends); err != nil {
			t.Fatal(err)
		}
		if backends == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d backends of the closed Stores still run", backends)
		case <-time.After(10 * time.Millisecond):
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if w.logFrom < 0 {
		return n, ""
	}
	var text string
	if err := db.QueryRowContext(ctx, `SELECT pg_read_file(`+serverLog+`, $1, 1 << 20)`, w.logFrom).Scan(&text); err != nil {
		t.Fatal(err)
	}
	var out []string
	logged, keep := 0, false
	for line := range strings.Lines(text) {
		switch {
		case strings.Contains(line, "ERROR:  deadlock detected"):
			logged++
			keep = true
		case !strings.HasPrefix(line, "\t") && !strings.Contains(line, "DETAIL:") && !strings.Contains(line, "HINT:") &&
			!strings.Contains(line, "CONTEXT:") && !strings.Contains(line, "STATEMENT:"):
			keep = false
		}
		if keep {
			out = append(out, strings.TrimRight(line, "\n"))
		}
	}
	return max(n, logged), strings.Join(out, "\n")
}

// wantNone fails the test if the database detected a deadlock since the
// watch began, with what the server logged of it.
func (w *deadlockWatch) wantNone(t *testing.T, what string) {
	t.Helper()
	if n, logged := w.detected(t); n > 0 {
		t.Fatalf("%sthe database detected %d deadlocks; want none\n%s", what, n, logged)
	}
}

// drain sends everything left: endpoints enabled and unlimited, failed
// deliveries redriven, every due delivery claimed and succeeded, until
// nothing remains to send.
func drain(t *testing.T, s *store.Store, endpoints []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, ep := range endpoints {
		if err := s.Endpoints.Enable(ctx, ep); err != nil {
			t.Fatal(err)
		}
		if err := s.Endpoints.SetLimits(ctx, ep, store.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if _, err := s.Outbox.Redrive(ctx, store.RedriveParams{}); err != nil {
			t.Fatal(err)
		}
		got, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "drain", Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			var ocs []protocol.Outcome
			for _, c := range got {
				ocs = append(ocs, protocol.Outcome{Lease: c.Lease, Result: protocol.Succeeded})
			}
			st, err := protocol.For(s).Settle(ctx, ocs...)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range st {
				if x.Err != nil {
					t.Fatal(x.Err)
				}
			}
			continue
		}
		h, err := s.Outbox.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, st := range []courier.Status{courier.StatusPending, courier.StatusRetryWait, courier.StatusLeased, courier.StatusFailed} {
			open += h.Counts[st]
		}
		if open == 0 {
			return
		}
		select { // retry delays, expired leases and breaker cool-downs run out
		case <-ctx.Done():
			t.Fatalf("draining: %v left: %+v", open, h.Counts)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

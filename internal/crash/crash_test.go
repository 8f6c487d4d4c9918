package crash_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/crash"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

var (
	flagN        = flag.Int("crash.n", 200, "notifications per engine")
	flagKills    = flag.Int("crash.kills", 6, "kill points per engine: SIGKILLs of the sender or receiver sent by the test")
	flagSeed     = flag.Uint64("crash.seed", 0, "seed of the kill schedule and self-kill draws; 0 picks one (logged)")
	flagSelfKill = flag.Float64("crash.selfkill", 0.02, "probability that the receiver kills itself after committing a notification, before answering")
	flagTimeout  = flag.Duration("crash.timeout", 0, "bound on one engine's whole run; 0 bounds it by the test binary's -timeout, less reportMargin (no bound without one)")
	flagFreezes  = flag.Int("crash.freezes", 3, "sender kill points on PostgreSQL that freeze the sender (SIGSTOP) instead, start its successor, thaw it (SIGCONT) once its leases expired, and then kill it: its late settles must be fenced off")
)

// The kill schedule: each kill point comes a random delay within
// [minDelay, maxDelay] after both processes are up, while deliveries are
// in flight.
const (
	minDelay = 5 * time.Millisecond
	maxDelay = 300 * time.Millisecond
	// drainPoll is how often the parent reads the outbox's health while it
	// waits for every delivery to finish.
	drainPoll = 50 * time.Millisecond
	// drainStall is how long the drain may go without progress: far
	// longer than any backoff, breaker cool-down or lease of the run, so
	// a drain that stops this long has deliveries nothing will send.
	drainStall = 20 * time.Second
	// reportMargin is how long before the test binary's deadline (go test
	// -timeout) a run without -crash.timeout ends: time to fail saying
	// how far it got, kill its children and stop PostgreSQL, rather than
	// have the binary panic with its goroutines.
	reportMargin = time.Minute
)

// runBound returns the bound on one engine's run that starts now: set,
// -crash.timeout, if positive; else up to reportMargin before t's
// deadline. A run's work is fixed (its business transactions, kills and
// freezes), but the time it takes is not: under -race on a machine that
// other test binaries load, the processes get a fraction of a core each
// and every phase runs several times slower, on PostgreSQL most, whose
// every round trip waits for its server process to be scheduled. What
// proves the run live does not depend on this bound: a child must be
// ready within readyBound and exit within exitBound, and a drain that
// stops moving fails after drainStall. ok is false for no bound: neither
// the test nor the flag sets one.
func runBound(t *testing.T, set time.Duration) (bound time.Duration, ok bool) {
	if set > 0 {
		return set, true
	}
	deadline, ok := t.Deadline()
	if !ok {
		return 0, false
	}
	return max(time.Until(deadline)-reportMargin, 0), true
}

func TestMain(m *testing.M) { testmain.Main(m) }

// TestCrashProcess is not a test of its own: it is the body of the child
// processes TestCrash starts by running this test binary again. Without
// the harness's environment it skips. With it, it runs the sender or the
// receiver until its stdin closes or it gets SIGINT or SIGTERM.
func TestCrashProcess(t *testing.T) {
	spec, ok, err := crash.SpecFromEnv()
	if !ok {
		t.Skip("the body of TestCrash's child processes; not run on its own")
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent closes stdin to stop this child, or dies
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ready := func() { fmt.Println(crash.ReadyLine) }
	run := crash.RunReceiver
	if spec.Role == crash.RoleSender {
		run = crash.RunSender
	}
	if err := run(ctx, spec, logger, ready); err != nil {
		// On stderr, which the harness keeps and shows: a test's own
		// output goes to stdout, which it reads for the ready line only.
		fmt.Fprintf(os.Stderr, "%s failed: %v\n", spec.Role, err)
		t.Fatal(err)
	}
}

// TestCrash delivers -crash.n terminal notifications from a sender process
// to a receiver process, SIGKILLs one or the other -crash.kills times at
// seeded random moments (and lets the receiver kill itself after commits,
// before answering), restarts each, lets both finish, and checks the
// databases: every notification whose business transaction committed was
// processed exactly once and its delivery succeeded; none whose
// transaction rolled back was enqueued or processed; the attempts log
// holds every attempt once. On PostgreSQL up to -crash.freezes of the
// sender's kill points freeze it first (harness.freeze), so that a sender
// outlives its leases and settles late. A drain that stops moving for
// drainStall fails with what holds it up.
func TestCrash(t *testing.T) {
	onBothEngines(t, run{n: *flagN, kills: *flagKills, freezes: *flagFreezes, selfKill: *flagSelfKill, timeout: *flagTimeout})
}

// onBothEngines runs r on SQLite and on PostgreSQL at once, from one seed
// (-crash.seed, or a fresh one it logs): each engine takes its own stream
// of it, counted from r.stream.
func onBothEngines(t *testing.T, r run) {
	seed := *flagSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	for i, engine := range []string{crash.EngineSQLite, crash.EnginePostgres} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			e := r
			e.engine, e.seed, e.stream = engine, seed, r.stream+uint64(i)
			runCrash(t, e)
		})
	}
}

// run is one engine's run.
type run struct {
	engine   string
	seed     uint64
	stream   uint64 // the engine's own stream of the seed's PCG
	n        int
	kills    int
	freezes  int // of the kills of the sender, how many freeze it first (harness.freeze)
	selfKill float64
	timeout  time.Duration
	mode     string  // "" or crash.ModeControl
	flaky    float64 // crash.Spec.Flaky
}

// harness holds one run's processes and what happened to them. All of
// its methods run on the test's goroutine.
type harness struct {
	t        *testing.T
	ctx      context.Context // done at the run's bound
	r        run
	sender   *store.Store // the parent's view of the outbox
	queries  map[string]string
	base     crash.Spec
	procs    map[string]*proc
	started  map[string]int // incarnations started per role
	expected int            // orders whose transaction commits

	// What happened.
	senderKills, senderKillsEnqueueing, senderKillsWithLeases, orphanedLeases int
	receiverKills, selfKills                                                  int
	freezes, frozenLeases, fenced, withheld                                   int
	zombies                                                                   []*proc // frozen senders, killed once thawed
	// The leases frozen senders held, and when each expired.
	frozen map[frozenLease]time.Time

	notes   *notes        // what the children wrote of their watch
	control *controlStats // ModeControl: what the parent saw while it ran
}

func runCrash(t *testing.T, r run) {
	if r.n < 1 || r.kills < 0 || r.selfKill < 0 || r.selfKill >= 1 {
		t.Fatalf("bad flags: -crash.n=%d -crash.kills=%d -crash.selfkill=%v", r.n, r.kills, r.selfKill)
	}
	began := time.Now()
	ctx := t.Context()
	if bound, ok := runBound(t, r.timeout); ok {
		r.timeout = bound
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}

	var senderDB, receiverDB string
	switch r.engine {
	case crash.EngineSQLite:
		dir := t.TempDir()
		senderDB, receiverDB = filepath.Join(dir, "sender.db"), filepath.Join(dir, "receiver.db")
	case crash.EnginePostgres:
		senderDB, receiverDB = pgtest.URL(t), pgtest.URL(t)
	}
	if err := crash.Prepare(ctx, r.engine, senderDB, crash.RoleSender); err != nil {
		t.Fatal(err)
	}
	if err := crash.Prepare(ctx, r.engine, receiverDB, crash.RoleReceiver); err != nil {
		t.Fatal(err)
	}
	secret := signature.NewStandardWebhooksSecret()
	cfg := crash.Spec{Mode: r.mode, Secret: secret}.StoreConfig()
	sender := openStore(t, r.engine, senderDB, cfg)
	receiver := openStore(t, r.engine, receiverDB, cfg)
	queries, err := crash.Queries(r.engine)
	if err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(r.seed, r.stream))
	h := &harness{
		t: t, ctx: ctx, r: r, sender: sender, queries: queries,
		procs: make(map[string]*proc), started: make(map[string]int), notes: &notes{},
		base: crash.Spec{
			Engine: r.engine,
			Addr:   fixedAddr(t, func(n int) int { return rand.IntN(n) }),
			Secret: secret,
			N:      r.n, Seed: r.seed, SelfKill: r.selfKill,
			Mode: r.mode, Flaky: r.flaky,
			// The enqueues span about as long as the kill points (in
			// ModeControl the first third of them, so that the later
			// ones land on the backlog the endpoints' limits hold).
			EnqueueWindow: time.Duration(r.kills) * (minDelay + maxDelay) / 2 / windowDivisor(r.mode),
		},
	}
	for i := range r.n {
		if !crash.RolledBack(r.seed, i) {
			h.expected++
		}
	}
	dbs := map[string]string{crash.RoleSender: senderDB, crash.RoleReceiver: receiverDB}
	if r.mode == crash.ModeControl {
		h.setUpControl()
	}
	t.Cleanup(func() { // kill survivors of a failed run, before their databases go
		for _, p := range append(slices.Collect(maps.Values(h.procs)), h.zombies...) {
			if err := p.kill(); err != nil {
				t.Error(err)
			}
		}
	})
	h.launch(crash.RoleReceiver, dbs)
	h.launch(crash.RoleSender, dbs)
	up := time.Now()

	// The kill points.
	for range r.kills {
		role := crash.RoleSender
		if rng.IntN(2) == 0 {
			role = crash.RoleReceiver
		}
		delay := minDelay + time.Duration(rng.Int64N(int64(maxDelay-minDelay)+1))
		h.await(time.After(delay), dbs)
		h.observe()
		if role == crash.RoleSender && h.freezes < r.freezes && r.engine == crash.EnginePostgres && h.freeze(dbs) {
			continue
		}
		h.kill(role, dbs)
	}
	killed := time.Now()

	// Both run to completion: every committed order enqueued and nothing
	// left pending, leased or waiting for a retry. Leases of killed
	// workers expire and are retried by the running one.
	// A drain that stops moving (no order committed, no delivery's status
	// changed, no attempt logged for drainStall) fails at once rather than
	// at the run's bound.
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	var progress string
	moved := time.Now()
	for {
		h.await(tick.C, dbs)
		h.observe()
		// The orders are counted before the outbox is read: an order and
		// its notification commit together, so once every expected order
		// is counted, a read after it that finds nothing unfinished has
		// seen every notification finished. Read the other way round, the
		// last order could commit between the two reads, its notification
		// unseen, and the drain end before it was delivered. More orders
		// than expected is a failure check reports.
		orders := h.countOrders()
		health, err := sender.Outbox.Health(ctx)
		if err != nil {
			h.fatal(err)
		}
		if orders >= h.expected && unfinished(health) == 0 {
			break
		}
		switch now := fmt.Sprint(orders, health.Counts, h.countAttempts()); {
		case now != progress:
			progress, moved = now, time.Now()
		case time.Since(moved) >= drainStall:
			h.stalled(health)
		}
	}
	drained := time.Now()
	for _, p := range h.procs {
		p.stdin.Close() // both stop at once
	}
	for role, p := range h.procs {
		if err := p.await(); err != nil {
			t.Error(err)
		}
		h.vet(p)
		if !p.cleanExit() {
			t.Errorf("%s did not stop cleanly: %s", role, p.describe())
		}
	}
	delete(h.procs, crash.RoleSender)
	delete(h.procs, crash.RoleReceiver)
	stopped := time.Now()

	if r.mode == crash.ModeControl {
		h.checkControl(t.Context(), sender, receiver, began, up, killed, drained, stopped)
		return
	}
	c := h.check(t.Context(), sender, receiver)
	t.Logf("%s: seed=%d n=%d committed=%d rolled_back=%d busy_retries=%d kills=%d (sender=%d [enqueueing=%d, holding_leases=%d, leases_orphaned=%d] receiver=%d receiver_after_commit=%d) freezes=%d (leases_frozen=%d, settles_fenced=%d, writes_withheld=%d) "+
		"attempts=%d (lease_expired=%d network=%d timeout=%d other_retries=%d succeeded=%d) lost=%d duplicates=%d phantom=%d not_succeeded=%d "+
		"setup=%v kill_phase=%v drain=%v stop=%v total=%v",
		r.engine, r.seed, r.n, c.committed, r.n-h.expected, h.notes.retries(),
		h.senderKills+h.receiverKills+h.selfKills, h.senderKills, h.senderKillsEnqueueing, h.senderKillsWithLeases, h.orphanedLeases,
		h.receiverKills, h.selfKills, h.freezes, h.frozenLeases, h.fenced, h.withheld,
		c.attempts, c.outcomes["lease_expired"], c.outcomes[retryNetwork], c.outcomes[retryTimeout], c.otherRetries, c.outcomes["succeeded"],
		c.lost, c.duplicates, c.phantom, c.notSucceeded,
		up.Sub(began).Round(time.Millisecond), killed.Sub(up).Round(time.Millisecond), drained.Sub(killed).Round(time.Millisecond), stopped.Sub(drained).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// windowDivisor is how much shorter than the kill phase the enqueues are.
func windowDivisor(mode string) time.Duration {
	if mode == crash.ModeControl {
		return 3
	}
	return 1
}

// unfinished counts deliveries not yet in a final state.
func unfinished(h store.Health) int {
	return h.Counts[courier.StatusPending] + h.Counts[courier.StatusLeased] + h.Counts[courier.StatusRetryWait]
}

func openStore(t *testing.T, engine, database string, cfg store.Config) *store.Store {
	t.Helper()
	st, err := crash.Open(t.Context(), engine, database, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { crash.Close(st) })
	return st
}

// launch starts the next incarnation of role and waits until it is ready.
// A receiver that kills itself after a commit before its ready line
// reached the parent is started again.
func (h *harness) launch(role string, dbs map[string]string) {
	h.t.Helper()
	bound := time.NewTimer(readyBound)
	defer bound.Stop()
	for {
		spec := h.base
		spec.Role, spec.Database, spec.Incarnation = role, dbs[role], h.started[role]
		h.started[role]++
		p, err := startProc(spec, h.notes.writer())
		if err != nil {
			h.t.Fatal(err)
		}
		h.procs[role] = p
		select {
		case <-p.ready:
			return
		case <-p.done:
			h.vet(p)
			if p.selfKilled() {
				h.selfKills++
				continue
			}
			h.t.Fatalf("%s exited before it was ready: %s", role, p.describe())
		case <-bound.C:
			h.t.Fatalf("%s not ready within %v: %s", role, readyBound, p.describe())
		case <-h.ctx.Done():
			h.t.Fatalf("run bound of %v reached while starting %s", h.r.timeout, role)
		}
	}
}

// await waits for c, restarting a receiver that killed itself meanwhile;
// any other death of a child fails the test.
func (h *harness) await(c <-chan time.Time, dbs map[string]string) {
	h.t.Helper()
	for {
		select {
		case <-c:
			return
		case <-h.procs[crash.RoleReceiver].done:
			h.exited(crash.RoleReceiver, dbs)
		case <-h.procs[crash.RoleSender].done:
			h.exited(crash.RoleSender, dbs)
		case <-h.ctx.Done():
			h.outOfTime()
		}
	}
}

// outOfTime fails the run at its bound, saying how far it got.
func (h *harness) outOfTime() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var orders int
	_ = h.sender.DB().QueryRowContext(ctx, h.queries["count_orders"]).Scan(&orders)
	health, _ := h.sender.Outbox.Health(ctx)
	if h.r.mode == crash.ModeControl {
		h.t.Errorf("ordering keys left: %s", h.keysLeft(ctx))
	}
	h.t.Fatalf("run bound of %v reached: %d of %d orders committed, outbox %v; kills so far: sender %d, receiver %d, receiver after commit %d",
		h.r.timeout, orders, h.expected, health.Counts, h.senderKills, h.receiverKills, h.selfKills)
}

// stalled fails a drain that stopped moving, saying what holds it up:
// the ordering keys still headed, the deliveries waiting for a key that
// nothing will move on, and what Outbox.Check finds.
func (h *harness) stalled(health store.Health) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var held []string
	err := h.rows(ctx, h.sender, "held_without_key", func(scan func(...any) error) error {
		var id, head int64
		var notification, endpoint, key string
		if err := scan(&id, &notification, &endpoint, &key, &head); err != nil {
			return err
		}
		held = append(held, fmt.Sprintf("%s/%s:%d(%s,head=%d)", h.label(endpoint), key, id, notification, head))
		return nil
	})
	if err != nil {
		h.t.Error(err)
	}
	check, err := h.sender.Outbox.Check(ctx, 100_000)
	if err != nil {
		h.t.Error(err)
	}
	h.t.Fatalf("drain stalled: no progress for %v; outbox %v; ordering keys left: %s; %d deliveries wait for a key nothing moves on %v; Outbox.Check %s (%s) invalid=%v",
		drainStall, health.Counts, h.keysLeft(ctx), len(held), sample(held), check.Status, check.Code, check.Invalid[:min(len(check.Invalid), 5)])
}

// fatal fails the run with err, or says it ran out of time.
func (h *harness) fatal(err error) {
	h.t.Helper()
	if h.ctx.Err() != nil {
		h.outOfTime()
	}
	h.t.Fatal(err)
}

// vet reports what a child that ended wrote about itself that fails the
// run, killed or not: a data race (under -race) or a panic.
func (h *harness) vet(p *proc) {
	h.t.Helper()
	out := p.tail.String()
	for _, bad := range []string{"WARNING: DATA RACE", "panic: "} {
		if strings.Contains(out, bad) {
			h.t.Errorf("%s wrote %q: %s", p, bad, p.describe())
		}
	}
}

// exited handles a child that died without the parent killing it.
func (h *harness) exited(role string, dbs map[string]string) {
	h.t.Helper()
	p := h.procs[role]
	h.vet(p)
	if !p.selfKilled() {
		h.t.Fatalf("%s died unexpectedly: %s", role, p.describe())
	}
	h.selfKills++
	h.launch(role, dbs)
}

// kill is one kill point: SIGKILL role's process, note what it was doing,
// and start it again.
func (h *harness) kill(role string, dbs map[string]string) {
	h.t.Helper()
	if h.procs[role].exited() { // it killed itself just now: count that, then kill the next one
		h.exited(role, dbs)
	}
	if err := h.procs[role].kill(); err != nil {
		h.t.Fatal(err)
	}
	h.vet(h.procs[role])
	switch role {
	case crash.RoleSender:
		h.senderKills++
		if h.countOrders() < h.expected {
			h.senderKillsEnqueueing++
		}
		var held int
		q := h.queries["leases_held"]
		for _, owner := range crash.Owners(h.procs[role].spec) {
			var n int
			if err := h.sender.DB().QueryRowContext(h.ctx, q, owner).Scan(&n); err != nil {
				h.fatal(err)
			}
			held += n
		}
		if held > 0 {
			h.senderKillsWithLeases++
			h.orphanedLeases += held
		}
	case crash.RoleReceiver:
		h.receiverKills++
	}
	h.launch(role, dbs)
}

// Phases of a freeze (harness.freeze): how long the frozen sender stays
// stopped after its successor is up, long enough for every lease it held
// to expire and be claimed again; and how long it then runs before it is
// killed, long enough to settle what it had in hand.
const (
	frozenFor = crash.WorkerLease + 300*time.Millisecond
	thawedFor = 300 * time.Millisecond
)

// freeze is a kill point of the sender that stops it (SIGSTOP) instead of
// killing it, as a paused VM or a long GC pause would: its successor
// starts, claims the leases it held once they expire and delivers them
// again; then the frozen sender resumes (SIGCONT) with its attempts still
// in hand, and settles them late before it is killed. Every such settle
// must be refused (the lease it was made under has expired or was given
// to another), or a delivery would be settled twice, moved on by a lease
// it no longer holds, or its slot given back while its successor holds it.
// The leases it held are recorded (harness.frozen): a request of one may
// be in flight at the receiver after the lease expired, left open by the
// frozen sender or written when it resumed, and an overlap with it is
// judged crash.LeaseExpired, not a breach.
// PostgreSQL only: on SQLite a sender frozen inside a write transaction
// holds the one writer's lock, and its successor can write nothing, not
// even to start, until it is thawed.
//
// A sender found holding no lease once stopped is thawed at once and
// freeze reports false: the caller kills it instead.
func (h *harness) freeze(dbs map[string]string) bool {
	h.t.Helper()
	role := crash.RoleSender
	if h.procs[role].exited() {
		h.exited(role, dbs)
	}
	p := h.procs[role]
	h.zombies = append(h.zombies, p)
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		h.t.Fatalf("freeze %s: %v", p, err)
	}
	held := 0
	for _, owner := range crash.Owners(p.spec) {
		err := h.rows(h.ctx, h.sender, "leases_frozen", func(scan func(...any) error) error {
			var l frozenLease
			var expires int64
			if err := scan(&l.id, &l.label, &l.attempt, &expires); err != nil {
				return err
			}
			l.label = h.label(l.label)
			if h.frozen == nil {
				h.frozen = make(map[frozenLease]time.Time)
			}
			h.frozen[l] = time.UnixMicro(expires)
			held++
			return nil
		}, owner)
		if err != nil {
			h.fatal(err)
		}
	}
	if held == 0 {
		if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			h.t.Fatalf("thaw %s: %v", p, err)
		}
		h.zombies = h.zombies[:len(h.zombies)-1]
		return false
	}
	h.freezes++
	h.frozenLeases += held
	h.launch(role, dbs)
	h.await(time.After(frozenFor), dbs)
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		h.t.Fatalf("thaw %s: %v", p, err)
	}
	h.await(time.After(thawedFor), dbs)
	if err := p.kill(); err != nil {
		h.t.Fatal(err)
	}
	h.vet(p)
	h.fenced += strings.Count(p.tail.String(), "lease lost before settling")
	h.withheld += strings.Count(p.tail.String(), "request not written within its Timeout")
	h.zombies = slices.DeleteFunc(h.zombies, func(z *proc) bool { return z == p })
	return true
}

// countAttempts returns how many attempts the attempts log holds.
func (h *harness) countAttempts() int {
	h.t.Helper()
	var n int
	if err := h.sender.DB().QueryRowContext(h.ctx, h.queries["count_attempts"]).Scan(&n); err != nil {
		h.fatal(err)
	}
	return n
}

// countOrders returns how many business transactions have committed.
func (h *harness) countOrders() int {
	h.t.Helper()
	var n int
	if err := h.sender.DB().QueryRowContext(h.ctx, h.queries["count_orders"]).Scan(&n); err != nil {
		h.fatal(err)
	}
	return n
}

// Keys of checked.outcomes.
var (
	retryNetwork = "retry " + string(courier.CodeNetwork)
	retryTimeout = "retry " + string(courier.CodeTimeout)
)

// checked is what the databases say after a run.
type checked struct {
	committed    int
	lost         int // committed, but no effect
	duplicates   int // committed, more than one effect
	phantom      int // effects or deliveries of notifications never committed
	notSucceeded int // deliveries not succeeded
	attempts     int
	outcomes     map[string]int // attempts by "outcome" or "outcome code"
	otherRetries int
}

// check reads the truth from both databases and reports every broken
// promise as an error.
func (h *harness) check(ctx context.Context, sender, receiver *store.Store) checked {
	t := h.t
	t.Helper()
	var c checked
	orders, err := h.column(ctx, sender, "committed_orders")
	if err != nil {
		t.Fatal(err)
	}
	committed := make(map[string]bool, len(orders))
	for _, id := range orders {
		committed[id] = true
	}
	c.committed = len(committed)

	// The orders that committed are exactly those that were not rolled
	// back: restarted senders converge on the same business state.
	var missingOrders, unexpectedOrders []string
	for i := range h.r.n {
		n, _, err := crash.Notification(h.r.seed, i)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case crash.RolledBack(h.r.seed, i) && committed[n.NotificationID]:
			unexpectedOrders = append(unexpectedOrders, n.NotificationID)
		case !crash.RolledBack(h.r.seed, i) && !committed[n.NotificationID]:
			missingOrders = append(missingOrders, n.NotificationID)
		}
	}
	if len(missingOrders) > 0 || len(unexpectedOrders) > 0 {
		t.Errorf("orders: %d never committed %v, %d committed though rolled back %v",
			len(missingOrders), sample(missingOrders), len(unexpectedOrders), sample(unexpectedOrders))
	}

	// Every committed notification has one delivery, succeeded; nothing
	// else is in the outbox.
	deliveries := make(map[string][]string)
	if err := h.rows(ctx, sender, "outbox_rows", func(scan func(...any) error) error {
		var id, status string
		if err := scan(&id, &status); err != nil {
			return err
		}
		deliveries[id] = append(deliveries[id], status)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var notSucceeded, phantomDeliveries []string
	for id, statuses := range deliveries {
		switch {
		case !committed[id]:
			phantomDeliveries = append(phantomDeliveries, id)
		case len(statuses) != 1 || statuses[0] != string(courier.StatusSucceeded):
			notSucceeded = append(notSucceeded, fmt.Sprintf("%s:%v", id, statuses))
		}
	}
	for id := range committed {
		if deliveries[id] == nil {
			notSucceeded = append(notSucceeded, id+":[no delivery]")
		}
	}
	c.notSucceeded = len(notSucceeded)
	if len(notSucceeded) > 0 || len(phantomDeliveries) > 0 {
		t.Errorf("outbox: %d committed notifications without exactly one succeeded delivery %v; %d deliveries of uncommitted notifications %v",
			len(notSucceeded), sample(notSucceeded), len(phantomDeliveries), sample(phantomDeliveries))
	}

	// The receiver processed every committed notification exactly once,
	// and nothing else.
	effects := make(map[string]int)
	if err := h.rows(ctx, receiver, "count_effects", func(scan func(...any) error) error {
		var id string
		var n int
		if err := scan(&id, &n); err != nil {
			return err
		}
		effects[id] = n
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var lost, duplicated, phantom []string
	for id := range committed {
		switch n := effects[id]; {
		case n == 0:
			lost = append(lost, id)
		case n > 1:
			duplicated = append(duplicated, fmt.Sprintf("%s×%d", id, n))
		}
	}
	for id := range effects {
		if !committed[id] {
			phantom = append(phantom, id)
		}
	}
	c.lost, c.duplicates, c.phantom = len(lost), len(duplicated), len(phantom)+len(phantomDeliveries)
	if len(lost) > 0 || len(duplicated) > 0 || len(phantom) > 0 {
		t.Errorf("effects: %d committed notifications never processed %v, %d processed more than once %v, %d processed though never committed %v",
			len(lost), sample(lost), len(duplicated), sample(duplicated), len(phantom), sample(phantom))
	}

	// The attempts log: one success per delivery, and what the kills cost.
	c.outcomes = make(map[string]int)
	if err := h.rows(ctx, sender, "attempt_outcomes", func(scan func(...any) error) error {
		var outcome, code string
		var n int
		if err := scan(&outcome, &code, &n); err != nil {
			return err
		}
		c.attempts += n
		c.outcomes[outcome] += n
		if code != "" && code != outcome {
			c.outcomes[outcome+" "+code] += n
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.otherRetries = c.outcomes["retry"] - c.outcomes[retryNetwork] - c.outcomes[retryTimeout]
	h.checkOneSuccessEach(ctx, t, sender)
	h.checkAttemptNumbers(ctx, t, sender)
	health, err := sender.Outbox.Check(ctx, 100_000) // Health, and every row's invariants
	if err != nil {
		t.Fatal(err)
	}
	if health.Status != store.HealthOK {
		t.Errorf("outbox health %s (%s), want ok: %+v", health.Status, health.Code, health)
	}
	return c
}

// column reads the single-column query name.
func (h *harness) column(ctx context.Context, st *store.Store, name string) ([]string, error) {
	var out []string
	err := h.rows(ctx, st, name, func(scan func(...any) error) error {
		var v string
		if err := scan(&v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// rows runs the query name on st and calls each for every row.
func (h *harness) rows(ctx context.Context, st *store.Store, name string, each func(scan func(...any) error) error, args ...any) error {
	rows, err := st.DB().QueryContext(ctx, h.queries[name], args...)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// sample returns up to five of ids, sorted, for a readable error.
func sample(ids []string) string {
	ids = slices.Sorted(slices.Values(ids))
	if len(ids) > 5 {
		return strings.Join(ids[:5], " ") + " …"
	}
	return strings.Join(ids, " ")
}

// checkAttemptNumbers fails t unless the attempts log holds, for each
// delivery, one row per attempt its counter counts: attempt numbers
// 1..attempts, each once. A lease a killed worker held must be logged
// when a claim reclaims it, and a lease that expired under a live worker
// must be logged once, by the reclaim, not again by the worker's late
// settle.
func (h *harness) checkAttemptNumbers(ctx context.Context, t *testing.T, sender *store.Store) {
	t.Helper()
	var wrong []string
	if err := h.rows(ctx, sender, "attempt_numbers", func(scan func(...any) error) error {
		var id, endpoint string
		var attempts, logged, distinct, least, greatest int
		if err := scan(&id, &endpoint, &attempts, &logged, &distinct, &least, &greatest); err != nil {
			return err
		}
		if logged != attempts || distinct != attempts || attempts > 0 && (least != 1 || greatest != attempts) {
			wrong = append(wrong, fmt.Sprintf("%s/%s:attempts=%d,logged=%d,distinct=%d,numbers=%d..%d", h.label(endpoint), id, attempts, logged, distinct, least, greatest))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(wrong) > 0 {
		t.Errorf("attempts log: %d deliveries whose attempts are not logged once each %v", len(wrong), sample(wrong))
	}
}

// checkOneSuccessEach fails t unless the attempts log holds exactly one
// succeeded attempt of each delivery.
func (h *harness) checkOneSuccessEach(ctx context.Context, t *testing.T, sender *store.Store) {
	t.Helper()
	var notOnce []string
	if err := h.rows(ctx, sender, "succeeded_attempts", func(scan func(...any) error) error {
		var id string
		var n int
		if err := scan(&id, &n); err != nil {
			return err
		}
		if n != 1 {
			notOnce = append(notOnce, fmt.Sprintf("%s×%d", id, n))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(notOnce) > 0 {
		t.Errorf("attempts log: %d deliveries without exactly one succeeded attempt %v", len(notOnce), sample(notOnce))
	}
}

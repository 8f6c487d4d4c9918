package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/internal/testmain"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/cluster"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// clusterNotifications is how many notifications TestThreeWorkerProcesses
// delivers: 10,000 take about 20 s on two cores, but 50 s (90 s and more
// when other tests share the cores) under the race detector, so race runs
// deliver 3,000.
func clusterNotifications() int {
	if cluster.RaceEnabled {
		return 3_000
	}
	return 10_000
}

// TestHelperWorkerProcess is not a test of its own: it is the body of the
// worker processes TestThreeWorkerProcesses starts by running this test
// binary again. Without cluster.EnvWorker it returns at once. With it, it
// delivers the outbox named by its environment until its stdin closes or it
// gets SIGINT or SIGTERM, and exits 0.
func TestHelperWorkerProcess(t *testing.T) {
	spec, ok, err := cluster.SpecFromEnv()
	if !ok {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent closes stdin to stop this worker
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := cluster.RunWorker(ctx, spec, logger, func() { fmt.Println(cluster.ReadyLine) }); err != nil {
		t.Fatal(err)
	}
}

// TestThreeWorkerProcesses delivers one outbox with three worker processes
// to a terminal receiver on another database, and checks the guarantees:
// every notification delivered, applied exactly once by the receiver, no
// two owners ever holding the same delivery's lease at once, and every
// process doing its share.
func TestThreeWorkerProcesses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	senderURL := pgtest.URL(t)
	sender := openStore(t, senderURL)
	rcv := startReceiver(t, nil)

	n := clusterNotifications()
	notes := make([]terminalNote, n)
	for i := range notes {
		notes[i] = newTerminal(t, "cluster-event-"+strconv.Itoa(i))
	}

	owners := []string{"worker-a", "worker-b", "worker-c"}
	procs := make([]*workerProcess, len(owners))
	for i, owner := range owners {
		procs[i] = startWorkerProcess(t, cluster.WorkerSpec{
			DatabaseURL: senderURL, ReceiverURL: rcv.server.URL, Secret: rcv.secret, Owner: owner,
		})
	}
	for _, p := range procs {
		p.waitReady(t, time.Minute)
	}

	started := time.Now()
	enqueueTerminals(t, sender, rcv.server.URL+"/terminal", notes)
	enqueued := time.Since(started)
	waitAllSucceeded(t, sender, n, procs, waitBound(t, 5*time.Minute))
	delivered := time.Since(started)
	for _, p := range procs {
		p.stop(t)
	}
	t.Logf("%d notifications: enqueued in %v, all delivered after %v (%.0f/s)",
		n, enqueued.Round(time.Millisecond), delivered.Round(time.Millisecond), float64(n)/delivered.Seconds())

	// Every delivery succeeded, and nothing else happened to the outbox.
	h, err := sender.Outbox.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range courier.Statuses() {
		want := 0
		if st == courier.StatusSucceeded {
			want = n
		}
		if h.Counts[st] != want {
			t.Errorf("outbox holds %d %s deliveries, want %d", h.Counts[st], st, want)
		}
	}

	// The receiver applied each notification exactly once.
	effects := countBy(t, rcv.store.DB(), "SELECT notification_id, COUNT(*) FROM effects GROUP BY notification_id")
	missing, twice := 0, 0
	for _, note := range notes {
		switch c := effects[note.id]; {
		case c == 0:
			missing++
		case c > 1:
			twice++
		}
		delete(effects, note.id)
	}
	if missing > 0 || twice > 0 || len(effects) > 0 {
		t.Errorf("receiver effects: %d notifications never applied, %d applied more than once, %d unknown", missing, twice, len(effects))
	}

	// No two owners ever held a lease on the same delivery at the same time:
	// every attempt's window runs from its lease to the earlier of its
	// expiry and its end; the outbox holds the lease of a delivery still
	// leased.
	var overlaps int
	if err := sender.DB().GetContext(ctx, &overlaps, leaseOverlapsSQL); err != nil {
		t.Fatal(err)
	}
	if overlaps > 0 {
		t.Errorf("%d pairs of attempts by different owners overlap on the same delivery", overlaps)
	}

	// One successful attempt per delivery, and each process made some.
	var deliveries, badDeliveries, attempts int
	if err := sender.DB().QueryRowContext(ctx, `SELECT COUNT(*), COUNT(*) FILTER (WHERE succeeded <> 1), COALESCE(SUM(total), 0)
		FROM (SELECT delivery_id, COUNT(*) FILTER (WHERE outcome = 'succeeded') AS succeeded, COUNT(*) AS total
		      FROM courier_attempts GROUP BY delivery_id) AS per_delivery`).Scan(&deliveries, &badDeliveries, &attempts); err != nil {
		t.Fatal(err)
	}
	if deliveries != n || badDeliveries != 0 {
		t.Errorf("attempts log covers %d deliveries, %d without exactly one success; want %d, 0", deliveries, badDeliveries, n)
	}
	byOwner := countBy(t, sender.DB(), "SELECT owner, COUNT(*) FROM courier_attempts WHERE outcome = 'succeeded' GROUP BY owner")
	for _, owner := range owners {
		if byOwner[owner] == 0 {
			t.Errorf("owner %s delivered nothing (successes by owner: %v)", owner, byOwner)
		}
	}
	if len(byOwner) != len(owners) {
		t.Errorf("successes by owner %v, want exactly %v", byOwner, owners)
	}
	t.Logf("attempts: %d for %d deliveries; successes by owner: %v", attempts, deliveries, byOwner)
}

// countBy runs query, which returns (key, count) rows, into a map.
func countBy(t *testing.T, db *sqlx.DB, query string) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var key string
		var count int
		if err := rows.Scan(&key, &count); err != nil {
			t.Fatal(err)
		}
		counts[key] = count
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// leaseOverlapsSQL counts pairs of lease windows of one delivery held by
// different owners that overlap. A window is [leased_at, min(expiry, end)).
const leaseOverlapsSQL = `
WITH windows AS (
    SELECT delivery_id, owner, leased_at, LEAST(lease_expires_at, finished_at) AS ends
    FROM courier_attempts
    UNION ALL
    SELECT id, lease_owner, leased_at, lease_expires_at
    FROM courier_outbox WHERE status = 'leased'
)
SELECT COUNT(*) FROM windows a JOIN windows b
    ON a.delivery_id = b.delivery_id AND a.owner < b.owner
   AND a.leased_at < b.ends AND b.leased_at < a.ends`

// TestTwentyConcurrentDuplicates sends one notification twenty times at
// once to a terminal receiver on PostgreSQL: the application's function
// runs once, and every sender gets the same Ack, byte for byte.
func TestTwentyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	const senders = 20
	started := make(chan struct{})
	release := make(chan struct{})
	var first atomic.Bool
	// The first call holds its transaction, and so the Inbox row, until the
	// other nineteen requests are queued behind that row.
	gate := func(ctx context.Context) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		close(started)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rcv := startReceiver(t, gate)
	note := newTerminal(t, "duplicate-event")

	answers := make([]answer, senders)
	var returned atomic.Int32
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			<-begin
			answers[i] = rcv.post(note)
			returned.Add(1)
		})
	}
	close(begin)

	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	select {
	case <-started:
	case <-bound.C:
		close(release)
		wg.Wait()
		t.Fatalf("the application's function was never called; answers: %v", answers)
	}
	// Wait until the other requests are blocked on the Inbox row (or, if
	// the receiver is broken, have already been answered).
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for waiting := 0; waiting+int(returned.Load()) < senders-1; {
		if err := rcv.store.DB().GetContext(t.Context(), &waiting, `SELECT COUNT(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			close(release)
			wg.Wait()
			t.Fatal(err)
		}
		select {
		case <-tick.C:
		case <-bound.C:
			close(release)
			wg.Wait()
			t.Fatalf("only %d requests waiting on the Inbox row and %d answered", waiting, returned.Load())
		}
	}
	close(release)
	wg.Wait()

	profile, ok := ack.Builtin(ack.ProfileTerminal)
	if !ok {
		t.Fatal("no terminal profile")
	}
	// A 503 (the first delivery still in progress) says when to retry; the
	// retry gets the Ack.
	var retried int
	for i := range answers {
		for try := 0; answers[i].err == nil && answers[i].status == http.StatusServiceUnavailable && try < 5; try++ {
			if answers[i].retryAfter == "" {
				t.Errorf("sender %d: 503 without Retry-After", i)
			}
			retried++
			answers[i] = rcv.post(note)
		}
	}
	for i, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("sender %d: %v", i, a.err)
		case a.status != http.StatusOK:
			t.Errorf("sender %d: status %d: %s", i, a.status, a.body)
		case !bytes.Equal(a.body, answers[0].body):
			t.Errorf("sender %d: Ack differs from sender 0's:\n%s\n%s", i, a.body, answers[0].body)
		default:
			if err := profile.Verify(ack.Sent{ID: note.id, Payload: note.payload, Attempt: 1}, a.body); err != nil {
				t.Errorf("sender %d: the Ack does not verify: %v", i, err)
			}
		}
	}
	if c := rcv.calls.Load(); c != 1 {
		t.Errorf("the application's function ran %d times, want 1", c)
	}
	var effects int
	if err := rcv.store.DB().GetContext(t.Context(), &effects, "SELECT COUNT(*) FROM effects"); err != nil {
		t.Fatal(err)
	}
	if effects != 1 {
		t.Errorf("effects table holds %d rows, want 1", effects)
	}
	t.Logf("%d concurrent duplicates: 1 call, %d retries after 503", senders, retried)
}

// BenchmarkPickupLatency measures, with an idle worker, the time from the
// commit of an enqueue to the moment the worker's request reaches the
// receiver. PollInterval is a minute, so only a wake-up (pg_notify on
// PostgreSQL, the in-process commit hook on SQLite) can bring it that
// fast. The clock starts just before Commit is called.
func BenchmarkPickupLatency(b *testing.B) {
	b.Run("postgres", func(b *testing.B) {
		benchPickup(b, openStore(b, pgtest.URL(b)))
	})
	b.Run("sqlite", func(b *testing.B) {
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "outbox.db"), store.Config{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		benchPickup(b, s)
	})
}

func benchPickup(b *testing.B, s *store.Store) {
	type sighting struct {
		id string
		at time.Time
	}
	seen := make(chan sighting, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		id := r.Header.Get("webhook-id")
		body, _ := io.ReadAll(r.Body)
		select {
		case seen <- sighting{id, at}:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(ack.New(id, body).Marshal())
	}))
	b.Cleanup(srv.Close)
	key, err := signature.ParseStandardWebhooksKey("bench", signature.NewStandardWebhooksSecret())
	if err != nil {
		b.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		b.Fatal(err)
	}
	guard := couriertest.Guard(srv.URL)
	settled := make(chan client.Event, 1)
	w, err := client.NewWorker(client.Config{
		Store: s, Owner: "bench", Signer: signer, Transport: guard.Transport(),
		PollInterval: time.Minute, Hook: func(e client.Event) { settled <- e },
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const bound = 10 * time.Second // far below PollInterval: a lost wake-up fails
	var latencies []time.Duration
	for i := 0; b.Loop(); i++ {
		id := "pickup-" + strconv.Itoa(i)
		tx, err := s.DB().BeginTxx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: id, Endpoint: srv.URL + "/hook", Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`),
		}); err != nil {
			b.Fatal(err)
		}
		committing := time.Now()
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		select {
		case got := <-seen:
			if got.id != id {
				b.Fatalf("receiver saw %s, want %s", got.id, id)
			}
			latencies = append(latencies, got.at.Sub(committing))
		case <-time.After(bound):
			b.Fatalf("delivery %d not picked up within %v: the wake-up was lost", i, bound)
		}
		// Let the worker settle and go idle before the next enqueue.
		select {
		case e := <-settled:
			if e.Status != courier.StatusSucceeded {
				b.Fatalf("delivery %d settled as %s (%s)", i, e.Status, e.Code)
			}
		case <-time.After(bound):
			b.Fatalf("delivery %d not settled within %v", i, bound)
		}
	}
	slices.Sort(latencies)
	ms := func(q int) float64 {
		return float64(latencies[min(len(latencies)-1, len(latencies)*q/100)]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(50), "p50-ms")
	b.ReportMetric(ms(99), "p99-ms")
}

// BenchmarkClaimBacklog measures one Outbox.Claim of 10 rows on PostgreSQL
// with 1,000 and with 1,000,000 due rows. The target: the cost
// stays within 2x from the one to the other.
func BenchmarkClaimBacklog(b *testing.B) {
	for _, due := range []int{1_000, 1_000_000} {
		b.Run("due="+strconv.Itoa(due), func(b *testing.B) {
			ctx := context.Background()
			s := openStore(b, pgtest.URL(b))
			fillBacklog(b, s.DB(), due)
			// A released row goes back to pending at the tail of the due
			// rows, as a retry without backoff would.
			release := `UPDATE courier_outbox SET status = 'pending', attempts = attempts - 1, next_attempt_at = leased_at,
				lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL
				WHERE id = ANY($1)`
			claim := func() []int64 {
				claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "bench", Limit: 10, Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				ids := make([]int64, 0, len(claimed))
				for _, c := range claimed {
					ids = append(ids, c.DeliveryID)
				}
				return ids
			}
			releaseAll := func(ids []int64) {
				if len(ids) != 10 {
					b.Fatalf("claimed %d rows, want 10", len(ids))
				}
				if _, err := s.DB().ExecContext(ctx, release, ids); err != nil {
					b.Fatal(err)
				}
			}
			for range 50 { // warm caches and connections up
				releaseAll(claim())
			}
			for b.Loop() {
				ids := claim()
				b.StopTimer()
				releaseAll(ids)
				b.StartTimer()
			}
		})
	}
}

// fillBacklog inserts n due deliveries with one statement, then runs
// VACUUM ANALYZE: the statistics for the planner, and nothing left for
// autovacuum to do while the benchmark runs.
func fillBacklog(b *testing.B, db *sqlx.DB, n int) {
	b.Helper()
	now := time.Now().Add(-time.Second).UnixMicro()
	deadline := time.Now().Add(72 * time.Hour).UnixMicro()
	if _, err := db.Exec(`
		INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_sha256, profile, key_id, status,
			priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at)
		SELECT 'backlog-' || i, 'http://127.0.0.1:9/hook', p.payload, encode(sha256(p.payload), 'hex'), 'courier', '', 'pending',
			0, 0, 8, $1::bigint - ($2::int - i), $3::bigint, $1::bigint - ($2::int - i), $1::bigint - ($2::int - i)
		FROM generate_series(1, $2::int) AS i,
			LATERAL (SELECT convert_to('{"n":' || i || '}', 'UTF8') AS payload) AS p`, now, n, deadline); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec("VACUUM ANALYZE courier_outbox"); err != nil {
		b.Fatal(err)
	}
}

// openStore opens and migrates the PostgreSQL database at url.
func openStore(tb testing.TB, url string) *store.Store {
	tb.Helper()
	db, err := sqlx.Open(postgres.DriverName, url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	if err := store.Migrate(context.Background(), db); err != nil {
		tb.Fatal(err)
	}
	s, err := store.Open(context.Background(), db, store.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// receiver is a terminal receiver on its own PostgreSQL database behind a
// real HTTP server. Its application function records an effect row in the
// receiver's transaction.
type receiver struct {
	store  *store.Store
	server *httptest.Server
	secret string
	signer signature.Signer
	calls  atomic.Int64
}

// startReceiver starts a receiver. gate, when not nil, runs in the
// application function after the effect is written; its error fails the
// request.
func startReceiver(t *testing.T, gate func(context.Context) error) *receiver {
	t.Helper()
	s := openStore(t, pgtest.URL(t))
	if _, err := s.DB().Exec("CREATE TABLE effects (notification_id TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	r := &receiver{store: s, secret: signature.NewStandardWebhooksSecret()}
	key, err := signature.ParseStandardWebhooksKey("cluster", r.secret)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "cluster-sender", Keys: []signature.StandardWebhooksKey{key},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.signer, err = signature.NewStandardWebhooksSigner(key); err != nil {
		t.Fatal(err)
	}
	h, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier}, func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
		r.calls.Add(1)
		if _, err := tx.ExecContext(ctx, "INSERT INTO effects (notification_id) VALUES ($1)", n.NotificationID); err != nil {
			return err
		}
		if gate != nil {
			return gate(ctx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r.server = httptest.NewServer(h)
	t.Cleanup(r.server.Close)
	return r
}

// answer is what one POST got back.
type answer struct {
	status     int
	retryAfter string
	body       []byte
	err        error
}

// post sends note, signed afresh, to the receiver.
func (r *receiver) post(note terminalNote) answer {
	req, err := http.NewRequest(http.MethodPost, r.server.URL+"/terminal", bytes.NewReader(note.payload))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if err := r.signer.Sign(req, signature.Message{ID: note.id, Body: note.payload, Time: time.Now()}); err != nil {
		return answer{err: err}
	}
	resp, err := r.server.Client().Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: body, err: err}
}

// terminalNote is a terminal notification and its payload bytes.
type terminalNote struct {
	id      string
	payload []byte
}

func newTerminal(tb testing.TB, event string) terminalNote {
	tb.Helper()
	lifecycle := ack.Digest([]byte("lifecycle-" + event))
	n, err := ack.NewTerminal(ack.Terminal{
		EventID: event, SiteID: "site-1", PlanID: "plan-1", WebsiteVersion: "v1",
		SourceSequence: "1", JobCount: "1", ChangeSHA256: ack.Digest([]byte("change-" + event)),
		LifecycleBindingSHA256: ack.Digest([]byte("binding")), TerminalStatus: "published", LifecycleSHA256: &lifecycle,
	})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := n.Payload()
	if err != nil {
		tb.Fatal(err)
	}
	return terminalNote{id: n.NotificationID, payload: p}
}

// enqueueTerminals enqueues notes to endpoint in transactions of a few
// hundred, as applications committing batches of business writes would:
// a few such transactions at a time.
func enqueueTerminals(t *testing.T, s *store.Store, endpoint string, notes []terminalNote) {
	t.Helper()
	const (
		batch   = 250
		writers = 4
	)
	ctx := t.Context()
	batches := make(chan []terminalNote)
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for b := range batches {
				if err := enqueueBatch(ctx, s, endpoint, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
feed:
	for start := 0; start < len(notes); start += batch {
		select {
		case batches <- notes[start:min(start+batch, len(notes))]:
		case err := <-errs:
			errs <- err
			break feed
		}
	}
	close(batches)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// enqueueBatch enqueues notes in one transaction.
func enqueueBatch(ctx context.Context, s *store.Store, endpoint string, notes []terminalNote) error {
	ps := make([]store.EnqueueParams, 0, len(notes))
	for _, note := range notes {
		ps = append(ps, store.EnqueueParams{
			NotificationID: note.id, Endpoint: endpoint, Payload: note.payload, Profile: ack.ProfileTerminal,
		})
	}
	tx, err := s.DB().BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	if _, err := s.Outbox.EnqueueMany(ctx, tx, ps); err != nil {
		return err
	}
	return tx.Commit()
}

// waitBound returns d, or less when the test's deadline comes sooner,
// leaving time to report and clean up.
func waitBound(t *testing.T, d time.Duration) time.Duration {
	if deadline, ok := t.Deadline(); ok {
		d = min(d, time.Until(deadline)-30*time.Second)
	}
	return max(d, time.Second)
}

// waitAllSucceeded polls the outbox's Health until n deliveries succeeded,
// failing at once if one fails or a worker process exits.
func waitAllSucceeded(t *testing.T, s *store.Store, n int, procs []*workerProcess, bound time.Duration) {
	t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		h, err := s.Outbox.Health(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if h.Counts[courier.StatusSucceeded] == n {
			return
		}
		if bad := h.Counts[courier.StatusFailed] + h.Counts[courier.StatusQuarantined] + h.Counts[courier.StatusSuppressed]; bad > 0 {
			t.Fatalf("%d deliveries ended without success: %v", bad, h.Counts)
		}
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("worker %s exited early: %v\n%s", p.owner, p.err, p.stderr.String())
			}
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("not all delivered after %v: %v", bound, h.Counts)
		}
	}
}

// workerProcess is a worker running in a process of its own: this test
// binary run again as TestHelperWorkerProcess.
type workerProcess struct {
	owner     string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	stdout    *readyWriter
	stderr    bytes.Buffer // written by exec until done is closed
	done      chan struct{}
	err       error // cmd.Wait's, valid once done is closed
	closeOnce sync.Once
}

func startWorkerProcess(t *testing.T, spec cluster.WorkerSpec) *workerProcess {
	t.Helper()
	p := &workerProcess{owner: spec.Owner, stdout: &readyWriter{ready: make(chan struct{})}, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$", "-test.count=1")
	p.cmd.Env = append(os.Environ(), spec.Environ()...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// waitReady waits until the worker is built and about to run.
func (p *workerProcess) waitReady(t *testing.T, bound time.Duration) {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case <-p.stdout.ready:
	case <-p.done:
		t.Fatalf("worker %s exited before it was ready: %v\n%s", p.owner, p.err, p.stderr.String())
	case <-timer.C:
		t.Fatalf("worker %s not ready after %v", p.owner, bound)
	}
}

func (p *workerProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop closes the worker's stdin and waits for it to exit 0, killing it
// if it takes longer than a minute. It may be called more than once.
func (p *workerProcess) stop(t *testing.T) {
	t.Helper()
	first := false
	p.closeOnce.Do(func() {
		first = true
		p.stdin.Close()
	})
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("worker %s did not stop within a minute of its stdin closing", p.owner)
	}
	if !first {
		return
	}
	if p.err != nil {
		t.Errorf("worker %s: %v\n%s", p.owner, p.err, p.stderr.String())
	} else if p.stderr.Len() > 0 {
		t.Logf("worker %s logged:\n%s", p.owner, tail(p.stderr.Bytes(), 4<<10))
	}
}

// tail returns the last n bytes of b at most.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// readyWriter collects a worker's stdout and closes ready when the worker
// has printed cluster.ReadyLine.
type readyWriter struct {
	mu    sync.Mutex
	buf   []byte
	ready chan struct{}
	seen  bool
}

func (w *readyWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if !w.seen && bytes.Contains(w.buf, []byte(cluster.ReadyLine+"\n")) {
		w.seen = true
		close(w.ready)
	}
	return len(b), nil
}

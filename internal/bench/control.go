package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Delivery control (figures 8a-8c), run only when -run names them:
//
//	fairshare  8a  a healthy endpoint's 1,000 deliveries beside a 5 s endpoint with 10,000 due, vs alone
//	rate       8b  an endpoint limited to 50 requests/s, measured at the receiver over 20 s
//	keyclaim   8c  claim cost at 1,000 vs 1,000,000 due rows over 10,000 ordering keys
var controlFigures = []string{"fairshare", "rate", "keyclaim"}

const (
	fairSlowN, fairFastN = 10_000, 1_000
	fairSlowAnswer       = 5 * time.Second
	rateLimit            = 50.0 // requests per second
	rateWindow           = 20 * time.Second
	rateWorkersPostgres  = 3 // worker processes sharing the database
	orderingKeys         = 10_000
)

// fillKeyedSQL inserts n due rows over orderingKeys keys (row x has key
// x mod orderingKeys): the first row of each key heads it, the others
// wait for it (hold 'key'), as Enqueue with an ordering key leaves them.
// Parameters as fillSQL's; SQLite's payloads as fillSQL's.
var fillKeyedSQL = map[string]string{
	"sqlite": `WITH RECURSIVE seq(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < ?1)
INSERT INTO courier_outbox (notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at, ordering_key, hold)
SELECT ?2 || x, ?3, '', ?5, 'courier', '', 'pending', 0, 0, 8, ?6, ?7, ?8 + x, ?9,
    'key-' || (x % 10000), CASE WHEN x <= 10000 THEN NULL ELSE 'key' END FROM seq`,
	"postgres": `INSERT INTO courier_outbox (notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at, ordering_key, hold)
SELECT $2::text || g, $3, $4, '', $5, 'courier', '', 'pending', 0, 0, 8, $6, $7, $8::bigint + g, $9,
    'key-' || (g % 10000), CASE WHEN g <= 10000 THEN NULL ELSE 'key' END
FROM generate_series(1, $1::int) AS g`,
}

// fillKeysSQL records each key's head, as ordering_key_join would.
const fillKeysSQL = `INSERT INTO courier_ordering_keys (endpoint, ordering_key, head_id, blocked_at, updated_at)
SELECT endpoint, ordering_key, MIN(id), NULL, MIN(updated_at) FROM courier_outbox WHERE ordering_key IS NOT NULL
GROUP BY endpoint, ordering_key`

// fillKeyed adds n keyed due deliveries (see fillKeyedSQL) to endpoint.
func (d *database) fillKeyed(ctx context.Context, prefix string, n int, endpoint string) (time.Duration, error) {
	start := time.Now()
	sum := sha256.Sum256(benchPayload)
	now := time.Now().UnixMicro()
	if _, err := d.bulk.ExecContext(ctx, fillKeyedSQL[d.engine], n, prefix, endpoint, benchPayload, hex.EncodeToString(sum[:]),
		now-time.Second.Microseconds(), now+retryHorizon.Microseconds(), now-int64(n), now); err != nil {
		return 0, fmt.Errorf("fill %s with %d keyed rows: %w", d.label, n, err)
	}
	if err := d.fillPayloads(ctx, benchPayload); err != nil {
		return 0, err
	}
	if _, err := d.bulk.ExecContext(ctx, fillKeysSQL); err != nil {
		return 0, fmt.Errorf("fill %s keys: %w", d.label, err)
	}
	if err := d.analyze(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// benchKeyClaim is figure 8c: figure 5's claim, from outboxes whose due
// rows are spread over orderingKeys ordering keys. Only each key's head
// is in the due index, so a claim's cost follows the heads (at most
// orderingKeys), not the rows waiting behind them.
func benchKeyClaim(ctx context.Context, e *engine, z sizes, bare *httptest.Server) ([]row, error) {
	sizes := []int{1_000, z.claimSizes[len(z.claimSizes)-1]}
	outboxes := make([]*database, len(sizes))
	for i, n := range sizes {
		d, err := e.open(ctx, "keyclaim-"+count(n))
		if err != nil {
			return nil, err
		}
		took, err := d.fillKeyed(ctx, "k-", n, bare.URL)
		if err != nil {
			return nil, err
		}
		progress("  filled %d keyed due rows in %s", n, took.Round(time.Millisecond))
		outboxes[i] = d
	}
	measured := make([][]time.Duration, len(sizes))
	for r := -1; r < z.claimRounds; r++ {
		for k := range outboxes {
			i := (k + max(r, 0)) % len(outboxes)
			d := outboxes[i]
			for range claimsPerRound {
				start := time.Now()
				c, err := protocol.For(d.s).Claim(ctx, protocol.ClaimParams{Owner: "bench-claim", Limit: claimLimit, Lease: time.Minute})
				took := time.Since(start)
				if err != nil {
					return nil, err
				}
				if len(c) != claimLimit {
					return nil, fmt.Errorf("claim from %s returned %d rows, want %d", d.label, len(c), claimLimit)
				}
				if r >= 0 {
					measured[i] = append(measured[i], took)
				}
			}
			if err := d.releaseLeases(ctx); err != nil {
				return nil, err
			}
		}
		if e.name == "postgres" && (r+1)%vacuumEvery == 0 {
			for _, d := range outboxes {
				if err := d.analyze(ctx); err != nil {
					return nil, err
				}
			}
		}
	}
	small, large := median(measured[0]), median(measured[1])
	rw := costRow("8c", fmt.Sprintf("claim %d rows over %s ordering keys: %s due vs %s due", claimLimit, count(orderingKeys), count(sizes[1]), count(sizes[0])),
		e.name, large, small, 2)
	rw.detail = fmt.Sprintf("claim p50/p90: %s due %s/%s, %s due %s/%s", count(sizes[0]), fmtDuration(small), fmtDuration(percentile(measured[0], 90)),
		count(sizes[1]), fmtDuration(large), fmtDuration(percentile(measured[1], 90)))
	return []row{rw}, nil
}

// benchFairShare is figure 8a: how long a worker takes to deliver
// fairFastN deliveries to a healthy endpoint while another endpoint, with
// fairSlowN deliveries due ahead of them, answers each after
// fairSlowAnswer; against the same deliveries alone, in the same run. The
// worker has the default EndpointConcurrency (half its slots), so the slow
// endpoint holds half and the healthy one goes through the other half.
func benchFairShare(ctx context.Context, e *engine, o options, signer signature.Signer) ([]row, error) {
	stopSlow := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/slow") {
			select {
			case <-time.After(fairSlowAnswer):
			case <-stopSlow:
			case <-r.Context().Done():
				return
			}
		}
		benchkit.BareAck(w, r)
	}))
	defer srv.Close()
	defer close(stopSlow)
	fast, slow := srv.URL+"/fast", srv.URL+"/slow"

	run := func(label string, withSlow bool) (time.Duration, error) {
		d, err := e.open(ctx, "fairshare-"+label)
		if err != nil {
			return 0, err
		}
		if withSlow {
			if _, err := d.fill(ctx, "s-", fairSlowN, slow, benchPayload); err != nil {
				return 0, err
			}
		}
		if _, err := d.fill(ctx, "f-", fairFastN, fast, benchPayload); err != nil {
			return 0, err
		}
		return runUntil(ctx, workerConfig(d.s, signer, srv, o.concurrency), fairFastN, func(ev client.Event) bool {
			return strings.HasSuffix(ev.Endpoint, "/fast")
		})
	}
	var alone, beside []time.Duration
	for r := range 3 {
		var a, b time.Duration
		err := alternate(r, func() (err error) { a, err = run(fmt.Sprintf("alone-%d", r), false); return err },
			func() (err error) { b, err = run(fmt.Sprintf("beside-%d", r), true); return err })
		if err != nil {
			return nil, err
		}
		alone, beside = append(alone, a), append(beside, b)
		progress("  round %d: %d fast deliveries alone %s, beside %s slow (%s each) %s", r+1, fairFastN,
			a.Round(time.Millisecond), count(fairSlowN), fairSlowAnswer, b.Round(time.Millisecond))
	}
	ratio := median(pairedRatios(beside, alone))
	rw := costRowRatio("8a", fmt.Sprintf("fair share: %s deliveries to a healthy endpoint beside a %s endpoint with %s due, vs alone (c=%d)",
		count(fairFastN), fairSlowAnswer, count(fairSlowN), o.concurrency), e.name, median(beside)/fairFastN, median(alone)/fairFastN, ratio, 1.5)
	return []row{rw}, nil
}

// runUntil runs a worker with cfg until n settled attempts for which
// counts says yes succeeded, and returns how long that took from Run's
// start. Any of them that did not succeed (or lost its lease, or was not
// recorded) fails the run.
func runUntil(ctx context.Context, cfg client.Config, n int, counts func(client.Event) bool) (time.Duration, error) {
	var done atomic.Int64
	reached := make(chan struct{})
	var failed atomic.Value
	cfg.Hook = func(ev client.Event) {
		if !counts(ev) {
			return
		}
		if ev.Outcome != store.AttemptSucceeded || ev.LeaseLost || ev.Unrecorded {
			failed.CompareAndSwap(nil, fmt.Sprintf("%s %s", ev.Outcome, ev.Code))
			return
		}
		if done.Add(1) == int64(n) {
			close(reached)
		}
	}
	w, err := client.NewWorker(cfg)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	start := time.Now()
	go func() { ran <- w.Run(runCtx) }()
	var elapsed time.Duration
	select {
	case <-reached:
		elapsed = time.Since(start)
	case <-ctx.Done():
	}
	stop()
	if err := <-ran; err != nil {
		return 0, err
	}
	if f := failed.Load(); f != nil {
		return 0, fmt.Errorf("an attempt did not succeed: %v", f)
	}
	if elapsed == 0 {
		return 0, fmt.Errorf("%d of %d deliveries in %s", done.Load(), n, runLimit)
	}
	return elapsed, nil
}

// benchRate is figure 8b: an endpoint limited to rateLimit requests per
// second (burst: one second's worth), with more due than it can take in
// rateWindow, delivered by one worker on SQLite and by rateWorkersPostgres
// workers, each on a Store of its own, sharing the PostgreSQL database.
// The rate is counted at the receiver over rateWindow, from the end of the
// first second (the bucket starts full: its burst is not the rate).
func benchRate(ctx context.Context, e *engine, o options, signer signature.Signer) ([]row, error) {
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		benchkit.BareAck(w, r)
	}))
	defer srv.Close()
	d, err := e.open(ctx, "rate")
	if err != nil {
		return nil, err
	}
	if err := d.s.Endpoints.SetLimits(ctx, srv.URL, store.Limits{Rate: rateLimit}); err != nil {
		return nil, err
	}
	total := int(rateLimit*(rateWindow+2*time.Second).Seconds()) + 500
	if _, err := d.fill(ctx, "r-", total, srv.URL, benchPayload); err != nil {
		return nil, err
	}
	workers := 1
	if e.name == "postgres" {
		workers = rateWorkersPostgres
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, workers)
	start := time.Now()
	for i := range workers {
		s := d.s
		if i > 0 { // another process: a Store of its own on the database
			if s, err = store.Open(ctx, d.db, store.Config{}); err != nil {
				stop()
				return nil, err
			}
		}
		cfg := workerConfig(s, signer, srv, o.concurrency)
		cfg.Owner = fmt.Sprintf("bench-rate-%d", i)
		w, err := client.NewWorker(cfg)
		if err != nil {
			stop()
			return nil, err
		}
		go func() { ran <- w.Run(runCtx) }()
	}
	select {
	case <-time.After(time.Second + rateWindow + 100*time.Millisecond):
	case <-ctx.Done():
	}
	stop()
	for range workers {
		if err := <-ran; err != nil {
			return nil, err
		}
	}
	mu.Lock()
	from, to := start.Add(time.Second), start.Add(time.Second+rateWindow)
	n := 0
	for _, at := range arrivals {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	burst := 0
	for _, at := range arrivals {
		if at.Before(from) {
			burst++
		}
	}
	mu.Unlock()
	measured := float64(n) / rateWindow.Seconds()
	dev := measured/rateLimit - 1
	rw := row{
		id: "8b", name: fmt.Sprintf("endpoint rate limit %.0f/s over %s (%d worker(s), c=%d each)", rateLimit, rateWindow, workers, o.concurrency),
		engine: e.name, courier: fmt.Sprintf("%.1f /s", measured), baseline: fmt.Sprintf("%.0f /s", rateLimit),
		ratio: fmt.Sprintf("%+.1f%%", 100*dev), target: "within ±10%", pass: dev >= -0.10 && dev <= 0.10,
		detail: fmt.Sprintf("%d requests in the first second (the full bucket), %d in the %s after", burst, n, rateWindow),
	}
	return []row{rw}, nil
}

// isControlFigure reports whether f is one of the delivery-control
// figures.
func isControlFigure(f string) bool { return slices.Contains(controlFigures, f) }

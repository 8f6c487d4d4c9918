package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/benchkit"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// idleGap is the pause between two latency samples, so that each
// enqueue finds the worker idle, waiting for a wake-up.
const idleGap = 5 * time.Millisecond

// e2eReceiver is the courier receiver of figure 4: it tells waiters when
// the application's function runs for their notification.
type e2eReceiver struct {
	mu      sync.Mutex
	waiters map[string]chan time.Time
}

func (r *e2eReceiver) handle(_ context.Context, _ *sqlx.Tx, n note) error {
	r.mu.Lock()
	ch := r.waiters[n.NotificationID]
	r.mu.Unlock()
	if ch != nil {
		select {
		case ch <- time.Now():
		default:
		}
	}
	return nil
}

func (r *e2eReceiver) wait(id string) chan time.Time {
	ch := make(chan time.Time, 1)
	r.mu.Lock()
	r.waiters[id] = ch
	r.mu.Unlock()
	return ch
}

// benchE2E is figure 4, on SQLite only: an outbox of m notes enqueued
// through Outbox.Enqueue, delivered by the worker over loopback HTTP to
// handler.NewReceiver on an Inbox in a second SQLite file, against the
// bare POST loop of the same bodies to the bare receiver at the same
// concurrency; then the latency from an enqueue's commit to the receiver's
// function, one notification at a time, with the worker idle (its poll
// interval an hour, so only the in-process wake-up starts each delivery).
func benchE2E(ctx context.Context, e *engine, z sizes, o options, bare *httptest.Server, signer signature.Signer, verifier signature.Verifier) ([]row, error) {
	sender, err := e.open(ctx, "e2e-outbox")
	if err != nil {
		return nil, err
	}
	inbox, err := e.open(ctx, "e2e-inbox")
	if err != nil {
		return nil, err
	}
	app := &e2eReceiver{waiters: make(map[string]chan time.Time)}
	rc, err := handler.NewReceiver(handler.ReceiverConfig{Store: inbox.s, Verifier: verifier}, app.handle)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	var courier, baseline runs
	for r := range z.e2eRounds {
		ns := ids(fmt.Sprintf("e%d-", r), z.e2eM)
		if err := enqueueNotes(ctx, sender, srv.URL, ns); err != nil {
			return nil, err
		}
		reqs := bareRequests(ns, func(i int) []byte { return benchkit.Payload(ns[i]) })
		bareRun := func() error {
			return baseline.measure(len(reqs), func() (time.Duration, error) { return postLoop(ctx, bare.URL, reqs, o.concurrency) })
		}
		workRun := func() error {
			return courier.measure(z.e2eM, func() (time.Duration, error) {
				return workerRun(ctx, workerConfig(sender.s, signer, srv, o.concurrency), z.e2eM)
			})
		}
		if err := alternate(r, bareRun, workRun); err != nil {
			return nil, fmt.Errorf("e2e round %d: %w", r+1, err)
		}
		progress("  round %d: end to end %.0f/s, bare loop %.0f/s", r+1, courier.last(), baseline.last())
	}
	tput := throughputRow("4a", fmt.Sprintf("end to end outbox->HTTP->inbox vs bare POST loop (c=%d, %d)", o.concurrency, z.e2eM),
		e.name, courier, baseline, 0.25)
	tput.detail = cpuDetail(courier, baseline)
	rows := []row{tput}

	lat, err := e2eLatency(ctx, sender, srv, app, signer, o, z.latencySamples)
	if err != nil {
		return nil, err
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	rows = append(rows, row{
		id: "4b", name: fmt.Sprintf("enqueue commit -> handler latency, idle worker (p50; %d samples)", len(lat)), engine: e.name,
		courier: fmtDuration(p50), baseline: "-", ratio: "-", target: "p50 < 20 ms", pass: p50 < 20*time.Millisecond,
		detail: fmt.Sprintf("latency p50 %s, p90 %s, p99 %s, max %s", fmtDuration(p50), fmtDuration(percentile(lat, 90)),
			fmtDuration(p99), fmtDuration(percentile(lat, 100))),
	})
	rows = append(rows, row{
		id: "4b", name: "enqueue commit -> handler latency, idle worker (p99)", engine: e.name,
		courier: fmtDuration(p99), baseline: "-", ratio: "-", target: "-", info: true,
	})
	return rows, nil
}

// enqueueNotes enqueues a note per id, for endpoint, through the Outbox,
// a thousand per transaction.
func enqueueNotes(ctx context.Context, d *database, endpoint string, ns []string) error {
	for start := 0; start < len(ns); start += 1000 {
		tx, err := d.db.BeginTxx(ctx, nil)
		if err != nil {
			return err
		}
		for _, id := range ns[start:min(len(ns), start+1000)] {
			if _, err := d.s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: endpoint, Payload: benchkit.Payload(id)}); err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// e2eLatency enqueues samples notes one at a time and measures, for each,
// the time from just before its transaction commits to the receiver's
// function running, waiting for the delivery to settle before the next.
func e2eLatency(ctx context.Context, d *database, srv *httptest.Server, app *e2eReceiver, signer signature.Signer, o options, samples int) ([]time.Duration, error) {
	settled := make(chan client.Event, 1)
	cfg := workerConfig(d.s, signer, srv, o.concurrency)
	cfg.PollInterval = time.Hour
	cfg.Hook = func(ev client.Event) { settled <- ev }
	w, err := client.NewWorker(cfg)
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	defer func() { stop(); <-ran }()

	out := make([]time.Duration, 0, samples)
	for i := range samples + 1 { // the first warms the connection and is not counted
		time.Sleep(idleGap)
		id := "lat-" + strconv.Itoa(i)
		got := app.wait(id)
		tx, err := d.db.BeginTxx(ctx, nil)
		if err != nil {
			return nil, err
		}
		if _, err := d.s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: srv.URL, Payload: benchkit.Payload(id)}); err != nil {
			tx.Rollback()
			return nil, err
		}
		start := time.Now()
		if err := tx.Commit(); err != nil {
			return nil, err
		}
		timeout := time.After(30 * time.Second)
		select {
		case at := <-got:
			if i > 0 {
				out = append(out, at.Sub(start))
			}
		case <-timeout:
			return nil, fmt.Errorf("latency sample %d: the receiver did not see the notification in 30 s", i)
		}
		select {
		case ev := <-settled:
			if ev.Outcome != store.AttemptSucceeded || ev.Unrecorded {
				return nil, fmt.Errorf("latency sample %d: %s %s", i, ev.Outcome, string(ev.Code))
			}
		case <-timeout:
			return nil, fmt.Errorf("latency sample %d: not settled in 30 s", i)
		}
	}
	return out, nil
}

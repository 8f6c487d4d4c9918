package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/courier-go/courier/internal/benchkit"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/rivermigrate"
)

// riverConfig is what River's side needs besides its database.
type riverConfig struct {
	target        string // the receiver's URL
	concurrency   int    // the queue's MaxWorkers
	fetchCooldown time.Duration
}

// deliveryArgs is River's job: what courier's outbox row holds (the
// endpoint, the notification id and the payload), as River stores job
// arguments, in JSON.
type deliveryArgs struct {
	Endpoint       string          `json:"endpoint"`
	NotificationID string          `json:"notification_id"`
	Payload        json.RawMessage `json:"payload"`
}

// Kind implements river.JobArgs.
func (deliveryArgs) Kind() string { return "delivery" }

// deliveryWorker works a deliveryArgs job with one POST of the payload to
// the endpoint, the notification id in webhook-id, as a River user
// delivering webhooks would; any answer but 200 fails the job. It ignores
// the body of the answer.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	hc *http.Client
}

// Work implements river.Worker.
func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	return benchkit.Post(ctx, w.hc, job.Args.Endpoint, benchkit.Request{ID: job.Args.NotificationID, Body: job.Args.Payload})
}

// riverDB is the database handle of River's side, whatever its
// transaction type: *sql.Tx for riversqlite, pgx.Tx for riverpgxv5.
type riverDB[TTx any] struct {
	begin    func(context.Context) (TTx, error)
	commit   func(context.Context, TTx) error
	rollback func(context.Context, TTx) error
	// count runs a query returning one integer.
	count func(ctx context.Context, query string) (int, error)
	// analyze refreshes the planner's statistics before delivery; nil
	// for none.
	analyze func(context.Context) error
	close   func() error
}

// riverSide is River on one database: InsertTx in the application's
// transaction, and a Client working the queue.
type riverSide[TTx any] struct {
	client *river.Client[TTx]
	db     riverDB[TTx]
	hc     *http.Client
	target string
}

// newRiverSide migrates River's tables with rivermigrate and makes a
// client with one queue of c.concurrency workers running deliveryWorker.
// Everything else is River's default, but FetchCooldown, which is
// c.fetchCooldown, and the logger, which writes warnings and errors to
// standard error (River's default writes to standard output).
func newRiverSide[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], c riverConfig, db riverDB[TTx]) (*riverSide[TTx], error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	hc := httpClient(c.concurrency)
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &deliveryWorker{hc: hc}); err != nil {
		return nil, err
	}
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown: c.fetchCooldown,
		Logger:        logger,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.concurrency}},
		Workers:       workers,
	})
	if err != nil {
		return nil, err
	}
	return &riverSide[TTx]{client: client, db: db, hc: hc, target: c.target}, nil
}

// enqueue runs one transaction per notification: BEGIN, InsertTx, COMMIT.
func (r *riverSide[TTx]) enqueue(ctx context.Context, ns []benchkit.Request) (time.Duration, error) {
	return timedEach(ctx, "river enqueue", ns, func(ctx context.Context, n benchkit.Request) error {
		tx, err := r.db.begin(ctx)
		if err != nil {
			return err
		}
		args := deliveryArgs{Endpoint: r.target, NotificationID: n.ID, Payload: n.Body}
		if _, err := r.client.InsertTx(ctx, tx, args, nil); err != nil {
			_ = r.db.rollback(ctx, tx)
			return err
		}
		return r.db.commit(ctx, tx)
	})
}

// deliver starts the client and waits for n jobs to complete, counting
// River's job_completed events (the subscription's buffer holds them all,
// so none is dropped). The first job that does not complete ends the run
// with its error.
func (r *riverSide[TTx]) deliver(ctx context.Context, n int) (time.Duration, error) {
	if r.db.analyze != nil {
		if err := r.db.analyze(ctx); err != nil {
			return 0, fmt.Errorf("river: analyze: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, runLimit)
	defer cancel()
	events, unsubscribe := r.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 64,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed,
			river.EventKindJobCancelled, river.EventKindJobSnoozed},
	})
	defer unsubscribe()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	start := time.Now()
	if err := r.client.Start(runCtx); err != nil {
		return 0, fmt.Errorf("river: start: %w", err)
	}
	var elapsed time.Duration
	var failure error
	completed := 0
	for elapsed == 0 && failure == nil {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				failure = fmt.Errorf("river: job %d: %s after attempt %d: %w", ev.Job.ID, ev.Kind, ev.Job.Attempt, lastError(ev))
			} else if completed++; completed == n {
				elapsed = time.Since(start)
			}
		case <-ctx.Done():
			failure = fmt.Errorf("river: %d of %d jobs completed in %s: %w", completed, n, runLimit, errIncomplete)
		}
	}
	stopCtx, cancelStop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancelStop()
	if err := r.client.Stop(stopCtx); err != nil {
		failure = errors.Join(failure, fmt.Errorf("river: stop: %w", err))
	}
	if failure != nil {
		return 0, failure
	}
	return elapsed, nil
}

// lastError is the error of a job's latest attempt, if it has one.
func lastError(ev *river.Event) error {
	if k := len(ev.Job.Errors); k > 0 {
		return errors.New(ev.Job.Errors[k-1].Error)
	}
	return errors.New("no error recorded")
}

// verify reads river_job: n jobs, every one completed, after one attempt
// each.
func (r *riverSide[TTx]) verify(ctx context.Context, n int) error {
	total, err := r.db.count(ctx, "SELECT count(*) FROM river_job")
	if err != nil {
		return fmt.Errorf("river: count jobs: %w", err)
	}
	once, err := r.db.count(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed' AND attempt = 1")
	if err != nil {
		return fmt.Errorf("river: count completed jobs: %w", err)
	}
	if total != n || once != n {
		return fmt.Errorf("river: river_job holds %d jobs, %d completed after one attempt, want %d and %d", total, once, n, n)
	}
	return nil
}

// close releases the HTTP connections and the database.
func (r *riverSide[TTx]) close() error {
	r.hc.CloseIdleConnections()
	return r.db.close()
}

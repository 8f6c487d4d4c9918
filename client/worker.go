package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Defaults of Config.
const (
	DefaultConcurrency  = 16
	DefaultLease        = time.Minute
	DefaultTimeout      = 15 * time.Second
	DefaultPollInterval = time.Second
	// UserAgent is sent with every attempt.
	UserAgent = "courier/1"
)

// Config configures a Worker.
type Config struct {
	// Store is the outbox to deliver. Required.
	Store *store.Store
	// Owner names this worker in leases and the attempts log. Defaults to
	// host name, process id and a random suffix.
	Owner string
	// Concurrency is how many deliveries are in flight at once. Defaults to
	// DefaultConcurrency. On PostgreSQL the store's pool should hold at
	// least this many connections plus two (see store.Open).
	Concurrency int
	// BatchSize is the most deliveries one claim takes. Defaults to
	// Concurrency.
	BatchSize int
	// Lease is how long a claimed delivery is held. It must outlast
	// Timeout, so no attempt is still running when its lease can be
	// reclaimed. Defaults to DefaultLease.
	Lease time.Duration
	// Timeout bounds one attempt: connecting, sending and reading the Ack.
	// Defaults to DefaultTimeout.
	Timeout time.Duration
	// PollInterval is how often the worker looks for due deliveries when
	// no wake-up comes. Defaults to DefaultPollInterval.
	PollInterval time.Duration
	// Signer signs every attempt, unless SignerFor is set. One of the two
	// is required: courier never sends unsigned notifications.
	Signer signature.Signer
	// SignerFor returns the signer for a delivery's KeyID (see
	// store.EnqueueParams), for senders with a key per endpoint. An error
	// retries the delivery with code signing_failed.
	SignerFor func(keyID string) (signature.Signer, error)
	// Transport sends the requests. Defaults to the SSRF-safe transport of
	// the zero Guard: https on port 443 to public addresses only.
	Transport http.RoundTripper
	// Profiles resolves a delivery's Ack profile by name. Defaults to
	// ack.Builtin.
	Profiles func(name string) (ack.Profile, bool)
	// Classify decides whether an attempt that got no acknowledgement is
	// retried or failed, and with which code. Defaults to
	// DefaultClassify; RetryClientErrors retries 4xx answers as well.
	Classify func(resp *http.Response, err error) Verdict
	// Backoff returns how long a delivery waits after its attempt-th
	// attempt (1-based) failed and is retried; retryAfter is the
	// receiver's Retry-After, zero when it sent none. Defaults to
	// DefaultBackoff.
	Backoff func(attempt int, retryAfter time.Duration) time.Duration
	// Logger receives a line per attempt outcome. Defaults to discarding.
	Logger *slog.Logger
	// Now is the clock used to sign attempts. Defaults to time.Now.
	Now func() time.Time
	// Hook receives an Event after each attempt is settled, for metrics
	// and tests. It runs on the attempt's goroutine and must be quick.
	// Defaults to none.
	Hook func(Event)
}

// Event reports one settled attempt. It carries identities and codes,
// never payload, header or key content.
type Event struct {
	DeliveryID     int64
	NotificationID string
	Endpoint       string // scheme, host and path only: no userinfo, no query
	Attempt        int
	Outcome        store.AttemptOutcome // what the attempt came to
	Status         courier.Status       // the delivery's status after it ("" if the lease was lost)
	Code           courier.Code         // the delivery's error code after it
	HTTPStatus     int                  // the receiver's status, 0 if none
	Duration       time.Duration        // the attempt, from request to classification
	LeaseLost      bool                 // the outcome was not applied: another worker holds the row
}

// WithDefaults returns a copy of c with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.BatchSize == 0 {
		c.BatchSize = c.Concurrency
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Transport == nil {
		c.Transport = Guard{}.Transport()
	}
	if c.Profiles == nil {
		c.Profiles = ack.Builtin
	}
	if c.Classify == nil {
		c.Classify = DefaultClassify
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Store == nil:
		return configError("Config.Store is required")
	case c.Signer == nil && c.SignerFor == nil:
		return configError("Config.Signer or Config.SignerFor is required")
	case c.Concurrency < 1:
		return configError("Config.Concurrency must be at least 1")
	case c.BatchSize < 1 || c.BatchSize > protocol.MaxClaimBatch:
		return configError("Config.BatchSize must be within 1..1000")
	case c.Timeout <= 0:
		return configError("Config.Timeout must be positive")
	case c.PollInterval <= 0:
		return configError("Config.PollInterval must be positive")
	case c.Lease <= c.Timeout:
		return configError("Config.Lease must be longer than Config.Timeout")
	}
	return nil
}

func configError(msg string) error {
	return courier.Wrap(courier.ErrConfigInvalid, courier.CodeConfigInvalid, "client: "+msg)
}

func defaultOwner() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Worker delivers the outbox: it claims due deliveries in batches, signs
// and sends each attempt, verifies the receiver's Ack and settles the
// outcome. Run it in as many processes as you like; leases keep them from
// sending the same delivery at once.
type Worker struct {
	cfg     Config
	outbox  protocol.Outbox
	client  *http.Client
	settler *settler
}

// NewWorker returns a Worker for cfg.
func NewWorker(cfg Config) (*Worker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	outbox := protocol.For(cfg.Store)
	return &Worker{
		cfg:     cfg,
		outbox:  outbox,
		client:  &http.Client{Transport: cfg.Transport, CheckRedirect: checkRedirect},
		settler: newSettler(outbox),
	}, nil
}

// Run delivers until ctx is done, then returns nil once every attempt in
// flight has stopped. Attempts cut short by the cancellation are not
// settled: their leases expire and the deliveries are retried. Run returns
// an error only for a configuration it cannot run with; a store that fails
// is logged and retried at the next poll.
func (w *Worker) Run(ctx context.Context) error {
	wake, stopListening := w.listen(ctx)
	defer func() { stopListening() }()

	slots := make(chan struct{}, w.cfg.Concurrency) // one per attempt in flight
	freed := make(chan struct{}, w.cfg.Concurrency) // an attempt finished
	var inflight sync.WaitGroup
	defer inflight.Wait()
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()

	// Claims wait until at least half a batch fits: a claim is a write
	// transaction, and taking rows one at a time as slots free up would
	// cost one per delivery.
	minClaim := max(1, min(w.cfg.BatchSize, w.cfg.Concurrency)/2)
	for ctx.Err() == nil {
		free := w.cfg.Concurrency - len(slots)
		want := min(free, w.cfg.BatchSize)
		got := 0
		if want >= minClaim {
			batch, err := w.outbox.Claim(ctx, protocol.ClaimParams{Owner: w.cfg.Owner, Limit: want, Lease: w.cfg.Lease})
			if err != nil && ctx.Err() == nil {
				w.cfg.Logger.ErrorContext(ctx, "worker: claim failed", slog.Any("error", err))
			}
			got = len(batch)
			for _, c := range batch {
				slots <- struct{}{}
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					w.deliver(ctx, c)
					<-slots
					select {
					case freed <- struct{}{}:
					default:
					}
				}()
			}
		}
		// A full batch means more may be due: claim again as soon as
		// there is room for another. Otherwise wait for a wake-up or the
		// next poll, or for room when there was none.
		var room <-chan struct{}
		switch {
		case want >= minClaim && got == want:
			if w.cfg.Concurrency-len(slots) >= minClaim {
				continue
			}
			room = freed
		case want < minClaim:
			room = freed
		}
		select {
		case <-ctx.Done():
		case <-room:
		case <-poll.C:
			if wake == nil { // listen again after a failure
				wake, stopListening = w.listen(ctx)
			}
		case _, ok := <-wake:
			if !ok { // the listener failed: poll until the next tick
				stopListening()
				wake, stopListening = nil, func() {}
			}
		}
	}
	return nil
}

// listen subscribes to the store's wake-ups; without them the worker polls.
func (w *Worker) listen(ctx context.Context) (<-chan struct{}, func()) {
	ch, stop, err := w.outbox.Listen(ctx)
	if err != nil {
		w.cfg.Logger.WarnContext(ctx, "worker: wake-ups unavailable, polling", slog.Any("error", err))
		return nil, func() {}
	}
	return ch, stop
}

// Work claims one batch of due deliveries, delivers them and returns when
// every attempt is settled, with how many it claimed. Run is Work in a
// loop with wake-ups; Work suits tests and schedulers of one's own.
func (w *Worker) Work(ctx context.Context) (int, error) {
	batch, err := w.outbox.Claim(ctx, protocol.ClaimParams{Owner: w.cfg.Owner, Limit: w.cfg.BatchSize, Lease: w.cfg.Lease})
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, w.cfg.Concurrency)
	for _, c := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			w.deliver(ctx, c)
		})
	}
	wg.Wait()
	return len(batch), nil
}

// settleTimeout bounds settling an attempt that finished during shutdown.
const settleTimeout = 5 * time.Second

// deliver makes one attempt and settles it, together with the attempts
// that finish meanwhile (see settler).
func (w *Worker) deliver(ctx context.Context, c protocol.Claimed) {
	started := time.Now()
	oc, aborted := w.attempt(ctx, c)
	if aborted {
		return // cut short by shutdown: the lease expires and the delivery is retried
	}
	oc.Lease = c.Lease
	oc.Duration = time.Since(started)
	// An attempt that finished is settled even if shutdown began meanwhile,
	// so an acknowledged delivery is not sent again.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	s, err := w.settler.settle(ctx, oc)
	id, attempt := slog.Int64("delivery", c.DeliveryID), slog.Int("attempt", c.Attempt)
	switch {
	case err != nil:
		w.cfg.Logger.ErrorContext(ctx, "worker: settle failed", id, attempt, slog.Any("error", err))
		return
	case s.Err != nil:
		w.cfg.Logger.WarnContext(ctx, "worker: lease lost before settling", id, attempt, slog.String("code", string(courier.CodeLeaseLost)))
	case w.cfg.Logger.Enabled(ctx, slog.LevelDebug):
		w.cfg.Logger.DebugContext(ctx, "worker: attempt settled", id, attempt, slog.String("status", string(s.Status)),
			slog.String("code", string(s.Code)), slog.Int("http_status", oc.HTTPStatus), slog.Duration("duration", oc.Duration))
	}
	if w.cfg.Hook != nil {
		outcome := store.AttemptOutcome(oc.Result)
		switch s.Status {
		case courier.StatusRetryWait:
			outcome = store.AttemptRetry
		case courier.StatusFailed:
			outcome = store.AttemptFailed
		}
		w.cfg.Hook(Event{
			DeliveryID: c.DeliveryID, NotificationID: c.NotificationID, Endpoint: redactURL(c.Endpoint), Attempt: c.Attempt,
			Outcome: outcome, Status: s.Status, Code: s.Code, HTTPStatus: oc.HTTPStatus, Duration: oc.Duration,
			LeaseLost: s.Err != nil,
		})
	}
}

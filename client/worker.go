package client

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/protocol"
)

// Worker delivers the outbox: it claims due deliveries in batches, signs
// and sends each attempt, verifies the receiver's Ack and settles the
// outcome. Run it in as many processes as you like; leases keep them from
// sending the same delivery at once. It traces with its Store's tracer
// (store.Config.Tracer), if the Store has one: each attempt and each
// settle, and each claim that leases something or fails. Of the claims
// that find nothing, made at every poll while there is nothing to deliver,
// it traces the first of each idle stretch; a claim that leases or fails
// after one is traced from its return, without the claim's own time.
//
// A Worker stops in one of two ways. Stop is the soft way: no more claims,
// the deliveries claimed and not started given back, the attempts in
// flight finished and settled, and cut short only when Stop's context
// ends. Cancelling the context of Run (or Work) is the hard way: the
// attempts in flight are cut short at once. Either way nothing is left
// leased: an attempt cut short is settled as a retry with code
// worker_stopped, due again at once (it may have reached the receiver, so
// it is counted in the delivery's attempts and logged, but it spares the
// delivery's budget, which grows by one: a stop during a delivery's last
// attempt leaves it one more, and only its deadline ends it, or its
// 1000th attempt, the most any delivery makes; the ack.AttemptHeader of
// the next attempts counts it out, so a command's source judges them by
// its budget as if it had not been made), and a delivery never started is
// given back without counting.
type Worker struct {
	cfg     Config
	outbox  protocol.Outbox
	tracer  courier.Tracer // the Store's
	client  *http.Client
	settler *settler
	// life is done once the Store is closed: no claim can succeed (one in
	// progress is cut short, see claim), and no outcome be recorded, so
	// no request is sent any more.
	life context.Context
	// leftToLeases counts the claimed deliveries a closed Store could not
	// take back, until a Run or Work that ends reports them.
	leftToLeases atomic.Int64

	// slots holds one token per attempt in flight, across every Run and
	// Work of the worker: together they keep to Config.Concurrency.
	slots chan struct{}
	// ended and given count, from the worker's start, the room its
	// attempts gave back, a Run's or a Work's: ended the attempts that
	// ended, each a slot; given those whose lease is the worker's no more,
	// each room in an endpoint's share, counted once each: as the settle
	// that recorded its outcome commits (see giveBack), or else at the
	// attempt's end. A Run compares them with what they were when it last
	// claimed (see mark). changed is signalled at each.
	ended, given atomic.Int64
	changed      signal
	// claiming holds a token while a claim of the worker is in progress:
	// its claims, from every Run and Work, are made one at a time. The
	// store reckons an endpoint's share (Config.EndpointConcurrency) from
	// the leases the worker's Owner has committed, so two claims at once
	// would each see the other's as not yet there and each lease the
	// whole share; and a Run reckons its free slots, claims and takes
	// the slots of what it starts in one turn, so two Runs do not each
	// claim for the same free slots.
	claiming chan struct{}
	// running guards started: each attempt in flight, a Run's or a
	// Work's, by a number of its own (next). A Run reckons from it the
	// slots held by attempts that have run for a PollInterval or more,
	// which may not come back before their Timeout (see claimForRun), and
	// the room its attempts have yet to give back (see roomToCome).
	running sync.Mutex
	started map[uint64]inFlight
	next    uint64
	// claimsIdle is set, in the claim turn, when the last claim found
	// nothing: the next are traced only if they lease or fail (see claim).
	claimsIdle bool
	// claimSaw is given as the last claim's transaction began, set in
	// the claim turn (see claimParams): the room that transaction saw.
	claimSaw int64

	mu      sync.Mutex
	stopped bool          // Stop was called: no Run or Work begins
	active  int           // Run and Work calls in progress
	idle    chan struct{} // closed once Stop was called and no Run or Work is in progress
	// stopCtx is cancelled by Stop: claim nothing more (a claim in
	// progress is cut short), start no attempt. stopping is its Done.
	stopCtx  context.Context
	stop     context.CancelFunc
	stopping <-chan struct{}
	// halt is cancelled when Stop's context ends: the attempts in flight
	// are cut short.
	halt    context.Context
	haltNow context.CancelFunc

	// awaiting, when set (by tests, before any Run), is called each time a
	// Run begins to wait in await; claimed after each claim of a Run's,
	// with how many deliveries it leased.
	awaiting func()
	claimed  func(leased int)
	// claimBegan, when set (by tests, before any claim), is called as
	// each transaction of a claim begins, before the clock is read for it.
	claimBegan func()

	proxyOnce sync.Once // warnIgnoredProxy's
}

// NewWorker returns a Worker for cfg.
func NewWorker(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	outbox := protocol.For(cfg.Store)
	tracer := outbox.Tracer()
	halt, haltNow := context.WithCancel(context.Background())
	stopCtx, stop := context.WithCancel(context.Background())
	return &Worker{
		cfg:      cfg,
		outbox:   outbox,
		tracer:   tracer,
		client:   &http.Client{Transport: cfg.Transport, CheckRedirect: checkRedirect},
		settler:  &settler{apply: settleSpan(tracer, outbox.Settle)},
		life:     outbox.Closed(),
		slots:    make(chan struct{}, cfg.Concurrency),
		claiming: make(chan struct{}, 1),
		started:  make(map[uint64]inFlight),
		idle:     make(chan struct{}),
		stopCtx:  stopCtx,
		stop:     stop,
		stopping: stopCtx.Done(),
		halt:     halt,
		haltNow:  haltNow,
	}, nil
}

// Stop shuts the worker down softly, as a process does on SIGTERM: every
// Run and Work of w stops claiming; the deliveries they claimed and have
// not started are given back at once (their attempts not counted, so
// another worker takes them as they were); the attempts in flight run to
// their end and are settled. Stop returns nil once every Run and Work of
// w has returned. If ctx ends first, the attempts still in flight are cut
// short and settled as retries with code worker_stopped, due again at
// once, their deliveries' budgets spared (see Worker), and Stop returns
// ctx's error at once, without waiting for those settles: Run and Work
// return when they are done (bounded by what is left of their leases, and
// by the configuration's functions an attempt is in, which nothing can cut
// short: see Config), so a process that must leave nothing leased waits
// for Run's return, not Stop's.
//
// Once Stop was called and every Run and Work of w has returned, the
// idle keep-alive connections of the worker's transport are closed
// (Config.Transport's, if it has a CloseIdleConnections method, as the
// Guard's has): a transport shared with others loses only its idle
// connections, which are dialed again when needed.
//
// After Stop, Run returns nil and Work returns courier.CodeWorkerStopped
// at once; a Worker does not start again. Stop may be called more than
// once, and from any goroutine but the one Config.Hook runs on: Stop
// waits for the attempts, and the Hook runs on an attempt's goroutine.
// Called from the Hook, Stop cannot return nil: it returns ctx's error
// once ctx ends (so give it a ctx that ends), and the worker finishes
// stopping when the Hook returns.
func (w *Worker) Stop(ctx context.Context) error {
	w.mu.Lock()
	first := !w.stopped
	if first {
		w.stopped = true
		w.stop()
		if w.active == 0 {
			w.finish()
		}
	}
	w.mu.Unlock()
	if first {
		w.cfg.Logger.InfoContext(ctx, "worker: stopping", slog.String(logkey.Owner, w.cfg.Owner))
	}
	select {
	case <-w.idle: // checked first: with nothing running, a ctx already done cuts nothing short
		return nil
	default:
	}
	select {
	case <-w.idle:
		return nil
	case <-ctx.Done():
		select {
		case <-w.idle: // idle as ctx ended: nothing to cut short
			return nil
		default:
		}
		w.cfg.Logger.WarnContext(ctx, "worker: stop deadline passed, cutting attempts short", slog.String(logkey.Code, string(courier.CodeWorkerStopped)))
		w.haltNow()
		return ctx.Err()
	}
}

// enter registers a Run or Work call, unless Stop was called.
func (w *Worker) enter() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.active++
	return true
}

// proxyVariables are the environment's proxy settings, which a Guard's
// transport never reads (see Guard.Transport).
var proxyVariables = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}

// warnIgnoredProxy logs once per worker, at Warn, that the environment
// names a proxy its Guard's transport does not use: where egress must go
// through one, every attempt would otherwise fail network_error (dial
// timeouts), with nothing saying why. The variable is named, never its
// value, which may hold the proxy's credentials.
func (w *Worker) warnIgnoredProxy(ctx context.Context) {
	if _, guarded := w.cfg.Transport.(*guardTransport); !guarded {
		return
	}
	w.proxyOnce.Do(func() {
		for _, v := range proxyVariables {
			if os.Getenv(v) != "" {
				w.cfg.Logger.WarnContext(ctx, "worker: "+v+" is set and not used: the guard's transport connects to receivers itself, "+
					"so that the addresses it checks are the ones it reaches (see client.Guard.Transport)")
				return
			}
		}
	})
}

// leave ends a Run or Work call registered by enter.
func (w *Worker) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active--
	if w.stopped && w.active == 0 {
		w.finish()
	}
}

// finish ends a stopped worker once no Run or Work is in progress (w.mu
// held): it sends nothing more, so the keep-alive connections its
// transport holds idle are closed (each is two goroutines, kept for up
// to 90 seconds otherwise), and Stop may return.
func (w *Worker) finish() {
	w.client.CloseIdleConnections()
	close(w.idle)
}

// storeClosed reports whether the Store was closed: no outcome can be
// recorded any more, nor a lease given back, so no request is sent.
func (w *Worker) storeClosed() bool {
	select {
	case <-w.life.Done():
		return true
	default:
		return false
	}
}

// isStopping reports whether no attempt may start: Stop was called or ctx
// (a Run's or Work's) is done.
func (w *Worker) isStopping(ctx context.Context) bool {
	select {
	case <-w.stopping:
		return true
	default:
		return ctx.Err() != nil
	}
}

// cutShort reports whether an attempt running in ctx, an attemptContext,
// was cut short: ctx is done, or Stop's context ended, which ctx hears of
// a moment later (its cancel runs on a goroutine of its own), while Stop
// has returned already.
func (w *Worker) cutShort(ctx context.Context) bool { return ctx.Err() != nil || w.halt.Err() != nil }

// attemptContext returns the context attempts run in: ctx, also cancelled
// when Stop's context ends.
func (w *Worker) attemptContext(ctx context.Context) (context.Context, context.CancelFunc) {
	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(w.halt, cancel)
	return actx, func() {
		stop()
		cancel()
	}
}

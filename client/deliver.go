package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/retry"
	"github.com/courier-go/courier/internal/tracing"
	"github.com/courier-go/courier/store"
)

// Bounds of the worker's writes of outcomes and releases.
const (
	// minPersistWindow is the least time a settle or release is given
	// when its lease has (nearly) run out: the store fences it anyway.
	minPersistWindow = time.Second
	// logRetriesFrom is the first attempt whose retry is logged at Info:
	// one or two retries are routine, more say the receiver is in trouble.
	logRetriesFrom = 3
)

// deliver makes attempt n (see Worker.begin) of c, claimed at claimedAt
// (the worker's clock as the claim began: see leasedFrom), and settles it
// together with the attempts that finish meanwhile (see settler). An attempt
// starts only while the worker is not stopping, the Store is not closed,
// the lease covers a whole Timeout and the delivery's deadline has not
// come; otherwise the delivery is given back unsent (a closed Store takes
// nothing back: the lease expires), or (past its deadline) ended as
// expired. Its request is sent only if the lease still covers a whole
// Timeout once the request is signed (see try); if not, the delivery is
// given back unsent as well, or, if the signing alone spent the lease,
// retried with code signing_failed. Nor is it sent if its deadline came
// while it was signed: it is ended as expired. A request the transport
// comes to write only after its Timeout (the worker held up meanwhile) is
// not written, and the delivery is given back too.
//
// Lease and deadline are measured as spans on the store's clock (expiry
// and deadline minus the claim's time) against the time elapsed on the
// worker's clock since the claim began, so the two clocks need not
// agree, and the worker errs on the side of not sending. A clock that
// tells no time (see now) measures nothing: the delivery is given back.
func (w *Worker) deliver(ctx context.Context, n uint64, c protocol.Claimed, claimedAt time.Time) {
	var oc protocol.Outcome
	var span *tracing.Once // the attempt's, ended once it is settled
	now, told := w.now(ctx)
	switch {
	case w.isStopping(ctx), !told, w.storeClosed():
		w.release(ctx, claimedAt, c.Lease)
		return
	case !w.leaseCovers(ctx, c, claimedAt, now):
		w.release(ctx, claimedAt, c.Lease)
		return
	case pastDeadline(c, claimedAt, now):
		oc = protocol.Outcome{Result: protocol.Failed, Code: courier.CodeExpired}
	default:
		started := time.Now()
		var actx context.Context
		actx, span = w.startAttempt(ctx, c)
		defer span.EndUnended() // a callback may end the goroutine (runtime.Goexit) before the attempt does
		var ready bool
		if oc, ready = w.tryUnpanicked(actx, c, claimedAt, now); !ready {
			abandonAttempt(span)
			w.release(ctx, claimedAt, c.Lease)
			return
		}
		oc.Duration = time.Since(started)
	}
	oc.Lease = c.Lease
	s, err := w.settle(ctx, oc, w.leaseLeft(ctx, c.Lease, claimedAt), func() { w.giveBack(n) })
	endAttempt(span, oc, s.Status) // once settled: a retry the store ends (the last of its budget) is failed
	w.report(ctx, c, oc, s, err)
}

// pastDeadline reports whether c's deadline had come at now (see
// deliver): no request of c may be sent any more.
func pastDeadline(c protocol.Claimed, claimedAt, now time.Time) bool {
	return !c.Deadline.IsZero() && now.Sub(claimedAt) >= c.Deadline.Sub(c.LeasedAt)
}

// leaseCovers reports whether c's lease, claimed at claimedAt, still
// covered a whole Timeout at now (see deliver). When it did not, it logs
// that c is given back: the caller releases it.
func (w *Worker) leaseCovers(ctx context.Context, c protocol.Claimed, claimedAt, now time.Time) bool {
	left := leaseLeftAt(c.Lease, claimedAt, now)
	if left >= w.cfg.Timeout {
		return true
	}
	w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "worker: lease too short to start an attempt, released",
		append(attemptAttrs(c), slog.Duration(logkey.LeaseLeft, left), slog.Duration(logkey.Timeout, w.cfg.Timeout))...)
	return false
}

// attemptAttrs names c's attempt in a log line: its delivery, its number
// and its endpoint, redacted and by its ref (which tells apart endpoints
// whose redacted forms are alike).
func attemptAttrs(c protocol.Claimed) []slog.Attr {
	return []slog.Attr{
		slog.Int64(logkey.Delivery, c.DeliveryID), slog.Int(logkey.Attempt, c.Attempt),
		slog.String(logkey.Endpoint, endpoint.Redact(c.Endpoint)), slog.String(logkey.EndpointRef, endpoint.Ref(c.Endpoint)),
	}
}

// settle records oc, retrying a write that fails (a busy database, a lost
// connection) until it lands or the lease it was made under has run out
// (within, at least minPersistWindow): an attempt that was sent and is
// not recorded would be sent again. Shutdown does not cut it short.
// recorded, if not nil, is called once a transaction that recorded oc,
// or found its lease lost, committed (see settler.settle).
func (w *Worker) settle(ctx context.Context, oc protocol.Outcome, within time.Duration, recorded func()) (protocol.Settled, error) {
	var s protocol.Settled
	err := w.persist(ctx, within, func(ctx context.Context) error {
		var err error
		if s, err = w.settler.settle(ctx, oc, recorded); err == nil && courier.CodeOf(s.Err) == courier.CodeInvalidArgument {
			err = s.Err // refused, not lost: no write will take it
		}
		return err
	})
	return s, err
}

// release gives back leases whose attempt never started, retrying as
// settle does; a release that cannot be written leaves the lease to
// expire. A closed Store takes nothing back: what it leaves to expire is
// counted, and logged once by the Run or Work that ends (see
// reportLeftToLeases), not as a release that failed.
func (w *Worker) release(ctx context.Context, claimedAt time.Time, leases ...protocol.Lease) {
	if len(leases) == 0 {
		return
	}
	var n int
	err := w.persist(ctx, w.leaseLeft(ctx, leases[0], claimedAt), func(ctx context.Context) error {
		var err error
		n, err = w.outbox.Release(ctx, leases...)
		return err
	})
	if errors.Is(err, protocol.ErrClosed) {
		w.leftToLeases.Add(int64(len(leases)))
		return
	}
	if err != nil {
		w.cfg.Logger.ErrorContext(ctx, "worker: release failed", slog.Int(logkey.Deliveries, len(leases)), slog.Any(logkey.Error, err))
		return
	}
	w.cfg.Logger.DebugContext(ctx, "worker: released unstarted deliveries", slog.Int(logkey.Deliveries, n))
}

// reportLeftToLeases logs, at Warn, how many claimed deliveries the
// closed Store kept (see release) since the last report, if any: once per
// Run or Work that ends on a closed Store.
func (w *Worker) reportLeftToLeases(ctx context.Context) {
	if n := w.leftToLeases.Swap(0); n > 0 {
		w.cfg.Logger.WarnContext(ctx, "worker: Store closed; claimed deliveries left to their leases",
			slog.Int64(logkey.Deliveries, n), slog.String(logkey.Code, string(courier.CodeDatabaseUnavailable)))
	}
}

// leasedFrom is the instant, on the worker's clock, from which the lease
// of a delivery leased in the claim's transaction pass is measured (see
// deliver): as that transaction began (began, see claim), or, if the
// clock told nothing then, before the claim (before). Each transaction
// of a claim waits for its connection (a pool the application's
// transactions fill, SQLite's writer held by one of them) before the
// store stamps its leases: measured from before that wait, its leases
// read as spent by it, and their deliveries were given back unsent. The
// first transaction's start (pass 0) is the earliest, and measures every
// lease of the claim on the side of not sending: what gives leases back
// measures from it.
func leasedFrom(before time.Time, began []time.Time, pass int) time.Time {
	if pass < len(began) && !began[pass].IsZero() {
		return began[pass]
	}
	return before
}

// leaseLeft is how much of l is left now, none if the clock tells no
// time (see now).
func (w *Worker) leaseLeft(ctx context.Context, l protocol.Lease, claimedAt time.Time) time.Duration {
	now, told := w.now(ctx)
	if !told {
		return 0
	}
	return leaseLeftAt(l, claimedAt, now)
}

// leaseLeftAt is how much of l was left at now: its length on the store's
// clock less the time elapsed on the worker's since the claim began (see
// deliver).
func leaseLeftAt(l protocol.Lease, claimedAt, now time.Time) time.Duration {
	return l.ExpiresAt.Sub(l.LeasedAt) - now.Sub(claimedAt)
}

// now reads the worker's clock, Config.Now. A clock that panics tells no
// time: told is false, and the panic is logged at Error, without its
// value, which may hold content. What the reading was for does not go
// ahead (see Config.Now), and the process goes on.
func (w *Worker) now(ctx context.Context) (t time.Time, told bool) {
	defer func() {
		if recover() != nil {
			w.cfg.Logger.ErrorContext(ctx, "worker: Now panicked", slog.Bool(logkey.Panic, true), slog.String(logkey.Code, string(courier.CodeInternal)))
			t, told = time.Time{}, false
		}
	}()
	return w.cfg.Now(), true
}

// errClock is the error of a claim not made because the worker's clock
// panicked (see now).
var errClock = &coded.Error{Code: courier.CodeInternal, Msg: "client: Config.Now panicked; no claim made"}

// persist runs write, a write to the store, until it succeeds, fails for
// good (invalid input), or within has passed. ctx's values are kept, its
// cancellation is not: what is decided is recorded even during shutdown.
func (w *Worker) persist(ctx context.Context, within time.Duration, write func(context.Context) error) error {
	return retry.Write(ctx, max(within, minPersistWindow), write, func(ctx context.Context, err error) {
		w.cfg.Logger.DebugContext(ctx, "worker: store write failed, trying again", slog.Any(logkey.Error, err))
	})
}

// report logs a settled attempt, or one whose settle failed (err), and
// hands its Event to the hook.
func (w *Worker) report(ctx context.Context, c protocol.Claimed, oc protocol.Outcome, s protocol.Settled, err error) {
	attrs := attemptAttrs(c)
	// Not recorded (err; an outcome the store refused as invalid has its
	// refusal in s.Err too), or found its lease lost: one or the other.
	unrecorded, lost := err != nil, err == nil && s.Err != nil
	code := s.Code
	switch {
	case unrecorded:
		code = oc.Code // the attempt's own
	case lost:
		code = courier.CodeLeaseLost
	}
	if s.Status != "" {
		attrs = append(attrs, slog.String(logkey.Status, string(s.Status)))
	}
	if code != "" {
		attrs = append(attrs, slog.String(logkey.Code, string(code)))
	}
	if !unrecorded && !lost && oc.Code != "" && oc.Code != code {
		// The delivery ended with another code than the attempt's (expired,
		// at its deadline): what the attempt itself met is kept too.
		attrs = append(attrs, slog.String(logkey.AttemptCode, string(oc.Code)))
	}
	if oc.RemoteCode != "" {
		attrs = append(attrs, slog.String(logkey.RemoteCode, string(oc.RemoteCode)))
	}
	if oc.HTTPStatus != 0 {
		attrs = append(attrs, slog.Int(logkey.HTTPStatus, oc.HTTPStatus))
	}
	attrs = append(attrs, slog.Duration(logkey.Duration, oc.Duration))
	var cause []slog.Attr // why an attempt got no answer: a refused connection, a certificate
	if oc.Cause != nil {
		cause = append(cause, slog.Any(logkey.Error, loggedCause(oc.Cause)))
	}
	log := func(level slog.Level, msg string, extra ...slog.Attr) {
		w.cfg.Logger.LogAttrs(ctx, level, msg, append(attrs, extra...)...)
	}
	switch {
	case unrecorded:
		log(slog.LevelError, "worker: settle failed", slog.Any(logkey.Error, err))
	case lost:
		log(slog.LevelWarn, "worker: lease lost before settling")
	case oc.Code == courier.CodeDestinationForbidden:
		var why []slog.Attr // the guard's reason: what a Guard would have to open, and where
		if oc.Refusal != nil {
			why = append(why, slog.Any(logkey.Error, fmt.Errorf("%w (%s)", oc.Refusal, guardOpens)))
		}
		log(slog.LevelWarn, "worker: destination refused", why...)
	case s.Status == courier.StatusFailed:
		log(slog.LevelWarn, "worker: delivery failed", cause...)
	case s.Status == courier.StatusRetryWait && c.Attempt >= logRetriesFrom:
		log(slog.LevelInfo, "worker: delivery retrying", cause...)
	default:
		log(slog.LevelDebug, "worker: attempt settled", cause...)
	}
	w.reportBreaker(ctx, c.Endpoint, s.Breaker)
	if w.cfg.Hook == nil {
		return
	}
	outcome, eventCode := settledOutcome(oc.Result, s.Status), s.Code
	if unrecorded {
		eventCode = oc.Code // the attempt's own
	}
	defer func() { // the Hook's panic is dropped: the attempt is over, and the process goes on
		if recover() != nil {
			log(slog.LevelError, "worker: Hook panicked; the panic was dropped", slog.Bool(logkey.Panic, true))
		}
	}()
	w.cfg.Hook(Event{
		DeliveryID: c.DeliveryID, NotificationID: c.NotificationID, Endpoint: endpoint.Redact(c.Endpoint), EndpointRef: endpoint.Ref(c.Endpoint), Attempt: c.Attempt,
		Outcome: outcome, Status: s.Status, Code: eventCode, RemoteCode: oc.RemoteCode, HTTPStatus: oc.HTTPStatus,
		Duration: oc.Duration, LeaseLost: lost, Unrecorded: unrecorded,
	})
}

// loggedCause is an attempt's Cause as its log line's error: its text,
// every URL in it redacted as the endpoint is (scheme and host, never
// userinfo, path or query). A cause may be an error courier did not
// write: SignerFor's or a Signer's (a key store's *url.Error, naming the
// store's URL and perhaps its token), or that of a Transport other than
// a Guard's (a proxy's, naming the proxy with its password). The
// attempts log, the Hook's Event and the span hold codes alone.
func loggedCause(err error) error {
	return errors.New(endpoint.RedactURLs(err.Error()))
}

// guardOpens is what the worker's line of a refused destination adds to
// the guard's reason: where a destination the guard refuses is opened,
// for the developer whose worker meets a receiver on loopback or plain
// http before reading the Guard's documentation.
const guardOpens = "a client.Guard's AllowHTTP, AllowPorts and AllowPrefixes open it, given to the worker as Config.Transport: Guard.Transport()"

// settledOutcome is what an attempt of result came to once its settle
// left the delivery in status: a retry the store ended, the last of the
// delivery's budget or past its deadline, is failed. A status of ""
// (the lease lost, the outcome unrecorded) leaves the attempt's own
// result.
func settledOutcome(result protocol.Result, status courier.Status) store.AttemptOutcome {
	switch status {
	case courier.StatusRetryWait:
		return store.AttemptRetry
	case courier.StatusFailed:
		return store.AttemptFailed
	}
	return store.AttemptOutcome(result)
}

// reportBreaker logs the move of ep's circuit breaker an attempt's settle
// made, if it made one: Warn as it opens (its reason, and until when) or
// disables the endpoint, Info as it closes again, Debug as its probe
// fails and it opens again (once a cool-down, for as long as the
// endpoint is down). The settle that made a move reports it, and no
// other, so each is logged once, by one worker, whether or not the
// Store's Hook hears of it too (store.EventEndpoint).
func (w *Worker) reportBreaker(ctx context.Context, ep string, m protocol.BreakerMove) {
	if m.To == "" {
		return // no move: almost every settle
	}
	attrs := []slog.Attr{slog.String(logkey.Endpoint, endpoint.Redact(ep)), slog.String(logkey.EndpointRef, endpoint.Ref(ep))}
	if m.Code != "" {
		attrs = append(attrs, slog.String(logkey.Code, string(m.Code)))
	}
	switch store.EndpointState(m.To) {
	case store.EndpointOpen:
		level, msg := slog.LevelWarn, "worker: endpoint's breaker opened, its deliveries paused"
		if store.EndpointState(m.From) == store.EndpointHalfOpen {
			level, msg = slog.LevelDebug, "worker: endpoint's probe failed, its breaker open again"
		}
		w.cfg.Logger.LogAttrs(ctx, level, msg, append(attrs, slog.Time(logkey.OpenUntil, m.Until))...)
	case store.EndpointDisabled:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "worker: endpoint disabled by its breaker, until an operator enables it", attrs...)
	case store.EndpointClosed:
		w.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "worker: endpoint's breaker closed, its deliveries resumed", attrs...)
	}
}

// tryUnpanicked is try, with a panic in what it calls of the
// configuration's (SignerFor, a Signer, Classify, Backoff, Now, a
// profile's Verify) taken as a failed attempt to retry with code
// internal_error after DefaultBackoff: one delivery's poison is not the
// process's end, nor, after a restart, every worker's that claims it. A
// receiver that answered before the panic did answer: its status is kept
// on the outcome, for the attempts log and the endpoint's breaker. A
// panic once ctx has ended (a hard shutdown), before the request was
// handed to the transport, is not ready instead, as try's attempt is when
// the shutdown comes while it is made ready: no request of it can have
// reached the receiver, and the delivery is given back uncounted (a
// callback cut short by the shutdown may well panic; one that panics
// whatever comes is counted by the next worker that claims it). The panic
// is logged without its value, which may hold content. An attempt still
// running once its lease has run out, as measured from now (deliver's
// reading, as it started), is logged at Warn (see watchLease).
func (w *Worker) tryUnpanicked(ctx context.Context, c protocol.Claimed, claimedAt, now time.Time) (oc protocol.Outcome, ready bool) {
	overdue := w.watchLease(ctx, c, leaseLeftAt(c.Lease, claimedAt, now))
	var got progress
	defer func() {
		overdue.Stop() // however the attempt ended: returned, panicked, or its goroutine ended (runtime.Goexit)
		if recover() == nil {
			return
		}
		attrs := []any{slog.Bool(logkey.Panic, true), slog.Int64(logkey.Delivery, c.DeliveryID), slog.String(logkey.Code, string(courier.CodeInternal))}
		if !got.handed && w.cutShort(ctx) {
			w.cfg.Logger.ErrorContext(ctx, "worker: attempt panicked; given back unsent", attrs...)
			oc, ready = protocol.Outcome{}, false
			return
		}
		w.cfg.Logger.ErrorContext(ctx, "worker: attempt panicked; retried later", attrs...)
		oc, ready = protocol.Outcome{Result: protocol.Retry, Code: courier.CodeInternal, HTTPStatus: got.status, RetryDelay: DefaultBackoff(c.Attempt, 0)}, true
	}()
	return w.try(ctx, c, claimedAt, &got)
}

// watchLease logs, at Warn, that c's attempt outlived its lease, once left
// has passed, unless the Timer it returns is stopped first, as the attempt
// ends. Only a callback that ignores its context (see Config) holds an
// attempt that long: its slot stays taken, and the delivery is another
// worker's to claim. The watch costs one timer, as a context deadline
// does; an attempt that ends in time only stops it.
func (w *Worker) watchLease(ctx context.Context, c protocol.Claimed, left time.Duration) *time.Timer {
	id, attempt, ep := c.DeliveryID, c.Attempt, c.Endpoint // what attemptAttrs reads: the timer holds no more
	return time.AfterFunc(left, func() {
		named := protocol.Claimed{Lease: protocol.Lease{DeliveryID: id, Attempt: attempt}, Endpoint: ep}
		w.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "worker: attempt outlived its lease", attemptAttrs(named)...)
	})
}

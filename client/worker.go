package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/logdefault"
	"github.com/courier-go/courier/internal/logkey"
	"github.com/courier-go/courier/internal/nilcheck"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/wire"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// Defaults of Config.
const (
	defaultConcurrency  = 16
	defaultLease        = time.Minute
	defaultTimeout      = 15 * time.Second
	defaultPollInterval = time.Second
	// leaseTimeouts is how many Timeouts a default Lease spans when that
	// is longer than defaultLease: the defaults' ratio.
	leaseTimeouts = 4
)

// Bounds of Config, checked by NewWorker.
const (
	maxLease        = 24 * time.Hour // the longest a delivery may be held
	minTimeout      = 10 * time.Millisecond
	maxTimeout      = wire.MaxAttemptTimeout
	minPollInterval = 10 * time.Millisecond // below it, polling is a busy loop on the claim
	maxPollInterval = time.Hour
	maxOwner        = 256 // bytes, as the store records it
	// minLeaseMargin is the least by which Lease must exceed Timeout (or
	// a tenth of Timeout, if more): the claim's own round trip and the
	// making of the request come out of the lease before an attempt's
	// Timeout begins.
	minLeaseMargin = 100 * time.Millisecond
)

// Config configures a Worker. The functions it holds (Signer and
// SignerFor, Classify, Backoff, Now, Hook, and the Transport) are called
// from the worker's attempts at once, up to Concurrency of them: each
// must be safe for concurrent use, as store.Config's Hook and Profiles
// must be.
//
// Each should also return promptly, or once the context it is given ends
// (the request's, for a Signer's Sign and in the answer Classify judges):
// an attempt holds its slot until what it called returns, and no
// goroutine can be ended from outside. One that blocks past the attempt's
// Timeout, or for good, holds its slot that long, past the lease too
// (logged at Warn once the lease has run out, as "worker: attempt
// outlived its lease");
// Run and Work return only once it returns, and Stop, whose ctx ended,
// returns ctx's error without waiting for it. It costs the worker slots,
// never a duplicate: no request is sent once the lease no longer covers a
// whole Timeout (see Lease), so none overlaps another worker's claim of the
// delivery after the lease expired, and an outcome is recorded only under
// its own lease, which the other worker's claim ended.
type Config struct {
	// Store is the outbox to deliver. Required.
	Store *store.Store
	// Owner names this worker in leases and the attempts log: 1 to 256
	// bytes of visible ASCII (no space or control character). Give each
	// Worker its own: the fair share (EndpointConcurrency) is counted per
	// Owner, and two Workers of one Owner claiming at once may each take
	// all of it. Defaults to host name, process id and a random suffix.
	Owner string
	// Concurrency is how many deliveries are in flight at once, across
	// every Run and Work of the Worker. Defaults to 16. On PostgreSQL the store's pool should hold at
	// least this many connections plus two, and one for each Run, which
	// holds it for its wake-ups (see store.Open). Each holds its payload
	// in memory: see BatchSize for what large payloads cost.
	//
	// The Worker makes one claim at a time, across all its Runs and
	// Works: each claim counts the slots taken and the deliveries leased
	// by those before it, so several Runs of one Worker share its slots
	// and its EndpointConcurrency rather than each claiming them in
	// full, and claim no faster than one Run. For claims in parallel, run
	// more Workers, each with its own Owner.
	Concurrency int
	// BatchSize is the most deliveries one claim takes, 1 to 1000.
	// Defaults to Concurrency, at most 1000.
	//
	// Claims are counted in deliveries, not bytes, and a claimed delivery
	// keeps its payload in memory until its attempt ends: a claim holds up
	// to BatchSize payloads of up to store.MaxPayloadSize each, opened if
	// sealed (store.Encryption), Run at most Concurrency of them, and a
	// Work its whole batch until it returns. So with payloads of 4 MiB
	// (the largest), a Concurrency and BatchSize of 64 hold about 260 MiB,
	// and the heap peaks near 1.2 times that (1.5 sealed) as the batch's
	// requests are signed, each Signer given a copy of its payload
	// (BenchmarkWorkerHeldPayloads); at the limit of 1000, 4 GiB. On
	// SQLite a claim, one write transaction, also writes each row it
	// leases whole, payload included: 16 deliveries take about 5 ms to
	// claim with 1 KiB payloads, 0.6 s with 1 MiB and 1.5 s with 4 MiB,
	// every other write of the database waiting meanwhile
	// (BenchmarkClaimLargePayloads in package store). With large
	// payloads, size both to the memory the process may use, and
	// BatchSize to the time a claim may hold the database.
	BatchSize int
	// EndpointConcurrency is the most deliveries to any one endpoint this
	// worker holds at once (its fair share; held means leased: in flight,
	// or claimed ahead when BatchSize exceeds Concurrency): a claim leases
	// no more of an endpoint's deliveries than that, counting those the
	// worker already holds, and fills the rest of its batch from other
	// endpoints, so an endpoint that answers slowly or not at all cannot
	// take every slot from the others. An endpoint's own limits
	// (store.Endpoints.SetLimits) bound it further, across every worker.
	// 1..max(Concurrency, BatchSize). Defaults to (Concurrency+1)/2: half
	// the slots, rounded up, for the slowest endpoint, the rest for the
	// others. The share is each endpoint's: at the default, a second slow
	// endpoint takes the other half, and the others wait, round after
	// round, for the slow answers or their Timeout while both have a
	// backlog (until their breakers open, if they time out). A worker that
	// sends to many endpoints, a few of which may stall at once, sets it
	// lower (a quarter of Concurrency leaves a quarter of the slots free
	// with three stalled). A worker that delivers to a single endpoint and
	// wants every slot for it sets it to Concurrency.
	EndpointConcurrency int
	// Lease is how long a claimed delivery is held: at most 24 hours, and
	// longer than Timeout by at least Timeout/10 or 100ms, whichever is
	// more (the margin is what the claim, and the making and signing of
	// the request, may take out of the lease before the attempt's Timeout
	// begins). An attempt starts only while the lease still covers a whole
	// Timeout, as the worker's clock (Now) measures it from when the claim's
	// transaction began (after any wait for a connection of the pool), and
	// its request is sent only if the lease still does once the
	// request is signed (SignerFor may ask a slow key store); a delivery
	// whose turn comes later (a slow claim, a batch larger than Concurrency
	// behind slow attempts, a slow signer) is given back unsent, its
	// attempt not counted, so no request is ever sent on a lease that may
	// expire while it runs. Nor is a request written once its Timeout is
	// over, as net/http's transport comes to write it: a worker held up
	// after the check (a paused process) gives the delivery back
	// unwritten. A signing (SignerFor and Sign) that alone takes
	// more than Lease less Timeout could not be followed by a request on
	// any lease: the attempt is not sent, and is retried with code
	// signing_failed after Backoff, counted, as for a signer's passing
	// error, rather than given back to be signed as slowly again at once.
	// Defaults to 1 minute, or to four Timeouts when that is longer.
	Lease time.Duration
	// Timeout bounds one attempt: connecting, sending and reading the
	// answer, 10ms to 1 hour; the signing of its request (Signer.Sign,
	// under the request's context) is bounded by a Timeout of its own,
	// before the attempt's begins. Defaults to 15 seconds.
	Timeout time.Duration
	// PollInterval is how often the worker looks for due deliveries when
	// no wake-up comes, 10ms to 1 hour. Defaults to 1 second. A Run whose
	// wake-ups are lost (on PostgreSQL, its LISTEN connection dropped or
	// could not be opened) logs it at Warn and listens again on a timer
	// of its own, after 100ms doubling up to 5 seconds (or PollInterval,
	// if less), claiming once it listens again. A Run whose claim fails
	// (the database unreachable, the claim's connection ended) logs it at
	// Error and claims again on such a timer too, or at the next wake-up
	// or poll if sooner: the wake-up that called for the claim is spent.
	PollInterval time.Duration
	// Signer signs every attempt, unless SignerFor is set. One of the two
	// is required: courier never sends unsigned notifications. It may read
	// the request's body (the payload, as Message.Body holds it): the
	// request sends the payload as enqueued, whatever the Signer left in
	// the body. Message.Body is the Signer's own copy of the payload: what
	// it writes there is not sent, nor is the Ack checked against it.
	Signer signature.Signer
	// SignerFor returns the signer for a delivery's KeyID (see
	// store.EnqueueParams; "" for a delivery enqueued without one), for
	// senders with a key per endpoint. It is asked afresh for every
	// attempt, so a SignerFor that returns the key the sender holds now
	// rotates a running worker's key: each attempt after the switch,
	// retries of deliveries already in flight included, is signed with
	// the new one (see the signature package, Rotating keys). Its error
	// says whether the key may come back: one that wraps
	// courier.CodeConfigInvalid (errors.Is; e.g. fmt.Errorf("no key %s:
	// %w", keyID, courier.CodeConfigInvalid))
	// means the key id is unknown for good, and the delivery fails with
	// code signing_failed; any other error is taken as transient (a key
	// store that is down) and the delivery is retried with that code. A
	// nil Signer without an error counts as unknown for good. The same
	// holds for an error of Signer.Sign. Defaults to none.
	SignerFor func(keyID string) (signature.Signer, error)
	// Transport sends the requests. Defaults to the SSRF-safe transport of
	// the zero Guard: https on port 443 to public addresses only. Give a
	// Guard's Transport to open private ranges, ports or plain http, or to
	// set the TLS (Guard.TLSClientConfig): its checks stand. A RoundTripper
	// of your own checks what it checks itself and no more (an
	// *http.Transport with a Proxy, for an egress proxy, sends wherever the
	// endpoint says, checked by the proxy if at all). No redirect is
	// followed either way; one to a target the Guard forbids is recorded
	// destination_forbidden only when Transport is a Guard's itself, not
	// wrapped in another: otherwise redirect_refused.
	Transport http.RoundTripper
	// Classify decides whether an attempt that got no acknowledgement is
	// retried or failed, and with which code; a Verdict without a valid
	// code takes DefaultClassify's, and the circuit breaker counts
	// answers and codes as Verdict says. Defaults to
	// DefaultClassify; RetryClientErrors retries 4xx answers as well. A
	// panic in it, as in Backoff, SignerFor, a Signer or a profile's
	// Verify, is logged at Error and the attempt retried with code
	// internal_error after DefaultBackoff: it never ends the process.
	// The *url.Error it hears for a request that got no answer names the
	// endpoint as the Logger does, without userinfo, path or query. An
	// answer whose status is not three digits (HTTP/2 lets a receiver
	// write any) is heard as such an error too, as HTTP/1's transport
	// gives it: no status outside 0..999 reaches Classify.
	Classify func(resp *http.Response, err error) Verdict
	// Backoff returns how long a delivery waits after its attempt-th
	// attempt (1-based) failed and is retried; retryAfter is the
	// receiver's Retry-After, zero when it sent none. A negative delay is
	// taken as none. Defaults to DefaultBackoff.
	Backoff func(attempt int, retryAfter time.Duration) time.Duration
	// Logger receives the worker's account of its deliveries, each line with
	// the delivery, attempt, redacted endpoint and codes (code, remote_code,
	// http_status), never payload, header or key content, and for an attempt
	// that got no answer the transport's cause as error (a connection
	// refused or reset, a certificate not trusted, a name not found: it
	// names addresses and host names, never what the other side sent):
	// Warn for every delivery that fails for good and every destination
	// the guard refuses (its error the guard's reason: the scheme, the
	// port, or the kind of address, as "address is loopback"), Info for a
	// retry from the third attempt on, Warn for a lease lost, too short to start an attempt or
	// spent by the signing (see Lease), for a request given back unwritten
	// because its Timeout was over when the transport came to write it (see
	// Lease) and for an attempt still running once its lease has run out,
	// Error for an outcome the store could not record and for a delivery a
	// claim quarantined instead of sending it (its stored bytes altered, or
	// unreadable under the Store's keys), Info for one a claim suppressed
	// (its subscription changed), Debug for the other attempts. It hears
	// of the endpoints' circuit breakers (store.Config.Breaker) from the
	// worker whose settle moved one, once a move, with or without the
	// Store's Hook: Warn for a breaker that opens (the reason as code, and
	// open_until) or disables its endpoint, Info for one that closes
	// again, Debug for a probe that failed (open again). It hears of the
	// worker itself too: Error for a claim or a release that failed and
	// a panic (in the Hook, in Now, or an attempt's), Warn for wake-ups lost
	// or unavailable (see PollInterval), a Stop whose deadline passed and,
	// once per Run or Work that ends on a closed Store, the claimed
	// deliveries it could not give back, Info for stopping and wake-ups
	// back. Without one, the worker logs through slog.Default(), its Warn
	// and Error lines only: failures are heard with no setup. Pass
	// slog.New(slog.DiscardHandler) for none.
	Logger *slog.Logger
	// Now is the worker's clock: it signs attempts, measures how much of
	// each lease and of each delivery's retry horizon is left, and reads a
	// receiver's Retry-After given as a date. Defaults to time.Now: the
	// host's clock, not the Store's. Leases and horizons are measured as
	// spans (see Lease) and need no agreement with the Store's clock, but
	// the time an attempt is signed at is checked by the receiver against
	// its own clock: keep every worker host's clock within the receivers'
	// tolerance (package signature: a Standard Webhooks verifier's
	// Tolerance, 5 minutes either way by default; an RFC 9421 verifier's
	// ClockSkew, 60 seconds by default, ahead, or that and the signer's
	// Window behind; AdCP HMAC's Tolerance, 300 seconds). A worker further
	// off has its signatures refused (401) and fails the deliveries it
	// claims, signature_rejected by DefaultClassify, that a worker on a
	// right clock would have sent. A clock of your own should keep
	// time.Now's monotonic reading (t.UTC() and t.Round(0) drop it):
	// leases are measured as time elapsed, and on the wall clock alone a
	// step backward would stretch what is left of them by the size of the
	// step. A panic in it never ends the process either: it is logged at
	// Error, and what the reading was for does not go ahead. A claim about
	// to be made is not (Work returns an error with code internal_error;
	// Run claims again on its timer, as after a claim that failed); a
	// claimed delivery about to start is given back unsent, its attempt not
	// counted; a reading while an attempt is made ready is the attempt's
	// panic (see Classify).
	Now func() time.Time
	// Hook receives an Event after each attempt is settled, or its
	// settle failed (Event.Unrecorded), for metrics and tests. It runs
	// on the attempt's goroutine and must be quick. It must not call
	// Stop, which waits for that goroutine (call Stop from another
	// goroutine): if it does, Stop returns ctx's error once its ctx ends,
	// and the worker finishes stopping when the Hook returns. A panic in
	// it is dropped and logged at Error. Defaults to none.
	Hook func(Event)
}

// Event reports one attempt, settled or not (Unrecorded). It carries
// identities and codes, never payload, header or key content.
type Event struct {
	DeliveryID     int64
	NotificationID string
	Endpoint       string // scheme and host only ("/…" for a path): no userinfo, path or query, which may hold credentials
	EndpointRef    string // the endpoint's opaque ref, as the ops page and the CLI show it: tells apart endpoints whose Endpoint is alike
	Attempt        int
	Outcome        store.AttemptOutcome // what the attempt came to
	Status         courier.Status       // the delivery's status after it ("" if the lease was lost or the outcome unrecorded)
	Code           courier.Code         // the delivery's error code after it
	RemoteCode     courier.Code         // the receiver's own code from its problem+json refusal, "" if none
	HTTPStatus     int                  // the receiver's status, 0 if none
	Duration       time.Duration        // the attempt, from request to classification; 0 if it never started (its deadline came while it waited in its batch)
	LeaseLost      bool                 // the outcome was not applied: another worker holds the row
	// Unrecorded: the store failed every write of the outcome while the
	// lease lasted (the worker logs "settle failed" at Error): as far as
	// the worker knows, the delivery is left as the claim leased it, and
	// once the lease expires a claim takes it back and it is sent again.
	// Status is "", and Code the attempt's own.
	Unrecorded bool
}

// withDefaults returns a copy of c with every unset field at its default.
func (c Config) withDefaults() Config {
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.BatchSize == 0 {
		c.BatchSize = min(c.Concurrency, protocol.MaxClaimBatch)
	}
	if c.EndpointConcurrency == 0 {
		c.EndpointConcurrency = c.Concurrency - c.Concurrency/2 // half, rounded up, without overflow
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	if c.Lease == 0 {
		c.Lease = max(defaultLease, leaseTimeouts*c.Timeout)
	}
	if c.PollInterval == 0 {
		c.PollInterval = defaultPollInterval
	}
	if c.Transport == nil { // a typed nil one is refused (validate)
		c.Transport = Guard{}.Transport()
	}
	if c.Classify == nil {
		c.Classify = DefaultClassify
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	c.Logger = logdefault.Or(c.Logger)
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
	case c.Signer != nil && nilcheck.Nil(c.Signer):
		return configError("Config.Signer is a nil pointer")
	case nilcheck.Nil(c.Transport):
		return configError("Config.Transport is a nil pointer")
	case !wire.IsVisible(c.Owner, maxOwner):
		return configError("Config.Owner must be 1-256 bytes of visible ASCII, without spaces")
	case c.Concurrency < 1:
		return configError("Config.Concurrency must be at least 1")
	case c.BatchSize < 1 || c.BatchSize > protocol.MaxClaimBatch:
		return configError("Config.BatchSize must be within 1..1000")
	case c.EndpointConcurrency < 1 || c.EndpointConcurrency > max(c.Concurrency, c.BatchSize):
		return configError("Config.EndpointConcurrency must be within 1..max(Concurrency, BatchSize)")
	case c.Timeout < minTimeout || c.Timeout > maxTimeout:
		return configError("Config.Timeout must be within 10ms..1h")
	case c.PollInterval < minPollInterval || c.PollInterval > maxPollInterval:
		return configError("Config.PollInterval must be within 10ms..1h")
	case c.Lease < c.Timeout+leaseMargin(c.Timeout):
		return configError(fmt.Sprintf("Config.Lease (%v) must exceed Config.Timeout (%v) by at least max(Timeout/10, 100ms): set Lease to %v or more",
			c.Lease, c.Timeout, c.Timeout+leaseMargin(c.Timeout)))
	case c.Lease > maxLease:
		return configError("Config.Lease must be at most 24h")
	}
	return nil
}

// leaseMargin is the least by which Lease must exceed timeout.
func leaseMargin(timeout time.Duration) time.Duration {
	return max(timeout/10, minLeaseMargin)
}

func configError(msg string) error {
	return &courier.Error{Code: courier.CodeConfigInvalid, Msg: "client: " + msg}
}

func defaultOwner() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '_'
		}
		return r
	}, host)
	if len(host) > 200 {
		host = host[:200]
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

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
	// closed is closed once the Store is: no claim can succeed, and no
	// outcome be recorded, so no request is sent any more.
	closed <-chan struct{}
	life   context.Context // done once the Store is closed: it cuts a claim short (see claim)
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
		closed:   outbox.Closed().Done(),
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
	case <-w.closed:
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

// Run delivers until ctx is done or Stop is called, and returns nil once
// every attempt it started is settled. When ctx is done, the attempts in
// flight are cut short at once and settled as retries with code
// worker_stopped, due again at once, their deliveries' budgets spared, and
// what Run claimed and had not started is given back (see Worker); for a
// soft shutdown call Stop instead. Run returns an error only for a
// configuration it cannot run with, and for a Store that was closed
// (store.Store.Close), on which no claim can succeed: it hears of
// the Close at once, not at its next poll (a claim waiting in the
// database is cut short, leasing nothing), and returns the Store's error,
// code database_unavailable, once the attempts in flight are settled (as
// far as the closed Store lets them be). Nothing more is sent once the
// Store is closed: no outcome could be recorded, and a request sent would
// be sent again once its lease expired. The Store is looked at last as the
// transport comes to write a request, once it has a connection for it; a
// request being written or answered as the Close lands was sent, and its
// outcome goes unrecorded: it is sent again once its lease expires, for
// the receiver to dedupe. What was claimed and not yet sent is not given
// back either, for the closed Store cannot: its leases expire, as Run
// logs once, at Warn, with how many it left. Any other claim that fails
// is logged and made again on a timer of its own (see PollInterval), or
// at the next wake-up or poll if sooner.
func (w *Worker) Run(ctx context.Context) error {
	if !w.enter() {
		return nil
	}
	defer w.leave()
	w.warnIgnoredProxy(ctx)
	defer w.reportLeftToLeases(ctx) // once every attempt of the Run has ended
	actx, cancel := w.attemptContext(ctx)
	defer cancel()
	wake := w.listen(ctx)
	defer wake.close()

	var inflight sync.WaitGroup
	defer inflight.Wait()
	poll := time.NewTicker(w.cfg.PollInterval)
	defer poll.Stop()
	// A claim that failed spent the wake-up that called for it: the Run
	// claims again on a timer, as it listens again (see wakeups.retry).
	var again backoff
	defer again.stop()

	// Claims wait until at least half a batch fits: a claim is a write
	// transaction, and taking rows one at a time as slots free up would
	// cost one per delivery. With an endpoint holding its whole share the
	// others' share must still be claimed as it frees up: the wait is for
	// no more than that share, and, with attempts that stall holding
	// more, for no more than the slots they leave (see claimForRun).
	minClaim := max(1, min(w.cfg.BatchSize, w.cfg.Concurrency)/2)
	if others := w.cfg.Concurrency - w.cfg.EndpointConcurrency; others > 0 {
		minClaim = min(minClaim, others)
	}
	afterShort := max(1, w.cfg.EndpointConcurrency/2)
	start := func(c protocol.Claimed, claimedAt time.Time) bool {
		// The slots were free when the claim counted them, but a Work of
		// the worker's may have taken some since: waiting for one, the
		// Run still stops at once.
		if !w.takeSlot(ctx) {
			return false
		}
		inflight.Add(1)
		n := w.begin()
		go func() {
			defer inflight.Done()
			defer w.end(n) // even if a callback ends the goroutine (runtime.Goexit)
			w.deliver(actx, n, c, claimedAt)
		}()
		return true
	}
	for !w.isStopping(ctx) {
		want, got, seen, ok, err := w.claimForRun(ctx, actx, minClaim, start)
		if !ok {
			break
		}
		if errors.Is(err, protocol.ErrClosed) {
			return err
		}
		var retry <-chan time.Time
		if err != nil {
			retry = again.next(w.cfg.PollInterval)
		} else {
			again.delay = 0
		}
		// A full batch started means more may be due: claim again as soon
		// as there is room for another. So may a part of one: the claim
		// leases no more of an endpoint than its room (EndpointConcurrency,
		// its limits), which an attempt gives back as its lease is settled.
		// Otherwise wait for a wake-up or the next poll, or for room when
		// there was none.
		var ready func() bool // the room to wait for; nil for none
		switch {
		case want < minClaim, want == got && w.cfg.Concurrency-len(w.slots) < minClaim:
			ready = w.slotFreed(seen) // too few slots
		case want == got:
			continue
		default:
			// The claim came back short with slots free: the endpoints in
			// flight were at their room. Each of their attempts gives one
			// delivery back as its lease is settled; let half a share come
			// back first, or a claim is made per delivery. Room given
			// back before the claim was the claim's: only what came since
			// counts (a claim for it would lease nothing).
			if need := min(afterShort, w.roomToCome(seen)); need > 0 {
				ready = w.givenBack(seen, need)
			}
		}
		if !w.await(ctx, ready, poll.C, wake, retry) {
			break
		}
	}
	return nil
}

// claimForRun makes one claim of Run's, in the worker's claim turn (see
// Worker.claiming): as many deliveries as there are free slots for, up to
// BatchSize, if that is at least minClaim. Before the turn passes on, it
// starts with start, which takes a slot, each delivery whose lease still
// covers an attempt; it gives back the others, and the rest of the batch
// when start reports that the worker stopped while it waited for a slot.
// It returns how many it wanted and how many it started, the room
// counters as the claim saw them, false once the worker stops, and the
// claim's error; the error of a closed Store is not logged, as Run
// returns it.
func (w *Worker) claimForRun(ctx, actx context.Context, minClaim int, start func(protocol.Claimed, time.Time) bool) (want, got int, seen mark, ok bool, err error) {
	if !w.takeClaimTurn(ctx) {
		return 0, 0, seen, false, nil
	}
	// ended before the slots are counted: a slot freed after it is one
	// more; given is read again as the claim's transaction begins, if a
	// claim is made.
	seen = w.roomNow()
	want = min(w.cfg.Concurrency-len(w.slots), w.cfg.BatchSize)
	// Slots held by attempts that have run for a PollInterval already may
	// not come back before their Timeout: endpoints that stall, each
	// holding its share or all its limits allow. When those leave fewer
	// than minClaim for the others, waiting for half a batch would starve
	// every other endpoint meanwhile, so the claim is for the slots left,
	// however few, once all of them are free. Such a claim comes when an
	// attempt that long ends (at most Concurrency of them a PollInterval)
	// or when the attempts the last one started have all ended: one claim
	// per round of the slots left, as often as the other endpoints answer.
	if others := w.cfg.Concurrency - w.lingering(w.cfg.PollInterval); others < minClaim {
		minClaim = max(1, others)
	}
	// On a closed Store the claim is made even without room, or a reading
	// of the clock: it fails at once, leasing nothing, and its error is
	// what Run returns.
	closed := w.storeClosed()
	if want < minClaim && !closed {
		w.passClaimTurn()
		return want, 0, seen, true, nil
	}
	claimedAt, told := w.now(ctx)
	if !told && !closed {
		w.passClaimTurn()
		return want, 0, seen, true, errClock
	}
	// The room given back before the claim's transaction began is the
	// claim's (claimSaw); what comes after counts as the next claim's.
	// Should the claim fail before it begins, all of it does.
	w.claimSaw = w.given.Load()
	batch, began, err := w.claim(ctx, max(want, 1))
	claimedAt = leasedFrom(claimedAt, began)
	seen.given = w.claimSaw
	if w.claimed != nil {
		w.claimed(len(batch))
	}
	if err != nil && !w.isStopping(ctx) && !errors.Is(err, protocol.ErrClosed) {
		w.cfg.Logger.ErrorContext(ctx, "worker: claim failed", slog.Any(logkey.Error, err))
	}
	if w.isStopping(actx) { // stopped during the claim: none of it starts
		w.passClaimTurn()
		w.release(actx, claimedAt, leasesOf(batch)...)
		return want, 0, seen, false, nil
	}
	// What the claim itself took out of the leases may leave them too
	// short for an attempt: those are given back, and only the deliveries
	// that start count toward a full batch, or a claim that takes too long
	// would be made again and again at once.
	var short []protocol.Lease
	for i, c := range batch {
		if now, told := w.now(actx); !told || !w.leaseCovers(actx, c, claimedAt, now) {
			short = append(short, c.Lease)
			continue
		}
		if !start(c, claimedAt) { // stopped while waiting for a slot
			w.passClaimTurn()
			w.release(actx, claimedAt, append(short, leasesOf(batch[i:])...)...)
			return want, got, seen, false, nil
		}
		got++
	}
	w.passClaimTurn()
	w.release(actx, claimedAt, short...)
	return want, got, seen, true, err
}

// takeClaimTurn waits until no other claim of the worker is in progress
// and takes the turn, unless ctx ends or Stop is called first. The one in
// progress holds the turn no longer than its claim, which its own context
// or Stop cuts short (see claim), and, in Run, the taking of slots for
// what it starts, which attempts that end give back.
func (w *Worker) takeClaimTurn(ctx context.Context) bool {
	return w.acquire(ctx, w.claiming, w.passClaimTurn)
}

// takeSlot takes a slot for an attempt, unless the worker stops first
// (see acquire). One it gives back at once counts as freed (freeSlot): a
// Run may have counted it as taken.
func (w *Worker) takeSlot(ctx context.Context) bool { return w.acquire(ctx, w.slots, w.freeSlot) }

// passClaimTurn ends the turn takeClaimTurn took.
func (w *Worker) passClaimTurn() { <-w.claiming }

// await waits until ready reports the room it waits for (a nil ready
// waits for none), or a wake-up, the next poll or retry (the time to make
// a failed claim again) comes, or the worker stops; it reports whether to
// claim again. While the wake-ups are lost (the listener failed) it
// listens again on a timer of its own, and claims once it listens again:
// what was enqueued while it did not listen woke nobody.
func (w *Worker) await(ctx context.Context, ready func() bool, poll <-chan time.Time, wake *wakeups, retry <-chan time.Time) bool {
	if w.awaiting != nil {
		w.awaiting()
	}
	for {
		var changed <-chan struct{}
		if ready != nil {
			changed = w.changed.wait() // before ready looks: a change after it is heard
			if ready() {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-w.stopping:
			return false
		case <-changed:
		case <-poll:
			return true
		case <-retry:
			return true
		case <-w.closed: // the claim fails at once: Run returns its error
			return true
		case <-wake.retryC():
			if wake.listen() {
				return true
			}
		case _, ok := <-wake.ch:
			if !ok {
				if w.isStopping(ctx) { // the listener ended with Run
					return false
				}
				wake.lost()
			}
			return true
		}
	}
}

// claimParams is a claim of up to limit deliveries, made with ctx. As
// its first transaction begins, it reads the worker's clock into began
// (see claim).
func (w *Worker) claimParams(ctx context.Context, limit int, began *time.Time) protocol.ClaimParams {
	return protocol.ClaimParams{Owner: w.cfg.Owner, Limit: limit, Lease: w.cfg.Lease, EndpointCap: w.cfg.EndpointConcurrency,
		Ended: func(e protocol.Ended) { w.withheld(ctx, e) },
		Began: func() {
			w.claimSaw = w.given.Load()
			if began.IsZero() {
				*began, _ = w.now(ctx)
			}
		}}
}

// withheld logs a delivery a claim ended rather than lease, made with
// ctx: at Error one quarantined (its stored bytes were altered, or do not
// open under the Store's keys: an operator's to look into, then redrive
// or cancel), at Info one suppressed (its subscription changed, as its
// owner asked). Nothing was sent; the Store's Hook and Health count it
// too.
func (w *Worker) withheld(ctx context.Context, e protocol.Ended) {
	level, msg := slog.LevelInfo, "worker: delivery suppressed at claim, not sent"
	if e.Status == courier.StatusQuarantined {
		level, msg = slog.LevelError, "worker: delivery quarantined at claim, not sent"
	}
	w.cfg.Logger.LogAttrs(ctx, level, msg,
		slog.Int64(logkey.Delivery, e.DeliveryID), slog.String(logkey.Endpoint, endpoint.Redact(e.Endpoint)),
		slog.String(logkey.EndpointRef, endpoint.Ref(e.Endpoint)), slog.String(logkey.Code, string(e.Code)))
}

// Listening again after the wake-ups are lost, and claiming again after a
// claim failed: first after minRelisten, the wait doubling up to
// maxRelisten (or PollInterval, if less).
const (
	minRelisten = 100 * time.Millisecond
	maxRelisten = 5 * time.Second
)

// backoff is a timer whose waits double: a Run's for claiming again
// after a claim failed, its wake-ups' for listening again.
type backoff struct {
	timer *time.Timer
	delay time.Duration // the last wait; 0 after a claim that did not fail
}

// next sets the timer, each wait twice the last, and returns its channel.
func (b *backoff) next(pollInterval time.Duration) <-chan time.Time {
	b.delay = min(max(minRelisten, 2*b.delay), min(maxRelisten, pollInterval))
	if b.timer == nil {
		b.timer = time.NewTimer(b.delay)
	} else {
		b.timer.Reset(b.delay)
	}
	return b.timer.C
}

// stop stops the timer.
func (b *backoff) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}

// wakeups are a Run's wake-ups from the store (see store.Open): ch while
// it listens; after its listener failed, or could not start, retry fires
// when to listen again, and the Run polls until then. They listen in a
// context that Stop ends too, so neither listening nor waiting for a
// listener delays Stop.
type wakeups struct {
	w      *Worker
	ctx    context.Context
	cancel context.CancelFunc
	ch     <-chan struct{} // nil while not listening
	stop   func()          // ends the listener of ch
	retry  backoff         // while not listening: when to listen again
	down   bool            // not listening, and that was logged
	failed bool            // a failure to listen was logged since they were last lost or came back
}

// listen starts a Run's wake-ups; without them the Run polls, and
// listens again on a timer.
func (w *Worker) listen(ctx context.Context) *wakeups {
	lctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(w.stopCtx, cancel) //nolint:contextcheck // Stop's context cancels lctx; lctx stays the Run's
	l := &wakeups{w: w, ctx: lctx, cancel: func() { stop(); cancel() }}
	l.listen()
	return l
}

// listen listens for wake-ups, and reports whether it does; if it cannot,
// it logs it (once until it listens again) and sets the timer to try
// again.
func (l *wakeups) listen() bool {
	ch, stop, err := l.w.outbox.Listen(l.ctx)
	if err == nil {
		if l.down {
			l.w.cfg.Logger.InfoContext(l.ctx, "worker: wake-ups back")
		}
		l.ch, l.stop, l.retry.delay, l.down, l.failed = ch, stop, 0, false, false
		return true
	}
	if l.ctx.Err() != nil || errors.Is(err, protocol.ErrClosed) { // Run ends, or its next claim fails on the closed Store: no warning, no retry
		return false
	}
	if !l.failed {
		l.w.cfg.Logger.WarnContext(l.ctx, "worker: wake-ups unavailable, polling", slog.Any(logkey.Error, err))
		l.down, l.failed = true, true
	}
	l.retry.next(l.w.cfg.PollInterval)
	return false
}

// lost ends the listener whose wake-ups ended (the connection it held
// failed), logs it, and sets the timer to listen again.
func (l *wakeups) lost() {
	l.stop()
	l.ch, l.stop = nil, nil
	l.w.cfg.Logger.WarnContext(l.ctx, "worker: wake-ups lost, listening again")
	l.down, l.failed = true, false // the first failure to listen again is logged too
	l.retry.next(l.w.cfg.PollInterval)
}

// retryC is when to listen again: never while listening.
func (l *wakeups) retryC() <-chan time.Time {
	if l.ch != nil || l.retry.timer == nil {
		return nil
	}
	return l.retry.timer.C
}

// close ends the wake-ups.
func (l *wakeups) close() {
	if l.stop != nil {
		l.stop()
	}
	l.retry.stop()
	l.cancel()
}

// Work claims one batch of due deliveries, delivers them and returns when
// every attempt is settled, with how many it claimed. Run is Work in a
// loop with wake-ups; Work suits tests and schedulers of one's own. It
// stops as Run does (see Worker): when ctx is done or Stop is called, the
// deliveries of the batch not yet started are given back, and when ctx is
// done the attempts in flight are cut short. After Stop it returns
// courier.CodeWorkerStopped. On a closed Store (store.Store.Close) its
// claim fails at once, and Work returns the Store's error, code
// database_unavailable; a Store closed once the batch was claimed sends
// no more of it than Run would (see Run), and Work returns how many it
// claimed, and nil.
func (w *Worker) Work(ctx context.Context) (int, error) {
	if !w.enter() {
		return 0, courier.CodeWorkerStopped
	}
	defer w.leave()
	w.warnIgnoredProxy(ctx)
	defer w.reportLeftToLeases(ctx) // once every attempt of the Work has ended
	if !w.takeClaimTurn(ctx) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, courier.CodeWorkerStopped // Stop came while another claim was in progress
	}
	// On a closed Store the claim is made even without a reading of the
	// clock: it fails at once, leasing nothing, and its error is what Work
	// returns.
	claimedAt, told := w.now(ctx)
	if !told && !w.storeClosed() {
		w.passClaimTurn()
		return 0, errClock
	}
	batch, began, err := w.claim(ctx, w.cfg.BatchSize)
	claimedAt = leasedFrom(claimedAt, began)
	w.passClaimTurn()
	if err != nil {
		if ctx.Err() == nil && w.isStopping(ctx) {
			return 0, courier.CodeWorkerStopped // Stop cut the claim short
		}
		return 0, err
	}
	actx, cancel := w.attemptContext(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range batch {
		if !w.takeSlot(actx) {
			w.release(actx, claimedAt, leasesOf(batch[i:])...)
			break
		}
		n := w.begin()
		wg.Go(func() {
			defer w.end(n)
			w.deliver(actx, n, c, claimedAt)
		})
	}
	wg.Wait()
	return len(batch), nil
}

// acquire takes a token of sem (an attempt's slot, or the claim turn),
// unless the worker stops first; one it took as the worker stopped it
// gives back with put.
func (w *Worker) acquire(ctx context.Context, sem chan struct{}, put func()) bool {
	select {
	case sem <- struct{}{}:
		if w.isStopping(ctx) {
			put()
			return false
		}
		return true
	case <-w.stopping:
		return false
	case <-ctx.Done():
		return false
	}
}

// inFlight is an attempt in flight, as begin recorded it.
type inFlight struct {
	began time.Time
	given bool // its lease given up, and counted in Worker.given
}

// begin records that an attempt, holding a slot, starts now and returns
// its number, for giveBack and end.
func (w *Worker) begin() uint64 {
	w.running.Lock()
	defer w.running.Unlock()
	w.next++
	w.started[w.next] = inFlight{began: time.Now()}
	return w.next
}

// giveBack records that attempt n's lease is the worker's no more (its
// outcome recorded, or the lease found lost: see settler.settle), telling
// a Run waiting for room in an endpoint's share (await), unless that was
// counted already. A lease given back unsent is counted by end.
func (w *Worker) giveBack(n uint64) {
	w.running.Lock()
	a, ok := w.started[n]
	counted := ok && !a.given
	if counted {
		a.given = true
		w.started[n] = a
		w.given.Add(1)
	}
	w.running.Unlock()
	if counted {
		w.changed.notify()
	}
}

// end records that attempt n ended and gives back its slot, and its lease
// if giveBack did not (as far as the worker goes: a settle that failed
// leaves it to expire), telling a Run waiting for room (await).
func (w *Worker) end(n uint64) {
	w.running.Lock()
	if !w.started[n].given {
		w.given.Add(1)
	}
	delete(w.started, n)
	w.running.Unlock()
	w.freeSlot()
}

// freeSlot gives back an attempt's slot, telling a Run waiting for one
// (await).
func (w *Worker) freeSlot() {
	<-w.slots
	w.ended.Add(1)
	w.changed.notify()
}

// lingering returns how many attempts in flight began d or more ago.
func (w *Worker) lingering(d time.Duration) int {
	w.running.Lock()
	defer w.running.Unlock()
	n := 0
	for _, a := range w.started {
		if time.Since(a.began) >= d {
			n++
		}
	}
	return n
}

// mark is the room counters as a Run's claim saw them: ended as it
// counted the free slots, given as it asked the store, which counted the
// leases given up before then.
type mark struct{ ended, given int64 }

// roomNow returns the room counters now.
func (w *Worker) roomNow() mark { return mark{ended: w.ended.Load(), given: w.given.Load()} }

// roomToCome returns how many leases have been given up since m, and are
// yet to be by the attempts in flight: the most a Run that claimed at m
// can wait for.
func (w *Worker) roomToCome(m mark) int {
	w.running.Lock()
	defer w.running.Unlock()
	n := int(w.given.Load() - m.given)
	for _, a := range w.started {
		if !a.given {
			n++
		}
	}
	return n
}

// slotFreed returns a report of whether an attempt has ended since m.
func (w *Worker) slotFreed(m mark) func() bool {
	return func() bool { return w.ended.Load() > m.ended }
}

// givenBack returns a report of whether need leases have been given up
// since m.
func (w *Worker) givenBack(m mark, need int) func() bool {
	return func() bool { return w.given.Load()-m.given >= int64(need) }
}

// signal tells every goroutine waiting for a change that one came: each
// takes wait's channel before it looks at what it waits for, and notify
// closes that channel.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

func leasesOf(batch []protocol.Claimed) []protocol.Lease {
	out := make([]protocol.Lease, len(batch))
	for i, c := range batch {
		out[i] = c.Lease
	}
	return out
}

package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/logdefault"
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
	// Signer signs every attempt. Exactly one of Signer and SignerFor is
	// set (NewWorker refuses neither and both, config_invalid): courier
	// never sends unsigned notifications. It may read
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
	// holds for an error of Signer.Sign. Its ctx is the attempt's signing,
	// bounded by a Timeout of its own (see Lease) and ended at a hard
	// shutdown: a SignerFor that asks a key store passes it on, and
	// returns once it ends. Defaults to none.
	SignerFor func(ctx context.Context, keyID string) (signature.Signer, error)
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
	// internal_error after DefaultBackoff: it never ends the process. One
	// after a hard shutdown (see Worker.Stop) and before the request was
	// sent gives the delivery back uncounted, as that shutdown does.
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
	// Logger receives the worker's account of its deliveries and of
	// itself: every delivery that fails for good and every destination
	// the guard refuses at Warn, a retry from the third attempt on at
	// Info, what needs an operator at Error, the rest at Debug. The
	// package doc's Logs lists every line. Without one, the worker logs
	// through slog.Default(), its Warn and Error lines only: failures are
	// heard with no setup. Pass slog.New(slog.DiscardHandler) for none.
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
	// lease lasted, or refused it as invalid at once (the worker logs
	// "settle failed" at Error): as far as
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
	case c.Signer != nil && c.SignerFor != nil:
		return configError("Config.Signer and Config.SignerFor are both set: set one (SignerFor alone would sign every attempt, and Signer none)")
	case c.Signer != nil && nilcheck.Nil(c.Signer):
		return configError("Config.Signer is a nil pointer")
	case nilcheck.Nil(c.Transport):
		return configError("Config.Transport is a nil pointer")
	case !wire.IsVisible(c.Owner, protocol.MaxOwner):
		return configError(fmt.Sprintf("Config.Owner must be 1-%d bytes of visible ASCII, without spaces", protocol.MaxOwner))
	case c.Concurrency < 1:
		return configError("Config.Concurrency must be at least 1")
	case c.BatchSize < 1 || c.BatchSize > protocol.MaxClaimBatch:
		return configError(fmt.Sprintf("Config.BatchSize must be within 1..%d", protocol.MaxClaimBatch))
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
	return &coded.Error{Code: courier.CodeConfigInvalid, Msg: "client: " + msg}
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

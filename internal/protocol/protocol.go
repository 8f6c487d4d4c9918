// Package protocol is the worker protocol between package store, which
// keeps the outbox, and package client, whose Worker delivers it: a worker
// claims due deliveries under leases, makes one attempt per claimed
// delivery, and settles each attempt's outcome, fenced by its lease. What
// it claimed and did not send it gives back.
//
// It is internal so that courier's public surface is what applications
// call (store: enqueue, inspect, operate; client: the Worker); a second
// worker implementation inside courier, or a test, uses it as client does.
package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/courier-go/courier/ack"

	"github.com/courier-go/courier"
)

// Bounds of a claim.
const (
	MaxClaimBatch = 1000 // deliveries in one claim (ClaimParams.Limit)
	MaxOwner      = 256  // bytes of ClaimParams.Owner, as the store records it
)

// Outbox is the store side of the protocol.
type Outbox interface {
	// Tracer is the Store's tracer (store.Config.Tracer), nil for none:
	// the worker traces with it.
	Tracer() courier.Tracer
	// Claim leases up to p.Limit due deliveries, in order of priority, due
	// time and age, each with a random token. It first ends expired
	// leases (logged as lease_expired attempts), and never returns a
	// delivery whose payload no longer matches its digest (quarantined),
	// whose subscription changed (suppressed) or whose deadline has come
	// (failed, expired, its attempt not counted). It leases no more of an
	// endpoint's deliveries than the endpoint has room for (p.EndpointCap,
	// the endpoint's limits, its breaker), and only the head of each
	// ordering key.
	Claim(ctx context.Context, p ClaimParams) ([]Claimed, error)
	// Settle records outcomes, in one transaction (on PostgreSQL, those
	// of healthy endpoints in one statement of their own, committed
	// first). Each is fenced by its
	// lease: a lease that expired or was reclaimed is not applied and its
	// Settled.Err is courier.CodeLeaseLost. An invalid outcome is not
	// applied either, its Settled.Err courier.CodeInvalidArgument; the
	// others are. When a row of the batch is held by another transaction
	// past a short bound, the outcomes are recorded one per transaction
	// instead, and the held one's Settled.Err is the database's failure
	// (courier.CodeDatabaseUnavailable), not applied: try it again; so
	// is each outcome the transaction failed to record when others were
	// recorded before it. The error is for the batch as a whole: nothing
	// was applied.
	Settle(ctx context.Context, outcomes ...Outcome) ([]Settled, error)
	// Release gives back leases whose attempt was never made: each
	// delivery is due again as before its claim, which does not count
	// against its budget. It returns how many it released.
	Release(ctx context.Context, leases ...Lease) (int, error)
	// Listen returns a channel that receives a value soon after an
	// enqueue commits, where the engine can tell, and a func that stops
	// listening. Wake-ups are hints: a worker still polls. The channel is
	// closed when the engine's listener fails.
	Listen(ctx context.Context) (<-chan struct{}, func(), error)
	// Closed is done once the Store is closed (store.Store.Close): from
	// then on every call fails with an error that wraps ErrClosed, and no
	// outcome can be recorded, nor a lease given back.
	Closed() context.Context
	// Profile resolves a delivery's Ack profile by the name it was
	// enqueued with, through the store's Config.Profiles: the one place
	// profiles are registered, for enqueue and workers alike.
	Profile(name string) (ack.Profile, bool)
}

// ClaimParams says who claims how many for how long.
type ClaimParams struct {
	Owner string        // the worker's name, recorded with its leases: 1..MaxOwner bytes of visible ASCII
	Limit int           // at most this many deliveries, 1..MaxClaimBatch
	Lease time.Duration // how long the leases last
	// EndpointCap is the most leases Owner may hold on one endpoint at
	// once (its fair share); 0 for no cap. A claim counts the leases
	// Owner has committed, without a lock: one Owner's claims must not
	// run at once (client.Worker makes its claims one at a time), or on
	// PostgreSQL each may lease the whole cap.
	EndpointCap int
	// Ended, when set, hears of each delivery the claim took out of
	// circulation rather than lease it because it may not be sent
	// (quarantined: its stored bytes do not open or match their digest;
	// suppressed: its subscription changed), once the claim committed.
	Ended func(Ended)
	// Reclaimed, when set, hears how many expired leases (another
	// worker's that died or never settled) the claim took back, their
	// attempts logged lease_expired, once it committed.
	Reclaimed func(n int)
	// Began, when set, is called on the claim's goroutine as each of its
	// transactions begins, before it reads anything (on SQLite, once it
	// holds the writer): what committed before the call, the transaction
	// sees.
	Began func()
}

// Ended is a delivery a claim ended without an attempt (see
// ClaimParams.Ended).
type Ended struct {
	DeliveryID int64
	Endpoint   string
	Status     courier.Status // quarantined or suppressed
	Code       courier.Code   // why
}

// Lease is a worker's hold on one claimed delivery. Every settle presents
// it; it is void once it expires or another worker reclaims the row.
type Lease struct {
	DeliveryID int64
	Token      string
	Owner      string
	Attempt    int // this attempt's number, 1-based
	LeasedAt   time.Time
	ExpiresAt  time.Time
	// Sealed is the payload key that sealed the delivery ("" for none),
	// under which the store keys what it records of the attempt's Ack.
	Sealed string
	// Keyed reports whether the delivery has an ordering key (which it
	// keeps for good): its outcome moves the key on, in the settle's
	// transaction, never in a statement of its own (store's settlePlain).
	Keyed bool
}

// Claimed is a delivery a worker holds under a lease, its payload opened
// and verified against its digest.
type Claimed struct {
	Lease
	NotificationID string
	Endpoint       string
	Payload        []byte
	PayloadSHA256  string
	Profile        string
	KeyID          string
	Priority       int
	Deadline       time.Time
	SubscriptionID int64 // the subscription it was published to, 0 if none
	// Trace is the trace context of the transaction that enqueued it
	// (store.Config.Tracer), the zero TraceContext if none: each attempt's
	// span continues it and each attempt sends it on.
	Trace courier.TraceContext
	// Spared is how many of the delivery's earlier attempts were cut short
	// as their worker stopped (Outcome.SpareBudget): counted in Attempt,
	// they spent none of the budget. An attempt's place in the budget,
	// which it sends as ack.AttemptHeader, is Attempt less Spared.
	Spared int
	// Pass is which of the claim's transactions leased it, 0 for the
	// first: a claim that ended rows instead of leasing them claims again
	// in another, whose leases are stamped as it begins (see
	// ClaimParams.Began, called once per transaction, in order).
	Pass int
}

// BudgetAttempt is the attempt's place in the delivery's budget (see
// Spared): what it sends as ack.AttemptHeader, 1-based.
func (c Claimed) BudgetAttempt() int { return c.Attempt - c.Spared }

// Result is how an attempt ended, as the worker's policy decided.
type Result string

// Results.
const (
	Succeeded  Result = "succeeded"  // the receiver proved receipt
	Retry      Result = "retry"      // try again after RetryDelay
	Failed     Result = "failed"     // permanent: never retried
	Suppressed Result = "suppressed" // not sent: the delivery no longer applies
)

// Outcome is one attempt's outcome.
type Outcome struct {
	Lease      Lease
	Result     Result
	Code       courier.Code  // why, for every result but Succeeded
	HTTPStatus int           // the receiver's status, 0 when none: three digits at most, as HTTP/1 carries it (Settle refuses another)
	RemoteCode courier.Code  // the receiver's own code from its problem+json refusal, "" when none
	RetryDelay time.Duration // for Retry: how long until the next attempt
	AckSHA256  string        // for Succeeded: digest of the verified Ack ("" without one)
	Duration   time.Duration // how long the attempt took
	// SpareBudget, for a Retry, says the attempt spends none of the
	// delivery's budget: it is counted (attempts) and logged as any
	// attempt, and the budget grows by one, up to the bound of every
	// budget (1000 attempts), so even a last attempt leaves one more. Its
	// deadline still ends the delivery. A worker sets it on an attempt it
	// cut short as it stopped (code worker_stopped), which says nothing of
	// the delivery nor of its endpoint; a lease that ran out (a worker that
	// died) is counted in full, as the store reclaims it.
	SpareBudget bool
	// Refusal is the guard's error when Code is destination_forbidden:
	// its message names the reason class only (scheme, port, the kind of
	// address), for the worker's log line; it is never stored.
	Refusal error
	// Cause is what the transport said of an attempt that got no answer,
	// for the worker's log line: a socket, DNS, TLS or certificate error,
	// which names addresses and host names, never what the other side sent
	// nor the endpoint's path or credentials; nil when it said none of
	// those. For an attempt that could not be signed it is the error of
	// the SignerFor or Signer, as the configuration wrote it; for a 2xx
	// its profile refused (ack_invalid), whether the answer had a body and
	// which profile wanted an Ack, never the body. The worker's line gives
	// its text with every URL in it redacted, for the errors of a custom
	// Transport, a SignerFor or a Signer are not courier's. It is never
	// stored.
	Cause error
}

// Settled is what became of one Outcome.
type Settled struct {
	Status courier.Status // the delivery's new status
	Code   courier.Code   // its error code: the outcome's, or expired
	Err    error          // courier.CodeLeaseLost when the lease was void, courier.CodeInvalidArgument for an invalid outcome, else a database failure (not applied; try again)
	// Breaker is the move of the delivery's endpoint's circuit breaker
	// that this outcome made, the zero BreakerMove if it made none: one
	// outcome makes each move, so the worker that settled it logs it once.
	Breaker BreakerMove
}

// BreakerMove is an endpoint's circuit breaker moving From a state To
// another (store.EndpointState's), for the reason in Code; Until is when
// an open breaker lets its probe through.
type BreakerMove struct {
	From, To string
	Code     courier.Code
	Until    time.Time
}

// ErrClosed is in the chain of the error of every call on a Store that
// was closed (its code is database_unavailable): no write will land, so
// the worker does not try one again.
var ErrClosed = errors.New("the Store is closed")

var outboxOf func(store any) Outbox

// Register is called by package store, once, with the function that
// returns a *store.Store's side of the protocol.
func Register(f func(store any) Outbox) { outboxOf = f }

// For returns the protocol of s, a *store.Store.
func For(s any) Outbox { return outboxOf(s) }

package store

import (
	"cmp"
	"context"
	"math"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/internal/scrape"
)

// Defaults of BreakerConfig.
const (
	defaultBreakerThreshold    = 5
	defaultBreakerCooldown     = 30 * time.Second
	defaultBreakerDisableAfter = 72 * time.Hour
)

// BreakerConfig is the per-endpoint circuit breaker: after Threshold
// consecutive failed attempts (an answer, a 4xx too, ends the count) an
// endpoint is paused (open) for Cooldown,
// then one delivery probes it (half-open): success closes it, and so does
// any other answer that does not speak of its health (a 4xx: it is up);
// failure pauses it again, and a probe whose lease runs out unsettled is
// made again, as is one given back unsent or settled without an answer
// (the worker stopping, its signing failing), at the next claim. A probe
// is a lease like any other: it is made only when the endpoint has room
// for it (the claiming worker's client.Config.EndpointConcurrency, the
// endpoint's Limits, whose token it takes), and until it has, the
// endpoint stays open. Only the probe's outcome moves a half-open breaker (a
// failure of an attempt sent before the pause counts, its 4xx is not the
// probe's answer), and no other probe goes out while one is in flight; a
// success, the probe's or a late one, closes it. An open endpoint whose probe found
// nothing to send is probed again once a delivery of its own is due (the
// claim that meets it first parks it, the next probes with it). An endpoint failing for DisableAfter, or answering 410
// Gone, is disabled until an operator enables it (or, once nothing is
// left to send to it, Outbox.Prune deletes its record). Only failures that speak
// of the endpoint's health count: an answer of 5xx, 408/425 or 429,
// whatever code the worker's policy gave it, and any failure settled with
// one of client.DefaultClassify's codes for those, for a timeout or for a
// network error (receiver_unavailable, request_timeout, rate_limited,
// timeout, network_error). A failure without an answer and with another
// code is taken as not having reached the endpoint (the worker stopping,
// a request that could not be signed).
type BreakerConfig struct {
	Threshold int // At least 1. Defaults to 5.
	// Cooldown is how long an open endpoint is paused before its probe:
	// 1ms to MaxHorizon. No delivery lives longer than MaxHorizon, so a
	// longer pause would let every delivery of an endpoint whose breaker
	// opens expire unsent. Defaults to 30 seconds.
	Cooldown     time.Duration
	DisableAfter time.Duration // At least 1ms. Defaults to 72 hours.
}

// validate refuses a breaker that would misbehave: a negative Threshold or
// DisableAfter would open or disable an endpoint at its first failure, and
// a Cooldown past MaxHorizon would outlast every delivery it pauses.
func (c BreakerConfig) validate() error {
	switch {
	case c.Threshold < 1:
		return configError("Config.Breaker.Threshold must be at least 1")
	case c.Cooldown < time.Millisecond:
		return configError("Config.Breaker.Cooldown must be at least 1ms")
	case c.Cooldown > MaxHorizon:
		return configError("Config.Breaker.Cooldown must be at most MaxHorizon (30 days): no delivery waits longer for its endpoint")
	case c.DisableAfter < time.Millisecond:
		return configError("Config.Breaker.DisableAfter must be at least 1ms")
	}
	return nil
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Threshold == 0 {
		c.Threshold = defaultBreakerThreshold
	}
	if c.Cooldown == 0 {
		c.Cooldown = defaultBreakerCooldown
	}
	if c.DisableAfter == 0 {
		c.DisableAfter = defaultBreakerDisableAfter
	}
	return c
}

// EndpointState is where an endpoint's circuit breaker stands.
type EndpointState string

// Endpoint states.
const (
	EndpointClosed   EndpointState = "closed"    // healthy: deliveries flow
	EndpointOpen     EndpointState = "open"      // paused after failures, until the cool-down ends
	EndpointHalfOpen EndpointState = "half_open" // one probe delivery in flight
	EndpointDisabled EndpointState = "disabled"  // nothing is sent until an operator enables it
)

// EndpointHealth is an endpoint's breaker state, its limits and its load.
type EndpointHealth struct {
	Endpoint            string
	State               EndpointState
	ConsecutiveFailures int
	FailingSince        time.Time
	OpenUntil           time.Time
	Reason              courier.Code
	UpdatedAt           time.Time // of the breaker record; zero without one
	Limits              Limits    // set by SetLimits; zero for none
	// InFlight is how many of its deliveries are leased now, by every
	// worker.
	InFlight int
	// BlockedKeys is how many of its ordering keys a failed head holds
	// (OrderingOnFailure OrderingHoldKey; BlockedKeys lists them).
	BlockedKeys int
}

// Endpoints is the registry of endpoints: their health (the circuit
// breaker), their limits and their load.
//
// An endpoint is its URL with the scheme and host in lower case and
// without the scheme's default port (https://example.com/hook, not
// https://Example.com:443/hook); its userinfo, path and query are its own
// bytes, compared as they are. Every method given an endpoint, here and
// in the Outbox, Subscriptions and Contracts, takes any spelling of it and
// stores and reports that form. A database written before endpoints were
// normalized may hold deliveries, a breaker record or limits under another
// spelling. Given that spelling, Get, Enable, Disable, SetLimits and
// BlockedKeys act on what is stored under it too (Get shows it), as do
// Outbox.List (it lists the deliveries stored under it) and Outbox.Redrive
// (it moves them); List shows it apart until its deliveries are done; and a
// delivery enqueued or published under it is stored under it while that
// delivery's earlier enqueue, its ordering key's row, a breaker record or
// limits are, so that it is found rather than written twice, waits behind
// its key's earlier deliveries and keeps to the limits set for that
// spelling.
type Endpoints struct {
	s        *Store
	resolved resolvedRefs // see Resolve
}

// Get returns an endpoint's health, limits and load; an endpoint never
// failing is closed. One that is not an absolute http or https URL is
// CodeInvalidArgument.
func (e *Endpoints) Get(ctx context.Context, endpoint string) (EndpointHealth, error) {
	if !validEndpoint(endpoint) {
		return EndpointHealth{}, invalidEndpoint("Get endpoint")
	}
	names, err := e.s.spellings(ctx, endpoint)
	if err != nil {
		return EndpointHealth{}, err
	}
	endpoint = names[len(names)-1] // the spelling given, when something is stored under it
	h, err := e.get(ctx, e.s.db, endpoint)
	if err != nil {
		return EndpointHealth{}, err
	}
	load, err := getRow[endpointLoad](ctx, e.s, e.s.db, "endpoint_load", map[string]any{"endpoint": endpoint})
	if err != nil {
		return EndpointHealth{}, err
	}
	load.apply(&h)
	return h, nil
}

func (l endpointLoad) apply(h *EndpointHealth) {
	h.Limits = Limits{MaxInFlight: l.MaxInFlight, Rate: l.Rate, Burst: l.Burst}
	h.InFlight, h.BlockedKeys = l.InFlight, l.BlockedKeys
}

// lockOrder is the order in which a transaction takes the breakers'
// locks (endpoint_lock) of several endpoints, and their rows under them:
// by the lock's key, then by endpoint, given each endpoint's key as the
// statement that named it returns it (lock_key). Two endpoints may share
// a key, and so one lock: in endpoint order alone, a transaction needing
// x and y and another needing y and z, x's key z's, would each take one
// lock and wait for the other's.
func lockOrder(aKey int64, a string, bKey int64, b string) int {
	return cmp.Or(cmp.Compare(aKey, bKey), cmp.Compare(a, b))
}

// lockBreaker takes endpoint's breaker lock (endpoint_lock) until tx
// ends: every change of a breaker record is made under it. A transaction
// that takes several takes them in lockOrder.
func (s *Store) lockBreaker(ctx context.Context, tx DBTX, endpoint string) error {
	_, err := s.exec(ctx, tx, "endpoint_lock", map[string]any{"endpoint": endpoint})
	return err
}

// lockAndGet is get for a transaction that writes the breaker record next:
// until tx ends, no other transaction does so for the endpoint in between.
func (e *Endpoints) lockAndGet(ctx context.Context, tx DBTX, endpoint string) (EndpointHealth, error) {
	if err := e.s.lockBreaker(ctx, tx, endpoint); err != nil {
		return EndpointHealth{}, err
	}
	return e.get(ctx, tx, endpoint)
}

func (e *Endpoints) get(ctx context.Context, x DBTX, endpoint string) (EndpointHealth, error) {
	r, err := getRow[endpointRow](ctx, e.s, x, "endpoint_get", map[string]any{"endpoint": endpoint})
	switch {
	case courier.CodeOf(err) == courier.CodeNotFound:
		return EndpointHealth{Endpoint: endpoint, State: EndpointClosed}, nil
	case err != nil:
		return EndpointHealth{}, err
	}
	return r.health(), nil
}

// List returns every endpoint with something to show, by URL: a breaker
// not plainly healthy (failing, open, half open or disabled), limits,
// deliveries in flight or blocked ordering keys. It reads and returns
// them all at once, and costs in step with them: an outbox may keep tens
// of thousands (a disabled endpoint stays until an operator enables it or
// a prune removes it), some tens of megabytes of allocation at 50,000.
// The Admin reads a page at a time instead.
func (e *Endpoints) List(ctx context.Context) ([]EndpointHealth, error) {
	var rows []endpointRow
	if err := e.s.selectRows(ctx, e.s.db, "endpoint_list", map[string]any{"every": true, "limit": int64(math.MaxInt64)}, &rows); err != nil {
		return nil, err
	}
	return each(rows, endpointRow.listed), nil
}

// A metrics scrape's read of the endpoints (package internal/scrape) is
// implemented here and handed to contrib/promcourier.
func init() {
	scrape.Register(func(s any) scrape.Reader { return s.(*Store).Endpoints.scrape })
}

// scrape reads what a metrics scrape shows of the endpoints, listing at
// most limit of those with series of their own: the states and blocked
// keys are counted in the database, and only the endpoints listed are
// read, so that an outbox keeping tens of thousands of disabled endpoints
// costs a scrape little more than one keeping none. The figures are read
// from one snapshot, as Health's.
func (e *Endpoints) scrape(ctx context.Context, limit int) (scrape.Endpoints, error) {
	var out scrape.Endpoints
	err := e.s.inSnapshot(ctx, "endpoint_list", func(tx DBTX) error {
		states, err := e.states(ctx, tx)
		if err != nil {
			return err
		}
		out.States = states
		if err := e.s.scan(ctx, tx, "endpoint_blocked_keys", nil, &out.BlockedKeys); err != nil {
			return err
		}
		var rows []endpointRow
		if err := e.s.selectRows(ctx, tx, "endpoint_list", map[string]any{"every": false, "limit": limit}, &rows); err != nil {
			return err
		}
		for _, r := range rows {
			out.Listed = append(out.Listed, scrape.Endpoint{URL: r.Endpoint, State: r.State, InFlight: r.InFlight,
				MaxInFlight: r.MaxInFlight, Rate: r.Rate, BlockedKeys: r.BlockedKeys})
		}
		return nil
	})
	if err != nil {
		return scrape.Endpoints{}, err
	}
	return out, nil
}

func (r endpointRow) health() EndpointHealth {
	return EndpointHealth{
		Endpoint: r.Endpoint, State: EndpointState(r.State), ConsecutiveFailures: r.ConsecutiveFailures,
		FailingSince: nullMicros(r.FailingSince), OpenUntil: nullMicros(r.OpenUntil),
		Reason: courier.Code(r.Reason.String), UpdatedAt: fromMicros(r.UpdatedAt),
	}
}

// listed is the endpoint of a row that a listing read with its load.
func (r endpointRow) listed() EndpointHealth {
	h := r.health()
	r.endpointLoad.apply(&h)
	return h
}

// Enable closes an endpoint's breaker (an operator re-enabling it): its
// pending deliveries flow again. Failed ones stay failed; see Redrive. An
// endpoint that is not an absolute http or https URL is
// CodeInvalidArgument. A write the database refuses by a rule of its own
// (a trigger, a CHECK courier did not make) is CodeInternal: the
// endpoint was not at fault.
func (e *Endpoints) Enable(ctx context.Context, endpoint string) error {
	held := false
	err := e.operate(ctx, "Enable", endpoint, func(tx *sqlx.Tx, old EndpointHealth) error {
		if _, err := e.s.exec(ctx, tx, "endpoint_delete", map[string]any{"endpoint": old.Endpoint}); err != nil {
			return err
		}
		if old.State != EndpointClosed {
			held = true
			e.s.emit(tx, old.Endpoint, old.State, EndpointClosed, "")
		}
		return nil
	})
	if err == nil && held {
		e.s.wake(ctx)
	}
	return err
}

// Disable stops all sending to an endpoint until Enable. It may be given
// an endpoint with no deliveries yet, to hold back those to come; one that
// is not an absolute http or https URL is CodeInvalidArgument. Its
// deliveries wait, and still end at their deadline (failed, expired) as
// every delivery does. Outbox.Prune keeps its record until Enable,
// unless the endpoint had been failing for Config.Breaker.DisableAfter
// when it was first disabled, as the breaker would have disabled it: a
// Disable of an endpoint already disabled keeps the time it was
// disabled. A write the database refuses by a rule of its own (a
// trigger, a CHECK courier did not make) is CodeInternal: the endpoint
// was not at fault.
func (e *Endpoints) Disable(ctx context.Context, endpoint string) error {
	return e.operate(ctx, "Disable", endpoint, func(tx *sqlx.Tx, old EndpointHealth) error {
		from, now := old.State, e.s.now()
		if from == EndpointDisabled {
			// Stamped now, the record of an endpoint failing since it
			// was first disabled would read as disabled after failing
			// for DisableAfter, as the breaker disables, and
			// Outbox.Prune would delete it.
			now = micros(old.UpdatedAt)
		}
		old.State, old.Reason = EndpointDisabled, courier.CodeEndpointDisabled
		_, err := e.put(ctx, tx, old, now, from)
		return err
	})
}

// operate runs an operator's change (the method named verb) of endpoint's
// breaker record in one transaction: change is given the record, locked
// until the transaction ends. It does so for each of the endpoint's
// spellings (see spellings), in a transaction each, so that deliveries
// stored under the one the operator named before endpoints were
// normalized are held or released with the others. A write the database
// refuses is CodeInternal (see refusedByTheDatabase).
func (e *Endpoints) operate(ctx context.Context, verb, endpoint string, change func(tx *sqlx.Tx, old EndpointHealth) error) error {
	if !validEndpoint(endpoint) {
		return invalidEndpoint(verb + " endpoint")
	}
	names, err := e.s.spellings(ctx, endpoint)
	if err != nil {
		return err
	}
	for _, spelled := range names {
		err := e.s.inTx(ctx, func(tx *sqlx.Tx) error {
			old, err := e.lockAndGet(ctx, tx, spelled)
			if err != nil {
				return err
			}
			return change(tx, old)
		})
		if err != nil {
			return refusedByTheDatabase(err)
		}
	}
	return nil
}

// put writes h, an endpoint's breaker record, and reports its move from
// the state from to h.State, for h.Reason, if it moved (EventEndpoint).
func (e *Endpoints) put(ctx context.Context, tx DBTX, h EndpointHealth, now int64, from EndpointState) (protocol.BreakerMove, error) {
	_, err := e.s.exec(ctx, tx, "endpoint_put", map[string]any{
		"endpoint": h.Endpoint, "state": string(h.State), "consecutive_failures": h.ConsecutiveFailures,
		"failing_since": nullable(micros(h.FailingSince)), "open_until": nullable(micros(h.OpenUntil)),
		"reason": nullable(string(h.Reason)), "now": now,
	})
	if err != nil || from == h.State {
		return protocol.BreakerMove{}, err
	}
	return e.s.moved(tx, h.Endpoint, from, h), nil
}

// moved reports the breaker of url moving from a state to h's, made in
// tx: to the Hook (emit), and as the move returned, which the settle that
// made it gives its worker to log.
func (s *Store) moved(tx DBTX, url string, from EndpointState, h EndpointHealth) protocol.BreakerMove {
	s.emit(tx, url, from, h.State, h.Reason)
	m := protocol.BreakerMove{From: string(from), To: string(h.State), Code: h.Reason}
	if h.State == EndpointOpen {
		m.Until = h.OpenUntil
	}
	return m
}

// healthCodes are the failures that count against an endpoint's health.
var healthCodes = map[courier.Code]bool{
	courier.CodeReceiverUnavailable: true, courier.CodeRequestTimeout: true, courier.CodeRateLimited: true,
	courier.CodeTimeout: true, courier.CodeNetwork: true,
}

// healthStatus reports whether an answer's status speaks of the
// endpoint's health (5xx, 408, 425, 429), whatever code the worker's
// policy gave it: a Classify of one's own may name a 503 "maintenance".
func healthStatus(status int) bool {
	return status >= 500 && status < 600 || status == 408 || status == 425 || status == 429
}

// speaksOfHealth reports whether a failed outcome counts against its
// endpoint's health, or ends it (endpoint_gone): one that does changes a
// breaker, even an endpoint's that has none yet. A success, and any
// other failure, change only a breaker that exists (record).
func speaksOfHealth(oc protocol.Outcome) bool {
	return oc.Result != protocol.Succeeded &&
		(oc.Code == courier.CodeEndpointGone || healthCodes[oc.Code] || healthStatus(oc.HTTPStatus))
}

// record applies one settled attempt to its endpoint's breaker; tracked
// reports whether the endpoint has a row (one without is healthy). wrote
// reports whether it now has one written in this transaction, and moved
// the breaker's move the attempt made, if it made one.
func (e *Endpoints) record(ctx context.Context, tx DBTX, now int64, endpoint string, tracked bool, oc protocol.Outcome) (wrote bool, moved protocol.BreakerMove, err error) {
	// An HTTP answer that is neither a success nor about the endpoint's
	// health (a 4xx) still shows it is up: it closes a half-open breaker,
	// its probe answered, and ends a closed one's streak of failures (a
	// failure days later starts a new one, it does not disable the
	// endpoint as failing all along); an open breaker, and a half-open one
	// answered by another attempt than its probe, wait for the probe. A
	// success closes any breaker but a disabled one.
	// An outcome without an answer (never sent, cut short) says nothing of
	// the endpoint's health; if it was a half-open breaker's probe, the
	// next claim probes again (endpoint_probe_again).
	gone := oc.Code == courier.CodeEndpointGone
	other := oc.Result != protocol.Succeeded && !speaksOfHealth(oc)
	answered := other && oc.HTTPStatus != 0
	switch {
	case other && !answered && tracked:
		// Under its lock, as every settle's change of the breaker.
		if err := e.s.lockBreaker(ctx, tx, endpoint); err != nil {
			return false, moved, err
		}
		_, err := e.s.exec(ctx, tx, "endpoint_probe_again", map[string]any{
			"endpoint": endpoint, "probe_until": micros(oc.Lease.ExpiresAt), "now": now,
		})
		return false, moved, err
	case other && !answered:
		return false, moved, nil // not about the endpoint's health
	case !tracked && (oc.Result == protocol.Succeeded || answered):
		return false, moved, nil // the common case: healthy stays healthy, nothing stored
	}
	h, err := e.lockAndGet(ctx, tx, endpoint)
	if err != nil {
		return false, moved, err
	}
	from := h.State
	cfg := e.s.cfg.Breaker
	// The probe is the one attempt whose lease ends at a half-open
	// breaker's OpenUntil; any other outcome there is of an attempt leased
	// before the breaker opened, settled late.
	probe := h.State == EndpointHalfOpen && oc.Lease.ExpiresAt.Equal(h.OpenUntil)
	switch {
	case h.State == EndpointDisabled:
		return false, moved, nil // only an operator brings it back
	case answered && (h.State == EndpointOpen || h.State == EndpointHalfOpen && !probe):
		return false, moved, nil // the probe decides
	case oc.Result == protocol.Succeeded || answered:
		if from == EndpointClosed && h.ConsecutiveFailures == 0 {
			return false, moved, nil // healthy stays healthy
		}
		if _, err := e.s.exec(ctx, tx, "endpoint_delete", map[string]any{"endpoint": endpoint}); err != nil {
			return false, moved, err
		}
		if from != EndpointClosed {
			moved = e.s.moved(tx, endpoint, from, EndpointHealth{State: EndpointClosed})
		}
		return false, moved, nil
	case gone:
		h.State, h.Reason = EndpointDisabled, courier.CodeEndpointGone
	default:
		h.ConsecutiveFailures++
		if h.FailingSince.IsZero() {
			h.FailingSince = fromMicros(now)
		}
		switch {
		case fromMicros(now).Sub(h.FailingSince) >= cfg.DisableAfter:
			h.State, h.Reason = EndpointDisabled, courier.CodeEndpointDisabled
		case h.State == EndpointHalfOpen && !probe:
			// A late failure counts; the probe in flight decides, and no
			// other goes out before its lease ends. A probe given back or
			// settled without an answer left OpenUntil at the record's
			// UpdatedAt, which tells a claim that nothing ran out (see
			// endpoint_probes): both move to now, so that it still does.
			if h.OpenUntil.Equal(h.UpdatedAt) {
				h.OpenUntil = fromMicros(now)
			}
		case h.State == EndpointHalfOpen || h.ConsecutiveFailures >= cfg.Threshold:
			h.State, h.Reason, h.OpenUntil = EndpointOpen, oc.Code, fromMicros(now).Add(cfg.Cooldown)
		}
	}
	if h.State == EndpointClosed {
		h.Reason = oc.Code // counting failures below the threshold
	}
	moved, err = e.put(ctx, tx, h, now, from)
	return true, moved, err
}

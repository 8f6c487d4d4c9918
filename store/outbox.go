package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
)

// DefaultProfile is the Ack profile of a delivery enqueued without one:
// courier's own Ack over the exact bytes sent.
const DefaultProfile = "courier"

// Limits on what Enqueue accepts.
const (
	MaxPayloadSize  = 4 << 20
	MaxEndpointSize = 2048
	MaxClaimBatch   = 1000
)

// Outbox is the sender side's table of deliveries.
type Outbox struct{ s *Store }

// EnqueueParams describes one delivery: a notification to one endpoint.
type EnqueueParams struct {
	// NotificationID is the notification's identity, the receiver's dedupe
	// key: 1–256 of A-Z a-z 0-9 _ . : -.
	NotificationID string
	// Endpoint is the URL the notification is delivered to.
	Endpoint string
	// Payload is the exact bytes every attempt sends.
	Payload []byte
	// Profile names the Ack the receiver must answer with. Defaults to
	// DefaultProfile.
	Profile string
	// KeyID names the signing configuration the worker signs with (an id,
	// never key material). Optional.
	KeyID string
	// Priority orders claims: lower first. Defaults to 0.
	Priority int
	// MaxAttempts is the attempt budget. Defaults to the Store's.
	MaxAttempts int
	// NotBefore delays the first attempt. Defaults to now.
	NotBefore time.Time
	// Deadline ends retries: an attempt that would come later fails the
	// delivery with code expired. Defaults to now plus the Store's
	// RetryHorizon.
	Deadline time.Time
}

// Enqueued is the result of an enqueue.
type Enqueued struct {
	ID      int64 // the delivery's id
	Existed bool  // the same delivery was already enqueued; nothing was written
}

// Enqueue adds a delivery inside the caller's transaction tx, so it exists
// exactly when the caller's own writes commit. Enqueueing the same
// (NotificationID, Endpoint) again with the same payload and settings is a
// no-op that returns the existing row; with a different payload or
// settings it is ErrIdempotencyCollision and the stored row is unchanged.
func (o *Outbox) Enqueue(ctx context.Context, tx DBTX, p EnqueueParams) (Enqueued, error) {
	return o.enqueue(ctx, tx, p, 0, "")
}

// enqueue is Enqueue for a delivery of a subscription (subID > 0) or not.
func (o *Outbox) enqueue(ctx context.Context, tx DBTX, p EnqueueParams, subID int64, fingerprint string) (Enqueued, error) {
	now := o.s.now()
	args, err := o.enqueueArgs(p, now)
	if err != nil {
		return Enqueued{}, err
	}
	args["subscription_id"], args["subscription_fingerprint"] = nullable(subID), nullable(fingerprint)
	q := o.s.q("enqueue")
	id, err := o.s.dialect.insert(ctx, tx, q, args)
	switch {
	case err == nil:
		o.s.observe(Event{Kind: EventEnqueued, N: 1, Status: courier.StatusPending})
		return Enqueued{ID: id}, nil
	case !isNoRows(err):
		return Enqueued{}, o.s.dialect.interpret("enqueue", err)
	}
	return o.existing(ctx, tx, args)
}

// EnqueueMany enqueues several deliveries in the caller's transaction, with
// Enqueue's rules for each. On error nothing is known to be written: the
// caller rolls back.
func (o *Outbox) EnqueueMany(ctx context.Context, tx DBTX, ps []EnqueueParams) ([]Enqueued, error) {
	out := make([]Enqueued, len(ps))
	for i, p := range ps {
		e, err := o.Enqueue(ctx, tx, p)
		if err != nil {
			return nil, fmt.Errorf("delivery %d: %w", i, err)
		}
		out[i] = e
	}
	return out, nil
}

func (o *Outbox) enqueueArgs(p EnqueueParams, now int64) (map[string]any, error) {
	cfg := o.s.cfg
	if p.Profile == "" {
		p.Profile = DefaultProfile
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = cfg.MaxAttempts
	}
	next := now
	if !p.NotBefore.IsZero() {
		next = p.NotBefore.UnixMicro()
	}
	deadline := now + cfg.RetryHorizon.Microseconds()
	if !p.Deadline.IsZero() {
		deadline = p.Deadline.UnixMicro()
	}
	switch {
	case !validToken(p.NotificationID):
		return nil, invalidArgument("NotificationID must be 1-256 of A-Z a-z 0-9 _ . : -")
	case p.Endpoint == "" || len(p.Endpoint) > MaxEndpointSize:
		return nil, invalidArgument("Endpoint must be 1-2048 bytes")
	case len(p.Payload) == 0 || len(p.Payload) > MaxPayloadSize:
		return nil, invalidArgument("Payload must be 1 byte to 4 MiB")
	case p.MaxAttempts < 1 || p.MaxAttempts > 1000:
		return nil, invalidArgument("MaxAttempts must be within 1..1000")
	case deadline < next:
		return nil, invalidArgument("Deadline is before the first attempt")
	}
	sum := sha256.Sum256(p.Payload)
	stored, keyID, err := cfg.Encryption.seal(p.Payload, p.NotificationID, p.Endpoint)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"notification_id": p.NotificationID,
		"endpoint":        p.Endpoint,
		"payload":         stored,
		"payload_key_id":  keyID,
		"payload_sha256":  hex.EncodeToString(sum[:]),
		"profile":         p.Profile,
		"key_id":          p.KeyID,
		"priority":        p.Priority,
		"max_attempts":    p.MaxAttempts,
		"next_attempt_at": next,
		"deadline":        deadline,
		"now":             now,
	}, nil
}

// existing resolves an enqueue that inserted nothing: the same delivery is
// a no-op, anything else a collision.
func (o *Outbox) existing(ctx context.Context, tx DBTX, args map[string]any) (Enqueued, error) {
	q := o.s.q("enqueue_existing")
	var (
		id                    int64
		sum, profile, keyID   string
		maxAttempts, priority int
	)
	err := tx.QueryRowContext(ctx, q.text, q.args(args)...).Scan(&id, &sum, &profile, &keyID, &maxAttempts, &priority)
	if err != nil {
		return Enqueued{}, o.s.dialect.interpret("enqueue_existing", err)
	}
	if sum != args["payload_sha256"] || profile != args["profile"] || keyID != args["key_id"] ||
		maxAttempts != args["max_attempts"] || priority != args["priority"] {
		return Enqueued{}, courier.ErrIdempotencyCollision
	}
	return Enqueued{ID: id, Existed: true}, nil
}

// validToken reports whether s is 1–256 of A-Z a-z 0-9 _ . : -.
func validToken(s string) bool {
	if len(s) < 1 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return false
		}
	}
	return true
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
}

// Claimed is a delivery a worker holds under a lease.
type Claimed struct {
	Lease
	NotificationID string
	Endpoint       string
	Payload        []byte
	PayloadSHA256  string
	Profile        string
	KeyID          string
	Priority       int
	MaxAttempts    int
	Deadline       time.Time
	CreatedAt      time.Time
	SubscriptionID int64 // the subscription it was published to, 0 if none

	payloadKeyID            string // the key that sealed Payload, until it is opened
	subscriptionFingerprint string // the subscription's fingerprint at enqueue
}

// ClaimParams says who claims how many for how long.
type ClaimParams struct {
	Owner string        // the worker's name, recorded with its leases
	Limit int           // at most this many deliveries, 1..MaxClaimBatch
	Lease time.Duration // how long the leases last
}

// Claim leases up to p.Limit due deliveries, in order of priority, due time
// and age, each with a random token. Expired leases are reclaimed first
// (logged as lease_expired attempts). A claimed row whose payload no longer
// matches its digest is quarantined with code integrity_mismatch instead of
// being returned.
func (o *Outbox) Claim(ctx context.Context, p ClaimParams) ([]Claimed, error) {
	switch {
	case p.Owner == "" || len(p.Owner) > 256:
		return nil, invalidArgument("ClaimParams.Owner must be 1-256 bytes")
	case p.Limit < 1 || p.Limit > MaxClaimBatch:
		return nil, invalidArgument("ClaimParams.Limit must be within 1..1000")
	case p.Lease < time.Millisecond:
		return nil, invalidArgument("ClaimParams.Lease must be at least 1ms")
	}
	var claimed []Claimed
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		claimed = claimed[:0]
		now := o.s.now()
		if err := o.reclaim(ctx, tx, now); err != nil {
			return err
		}
		args := map[string]any{"owner": p.Owner, "now": now, "lease_expires_at": now + p.Lease.Microseconds(), "limit": p.Limit}
		var err error
		if claimed, err = o.claimProbes(ctx, tx, args, p.Limit, claimed); err != nil {
			return err
		}
		if claimed, err = o.claimByPriority(ctx, tx, args, p.Limit, claimed); err != nil {
			return err
		}
		if err := o.quarantineTampered(ctx, tx, now, &claimed); err != nil {
			return err
		}
		return o.suppressChanged(ctx, tx, now, &claimed)
	})
	if err == nil && len(claimed) > 0 {
		o.s.observe(Event{Kind: EventClaimed, N: len(claimed), Status: courier.StatusLeased})
	}
	return claimed, err
}

// reclaim ends the leases that expired: their attempt is logged, and the
// row waits for a retry (or fails, its budget or horizon spent).
func (o *Outbox) reclaim(ctx context.Context, tx *sqlx.Tx, now int64) error {
	args := map[string]any{"now": now}
	res, err := o.s.exec(ctx, tx, "log_expired_leases", args)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	_, err = o.s.exec(ctx, tx, "reclaim_expired_leases", args)
	return err
}

func scanClaims(rows *sql.Rows, dst []Claimed) ([]Claimed, error) {
	defer rows.Close()
	for rows.Next() {
		var c Claimed
		var deadline, leasedAt, expires, created int64
		var subID sql.NullInt64
		var fingerprint sql.NullString
		err := rows.Scan(&c.DeliveryID, &c.NotificationID, &c.Endpoint, &c.Payload, &c.payloadKeyID, &c.PayloadSHA256,
			&c.Profile, &c.KeyID, &c.Priority, &c.Attempt, &c.MaxAttempts, &deadline, &c.Owner, &c.Token,
			&leasedAt, &expires, &created, &subID, &fingerprint)
		if err != nil {
			return nil, err
		}
		c.SubscriptionID, c.subscriptionFingerprint = subID.Int64, fingerprint.String
		c.Deadline, c.LeasedAt, c.ExpiresAt, c.CreatedAt = fromMicros(deadline), fromMicros(leasedAt), fromMicros(expires), fromMicros(created)
		dst = append(dst, c)
	}
	return dst, rows.Err()
}

// quarantineTampered opens each claimed payload and re-verifies it
// against its digest, and takes the rows that fail out of circulation.
func (o *Outbox) quarantineTampered(ctx context.Context, tx *sqlx.Tx, now int64, claimed *[]Claimed) error {
	kept := (*claimed)[:0]
	for _, c := range *claimed {
		plain, err := o.s.cfg.Encryption.open(c.Payload, c.payloadKeyID, c.NotificationID, c.Endpoint)
		if err != nil {
			if err := o.quarantine(ctx, tx, now, c.Lease, courier.CodePayloadUnreadable); err != nil {
				return err
			}
			continue
		}
		c.Payload, c.payloadKeyID = plain, ""
		if !digestMatches(plain, c.PayloadSHA256) {
			if err := o.quarantine(ctx, tx, now, c.Lease, courier.CodeIntegrity); err != nil {
				return err
			}
			continue
		}
		kept = append(kept, c)
	}
	*claimed = kept
	return nil
}

// claimByPriority claims up to limit due deliveries (counting those in
// dst), priority by priority, lowest first.
func (o *Outbox) claimByPriority(ctx context.Context, tx *sqlx.Tx, args map[string]any, limit int, dst []Claimed) ([]Claimed, error) {
	if len(dst) >= limit {
		return dst, nil
	}
	rows, err := o.s.query(ctx, tx, "due_priorities", nil)
	if err != nil {
		return nil, err
	}
	var priorities []int
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			rows.Close()
			return nil, o.s.dialect.interpret("due_priorities", err)
		}
		priorities = append(priorities, p)
	}
	rows.Close()
	for _, p := range priorities {
		if len(dst) >= limit {
			break
		}
		args["priority"], args["limit"] = p, limit-len(dst)
		rows, err := o.s.query(ctx, tx, "claim", args)
		if err != nil {
			return nil, err
		}
		if dst, err = scanClaims(rows, dst); err != nil {
			return nil, o.s.dialect.interpret("claim", err)
		}
	}
	return dst, nil
}

// claimProbes claims one delivery for each endpoint whose breaker
// cool-down ended: the probe that decides whether it closes again.
func (o *Outbox) claimProbes(ctx context.Context, tx *sqlx.Tx, args map[string]any, limit int, dst []Claimed) ([]Claimed, error) {
	rows, err := o.s.query(ctx, tx, "endpoint_probes", map[string]any{"now": args["now"], "probe_until": args["lease_expires_at"]})
	if err != nil {
		return nil, err
	}
	var endpoints []string
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			rows.Close()
			return nil, o.s.dialect.interpret("endpoint_probes", err)
		}
		endpoints = append(endpoints, e)
	}
	rows.Close()
	for _, e := range endpoints {
		before := len(dst)
		if len(dst) < limit {
			probeArgs := map[string]any{"owner": args["owner"], "now": args["now"], "lease_expires_at": args["lease_expires_at"], "endpoint": e}
			rows, err := o.s.query(ctx, tx, "claim_probe", probeArgs)
			if err != nil {
				return nil, err
			}
			if dst, err = scanClaims(rows, dst); err != nil {
				return nil, o.s.dialect.interpret("claim_probe", err)
			}
		}
		if len(dst) == before { // nothing due, or no room: probe later
			if _, err := o.s.exec(ctx, tx, "endpoint_probe_idle", map[string]any{"endpoint": e, "now": args["now"]}); err != nil {
				return nil, err
			}
			continue
		}
		o.s.emit(EndpointEvent{Endpoint: e, From: EndpointOpen, To: EndpointHalfOpen})
	}
	return dst, nil
}

// suppressChanged takes out the claimed deliveries whose subscription was
// disabled or changed what sending depends on since they were enqueued.
func (o *Outbox) suppressChanged(ctx context.Context, tx *sqlx.Tx, now int64, claimed *[]Claimed) error {
	kept := (*claimed)[:0]
	for _, c := range *claimed {
		if c.SubscriptionID != 0 {
			q := o.s.q("subscription_state")
			var fingerprint string
			var active bool
			err := tx.QueryRowContext(ctx, q.text, q.args(map[string]any{"id": c.SubscriptionID})...).Scan(&fingerprint, &active)
			if err != nil && !isNoRows(err) {
				return o.s.dialect.interpret(q.name, err)
			}
			if err != nil || !active || fingerprint != c.subscriptionFingerprint {
				if _, err := o.s.exec(ctx, tx, "suppress", map[string]any{"id": c.DeliveryID, "token": c.Token, "code": string(courier.CodeSubscriptionChanged), "now": now}); err != nil {
					return err
				}
				if err := o.logAttempts(ctx, tx, now, newAttemptArg(Outcome{Lease: c.Lease, Code: courier.CodeSubscriptionChanged}, "suppressed")); err != nil {
					return err
				}
				continue
			}
		}
		kept = append(kept, c)
	}
	*claimed = kept
	return nil
}

// digestMatches compares payload's SHA-256 with a stored hex digest.
func digestMatches(payload []byte, hexDigest string) bool {
	sum := sha256.Sum256(payload)
	var want [sha256.Size]byte
	_, err := hex.Decode(want[:], []byte(hexDigest))
	return err == nil && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

func (o *Outbox) quarantine(ctx context.Context, tx *sqlx.Tx, now int64, l Lease, code courier.Code) error {
	if _, err := o.s.exec(ctx, tx, "quarantine", map[string]any{"id": l.DeliveryID, "token": l.Token, "code": string(code), "now": now}); err != nil {
		return err
	}
	return o.logAttempts(ctx, tx, now, newAttemptArg(Outcome{Lease: l, Code: code}, "quarantined"))
}

// Result is how an attempt ended, as a worker reports it.
type Result string

// Results a worker reports.
const (
	ResultSucceeded  Result = "succeeded"  // the receiver proved receipt
	ResultRetry      Result = "retry"      // try again after a backoff
	ResultFailed     Result = "failed"     // permanent: never retried
	ResultSuppressed Result = "suppressed" // not sent: the delivery no longer applies
)

// Outcome is one settled attempt.
type Outcome struct {
	Lease      Lease
	Result     Result
	Code       courier.Code  // why, for every result but succeeded
	HTTPStatus int           // the receiver's status, 0 when none
	RetryAfter time.Duration // the receiver's Retry-After, for retries
	AckSHA256  string        // digest of the verified Ack, for successes
	Duration   time.Duration // how long the attempt took
}

// Settled is what became of one Outcome.
type Settled struct {
	Status courier.Status // the delivery's new status
	Code   courier.Code   // its error code: the outcome's, or expired
	Err    error          // ErrLeaseLost when the lease was void
}

// Settle records outcomes in one transaction. Each is fenced by its lease:
// if the lease expired or another worker holds the row, that outcome is not
// applied and its Settled.Err is a lease-lost error, so a stale worker never
// overwrites a newer outcome. A retry past the delivery's attempt budget or
// deadline fails it instead. The returned error is for the batch as a whole
// (database trouble); nothing was applied then.
//
// The outcomes are applied by one statement and logged by another,
// however many there are.
func (o *Outbox) Settle(ctx context.Context, outcomes ...Outcome) ([]Settled, error) {
	for _, oc := range outcomes {
		if err := oc.validate(); err != nil {
			return nil, err
		}
	}
	out := make([]Settled, len(outcomes))
	err := o.s.inTx(ctx, func(tx *sqlx.Tx) error {
		now := o.s.now()
		for _, batch := range distinctDeliveries(outcomes) {
			if err := o.settle(ctx, tx, now, outcomes, batch, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, st := range out {
		if st.Err == nil {
			o.s.observe(Event{Kind: EventSettled, N: 1, Status: st.Status, Code: st.Code})
		}
	}
	return out, nil
}

func (oc Outcome) validate() error {
	switch oc.Result {
	case ResultSucceeded:
		return nil
	case ResultRetry, ResultFailed, ResultSuppressed:
		if oc.Code == "" {
			return invalidArgument("Outcome.Code is required for " + string(oc.Result))
		}
		return nil
	}
	return invalidArgument("Outcome.Result is unknown")
}

// distinctDeliveries splits the indexes of outcomes into batches in which
// no delivery appears twice (one statement settles a batch, and matches its
// rows by delivery). Almost always there is one batch.
func distinctDeliveries(outcomes []Outcome) [][]int {
	var batches [][]int
	seen := make(map[int64]int, len(outcomes)) // delivery -> outcomes so far
	for i, oc := range outcomes {
		n := seen[oc.Lease.DeliveryID]
		seen[oc.Lease.DeliveryID] = n + 1
		if n == len(batches) {
			batches = append(batches, nil)
		}
		batches[n] = append(batches[n], i)
	}
	return batches
}

// settleArg is one outcome as the settle statement reads it from its JSON
// :batch parameter.
type settleArg struct {
	ID     int64   `json:"id"`
	Token  string  `json:"token"`
	Result Result  `json:"result"`
	Code   *string `json:"code"`
	NextAt int64   `json:"next_at"`
	HTTP   *int    `json:"http"`
	Ack    *string `json:"ack"`
}

// settled is a row the settle statement changed.
type settled struct {
	status   courier.Status
	code     sql.NullString
	endpoint string
	tracked  bool // the endpoint has a breaker row
}

// settle applies outcomes[i] for every i in batch (distinct deliveries),
// logs the attempts and updates the endpoints' breakers, filling out.
func (o *Outbox) settle(ctx context.Context, tx *sqlx.Tx, now int64, outcomes []Outcome, batch []int, out []Settled) error {
	args := make([]settleArg, len(batch))
	for j, i := range batch {
		oc := outcomes[i]
		a := settleArg{ID: oc.Lease.DeliveryID, Token: oc.Lease.Token, Result: oc.Result}
		if oc.Code != "" {
			a.Code = ptr(string(oc.Code))
		}
		if oc.HTTPStatus != 0 {
			a.HTTP = ptr(oc.HTTPStatus)
		}
		switch oc.Result {
		case ResultRetry:
			a.NextAt = now + o.s.cfg.Backoff.Delay(oc.Lease.Attempt, oc.RetryAfter).Microseconds()
		case ResultSucceeded:
			a.Ack = ptr(oc.AckSHA256) // "" for profiles without an Ack
		}
		args[j] = a
	}
	rows, err := o.s.query(ctx, tx, "settle", map[string]any{"batch": jsonArg(args), "now": now})
	if err != nil {
		return err
	}
	changed := make(map[int64]settled, len(batch))
	err = scanRows(rows, func() error {
		var id int64
		var r settled
		if err := rows.Scan(&id, &r.status, &r.code, &r.endpoint, &r.tracked); err != nil {
			return err
		}
		changed[id] = r
		return nil
	})
	if err != nil {
		return o.s.dialect.interpret("settle", err)
	}

	logged := make([]attemptArg, 0, len(batch))
	written := make(map[string]bool) // endpoints given a breaker row by this batch
	for _, i := range batch {
		oc := outcomes[i]
		r, ok := changed[oc.Lease.DeliveryID]
		if !ok {
			out[i] = Settled{Err: fmt.Errorf("store: delivery %d attempt %d: %w", oc.Lease.DeliveryID, oc.Lease.Attempt, courier.ErrLeaseLost)}
			continue
		}
		out[i] = Settled{Status: r.status, Code: courier.Code(r.code.String)}
		wrote, err := o.s.Endpoints.record(ctx, tx, now, r.endpoint, r.tracked || written[r.endpoint], oc)
		if err != nil {
			return err
		}
		written[r.endpoint] = written[r.endpoint] || wrote
		outcome := string(oc.Result)
		switch r.status {
		case courier.StatusRetryWait:
			outcome = "retry"
		case courier.StatusFailed:
			outcome = "failed"
		}
		oc.Code = out[i].Code
		logged = append(logged, newAttemptArg(oc, outcome))
	}
	return o.logAttempts(ctx, tx, now, logged...)
}

// attemptArg is one row of the attempts log as log_attempts reads it from
// its JSON :batch parameter.
type attemptArg struct {
	DeliveryID     int64   `json:"delivery_id"`
	Attempt        int     `json:"attempt"`
	Owner          string  `json:"owner"`
	LeasedAt       int64   `json:"leased_at"`
	LeaseExpiresAt int64   `json:"lease_expires_at"`
	DurationUS     int64   `json:"duration_us"`
	Outcome        string  `json:"outcome"`
	HTTPStatus     *int    `json:"http_status"`
	ErrorCode      *string `json:"error_code"`
}

func newAttemptArg(oc Outcome, outcome string) attemptArg {
	a := attemptArg{
		DeliveryID: oc.Lease.DeliveryID, Attempt: oc.Lease.Attempt, Owner: oc.Lease.Owner,
		LeasedAt: micros(oc.Lease.LeasedAt), LeaseExpiresAt: micros(oc.Lease.ExpiresAt),
		DurationUS: max(oc.Duration.Microseconds(), 0), Outcome: outcome,
	}
	if oc.HTTPStatus != 0 {
		a.HTTPStatus = ptr(oc.HTTPStatus)
	}
	if oc.Code != "" {
		a.ErrorCode = ptr(string(oc.Code))
	}
	return a
}

// logAttempts appends attempts to the log in one statement.
func (o *Outbox) logAttempts(ctx context.Context, tx *sqlx.Tx, now int64, attempts ...attemptArg) error {
	if len(attempts) == 0 {
		return nil
	}
	_, err := o.s.exec(ctx, tx, "log_attempts", map[string]any{"batch": jsonArg(attempts), "now": now})
	return err
}

// Release gives back leases whose attempt was never made, such as the
// deliveries a worker claimed ahead and had not started when it stopped:
// each delivery is due again as it was before the claim, and the claim
// does not count against its attempt budget. A lease that is no longer
// the row's is left alone. It returns how many were released.
func (o *Outbox) Release(ctx context.Context, leases ...Lease) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	type leaseArg struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	args := make([]leaseArg, len(leases))
	for i, l := range leases {
		args[i] = leaseArg{ID: l.DeliveryID, Token: l.Token}
	}
	res, err := o.s.exec(ctx, o.s.writer, "release", map[string]any{"batch": jsonArg(args), "now": o.s.now()})
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), wrapf(err, "release")
}

// Complete settles a successful attempt; ackSHA256 is the digest of the
// Ack the receiver answered ("" for profiles without one).
func (o *Outbox) Complete(ctx context.Context, l Lease, ackSHA256 string) error {
	return o.settleOne(ctx, Outcome{Lease: l, Result: ResultSucceeded, AckSHA256: ackSHA256})
}

// RetryParams describes a failed attempt worth retrying.
type RetryParams struct {
	Code       courier.Code
	HTTPStatus int
	RetryAfter time.Duration
}

// Retry settles a failed attempt to be retried after a backoff. The
// delivery fails instead once its budget or deadline is spent.
func (o *Outbox) Retry(ctx context.Context, l Lease, p RetryParams) error {
	return o.settleOne(ctx, Outcome{Lease: l, Result: ResultRetry, Code: p.Code, HTTPStatus: p.HTTPStatus, RetryAfter: p.RetryAfter})
}

// Fail settles an attempt that failed for good.
func (o *Outbox) Fail(ctx context.Context, l Lease, code courier.Code, httpStatus int) error {
	return o.settleOne(ctx, Outcome{Lease: l, Result: ResultFailed, Code: code, HTTPStatus: httpStatus})
}

func (o *Outbox) settleOne(ctx context.Context, oc Outcome) error {
	s, err := o.Settle(ctx, oc)
	if err != nil {
		return err
	}
	return s[0].Err
}

// Delivery is one row of the outbox.
type Delivery struct {
	ID             int64
	NotificationID string
	Endpoint       string
	Payload        []byte // nil when it cannot be opened (see PayloadKeyID)
	PayloadKeyID   string // the key that sealed the stored payload, "" if none
	PayloadSHA256  string
	Profile        string
	KeyID          string
	Status         courier.Status
	Priority       int
	Attempts       int
	MaxAttempts    int
	NextAttemptAt  time.Time
	Deadline       time.Time
	LeaseOwner     string
	LeasedAt       time.Time
	LeaseExpiresAt time.Time
	LastErrorCode  courier.Code
	LastStatus     int
	AckSHA256      string
	SubscriptionID int64 // the subscription it was published to, 0 if none
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Get returns the delivery with the given id, or ErrNotFound.
func (o *Outbox) Get(ctx context.Context, id int64) (Delivery, error) {
	q := o.s.q("get_delivery")
	var (
		d                                    Delivery
		next, deadline, created, updated     int64
		owner, code, ackSum, fingerprint     sql.NullString
		leasedAt, expires, lastStatus, subID sql.NullInt64
	)
	err := o.s.db.QueryRowContext(ctx, q.text, q.args(map[string]any{"id": id})...).Scan(
		&d.ID, &d.NotificationID, &d.Endpoint, &d.Payload, &d.PayloadKeyID, &d.PayloadSHA256, &d.Profile, &d.KeyID,
		&subID, &fingerprint, &d.Status, &d.Priority, &d.Attempts, &d.MaxAttempts, &next, &deadline, &owner, &leasedAt,
		&expires, &code, &lastStatus, &ackSum, &created, &updated)
	if isNoRows(err) {
		return Delivery{}, courier.ErrNotFound
	}
	if err != nil {
		return Delivery{}, o.s.dialect.interpret("get_delivery", err)
	}
	d.NextAttemptAt, d.Deadline, d.CreatedAt, d.UpdatedAt = fromMicros(next), fromMicros(deadline), fromMicros(created), fromMicros(updated)
	d.LeaseOwner, d.LeasedAt, d.LeaseExpiresAt = owner.String, nullMicros(leasedAt), nullMicros(expires)
	d.LastErrorCode, d.LastStatus, d.AckSHA256 = courier.Code(code.String), int(lastStatus.Int64), ackSum.String
	d.SubscriptionID = subID.Int64
	if plain, err := o.s.cfg.Encryption.open(d.Payload, d.PayloadKeyID, d.NotificationID, d.Endpoint); err == nil {
		d.Payload = plain
	} else {
		d.Payload = nil
	}
	return d, nil
}

// Attempt is one row of the attempts log. It holds no payload, header or
// secret content.
type Attempt struct {
	ID             int64
	DeliveryID     int64
	Attempt        int
	Owner          string
	LeasedAt       time.Time
	LeaseExpiresAt time.Time
	FinishedAt     time.Time
	Duration       time.Duration
	Outcome        string
	HTTPStatus     int
	ErrorCode      courier.Code
}

// Attempts returns a delivery's attempts, oldest first.
func (o *Outbox) Attempts(ctx context.Context, deliveryID int64) ([]Attempt, error) {
	rows, err := o.s.query(ctx, o.s.db, "list_attempts", map[string]any{"delivery_id": deliveryID})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var (
			a                         Attempt
			leased, expires, finished int64
			duration                  int64
			status                    sql.NullInt64
			code                      sql.NullString
		)
		if err := rows.Scan(&a.ID, &a.DeliveryID, &a.Attempt, &a.Owner, &leased, &expires, &finished, &duration, &a.Outcome, &status, &code); err != nil {
			return nil, o.s.dialect.interpret("list_attempts", err)
		}
		a.LeasedAt, a.LeaseExpiresAt, a.FinishedAt = fromMicros(leased), fromMicros(expires), fromMicros(finished)
		a.Duration, a.HTTPStatus, a.ErrorCode = time.Duration(duration)*time.Microsecond, int(status.Int64), courier.Code(code.String)
		out = append(out, a)
	}
	return out, o.s.dialect.interpret("list_attempts", rows.Err())
}

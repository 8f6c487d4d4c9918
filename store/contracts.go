package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/courier-go/courier"
)

// CommandProfile is the Ack profile of a delivery enqueued with
// EnqueueCommand: the source's response, verified by the worker with the
// attempt number it sent (package ack's CommandProfile).
const CommandProfile = "command"

// Command priorities: removals (cancellation, tombstone) are claimed before
// changes; within a class, oldest first.
const (
	PriorityRemoval = -1
	PriorityChange  = 0
)

// ErrContractChanged is a command enqueued under another capabilities
// digest than its endpoint's pinned one.
var ErrContractChanged = courier.NewError(courier.CodeContractChanged, "the endpoint's pinned contract differs")

// Contracts pins, per endpoint, the capabilities digest of the source
// contract its commands are built for.
//
// Every command delivery records the digest it was enqueued under. When an
// endpoint's pin changes while deliveries enqueued under another digest are
// unfinished, no delivery of that endpoint is claimed (its rows stay as they
// are, pending or retry_wait) and Outbox.Health reports blocked with code
// contract_changed, until the operator either pins the old digest again or
// calls FailMismatched, which fails those deliveries with contract_changed.
//
// There is deliberately no action that accepts such deliveries under the
// new digest: the digest is part of their payload bytes, which are fixed at
// enqueue (and the source refuses a command built for another contract).
// Re-issue them under new request ids instead.
type Contracts struct{ s *Store }

// Contracts returns the store's contract pins.
func (s *Store) Contracts() *Contracts { return &Contracts{s: s} }

// Contract is one endpoint's pin.
type Contract struct {
	Endpoint           string
	CapabilitiesSHA256 string
	PinnedAt           time.Time
}

// Pin sets endpoint's pinned capabilities digest (64 lowercase hex).
// Pinning another digest than the current one while commands enqueued
// under it are unfinished holds the endpoint back; pinning it again
// resumes.
func (c *Contracts) Pin(ctx context.Context, endpoint, capabilitiesSHA256 string) error {
	if err := checkContract(endpoint, capabilitiesSHA256); err != nil {
		return err
	}
	_, err := c.s.exec(ctx, c.s.writer, "contract_pin", map[string]any{
		"endpoint": endpoint, "capabilities_sha256": capabilitiesSHA256, "now": c.s.now(),
	})
	return wrapf(err, "pin contract")
}

// Get returns endpoint's pin, or ErrNotFound.
func (c *Contracts) Get(ctx context.Context, endpoint string) (Contract, error) {
	return c.get(ctx, c.s.db, endpoint)
}

func (c *Contracts) get(ctx context.Context, x DBTX, endpoint string) (Contract, error) {
	q := c.s.q("contract_get")
	k := Contract{Endpoint: endpoint}
	var pinned int64
	err := x.QueryRowContext(ctx, q.text, q.args(map[string]any{"endpoint": endpoint})...).Scan(&k.CapabilitiesSHA256, &pinned)
	if isNoRows(err) {
		return Contract{}, courier.ErrNotFound
	}
	if err != nil {
		return Contract{}, c.s.dialect.interpret(q.name, err)
	}
	k.PinnedAt = fromMicros(pinned)
	return k, nil
}

// FailMismatched fails endpoint's waiting deliveries (pending or
// retry_wait) that were enqueued under another digest than its pin, with
// code contract_changed, and returns how many. Leased ones are in flight
// and settle as usual. Claiming for the endpoint resumes once none is left.
func (c *Contracts) FailMismatched(ctx context.Context, endpoint string) (int, error) {
	res, err := c.s.exec(ctx, c.s.writer, "contract_fail_mismatched", map[string]any{"endpoint": endpoint, "now": c.s.now()})
	if err != nil {
		return 0, wrapf(err, "fail mismatched")
	}
	n, err := res.RowsAffected()
	return int(n), wrapf(err, "fail mismatched")
}

// mismatched counts the unfinished deliveries enqueued under another digest
// than their endpoint's pin.
func (c *Contracts) mismatched(ctx context.Context, x DBTX) (int, error) {
	q := c.s.q("contract_mismatched")
	var n int
	err := x.QueryRowContext(ctx, q.text).Scan(&n)
	return n, c.s.dialect.interpret(q.name, err)
}

func checkContract(endpoint, digest string) error {
	switch {
	case endpoint == "" || len(endpoint) > MaxEndpointSize:
		return invalidArgument("endpoint must be 1-2048 bytes")
	case !isHexDigest(digest):
		return invalidArgument("capabilities digest must be 64 lowercase hex")
	}
	return nil
}

func isHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// CommandParams describes one command delivery (the source-delivery
// profile).
type CommandParams struct {
	// Endpoint is the source's URL.
	Endpoint string
	// Payload is the command's exact bytes, as package ack's
	// Command.Payload writes them. The store reads its operation,
	// request_id, source_max_attempts and capabilities_sha256.
	Payload []byte
	// MaxAttempts is courier's delivery budget. Defaults to the command's
	// source_max_attempts, since the source refuses later attempts.
	MaxAttempts int
	// KeyID, NotBefore and Deadline are as in EnqueueParams.
	KeyID     string
	NotBefore time.Time
	Deadline  time.Time
}

// commandHead is what the store reads of a command payload.
type commandHead struct {
	Operation          string `json:"operation"`
	RequestID          string `json:"request_id"`
	SourceMaxAttempts  int    `json:"source_max_attempts"`
	CapabilitiesSHA256 string `json:"capabilities_sha256"`
}

// EnqueueCommand enqueues a command inside the caller's transaction tx, as
// Enqueue does, under the notification_id operation ":" request_id, with
// profile CommandProfile and priority PriorityRemoval for cancellations and
// tombstones, PriorityChange for changes. The delivery records the
// command's capabilities digest; the first command for an endpoint pins
// it (see Contracts), and a command under another digest than the pinned
// one is ErrContractChanged. Enqueueing the same command again is a no-op;
// the same identity with another payload (which includes
// source_max_attempts and the digest) or another delivery budget is
// ErrIdempotencyCollision.
func (o *Outbox) EnqueueCommand(ctx context.Context, tx DBTX, p CommandParams) (Enqueued, error) {
	var h commandHead
	if err := json.Unmarshal(p.Payload, &h); err != nil {
		return Enqueued{}, invalidArgument("Payload is not a command")
	}
	priority := PriorityChange
	switch h.Operation {
	case "change":
	case "cancellation", "tombstone":
		priority = PriorityRemoval
	default:
		return Enqueued{}, invalidArgument("command operation must be change, cancellation or tombstone")
	}
	switch {
	case !validToken(h.RequestID):
		return Enqueued{}, invalidArgument("command request_id must be a token")
	case h.SourceMaxAttempts < 1 || h.SourceMaxAttempts > 20:
		return Enqueued{}, invalidArgument("command source_max_attempts must be within 1..20")
	}
	if err := checkContract(p.Endpoint, h.CapabilitiesSHA256); err != nil {
		return Enqueued{}, err
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = h.SourceMaxAttempts
	}
	now := o.s.now()
	args, err := o.enqueueArgs(EnqueueParams{
		NotificationID: h.Operation + ":" + h.RequestID, Endpoint: p.Endpoint, Payload: p.Payload,
		Profile: CommandProfile, KeyID: p.KeyID, Priority: priority, MaxAttempts: p.MaxAttempts,
		NotBefore: p.NotBefore, Deadline: p.Deadline,
	}, now)
	if err != nil {
		return Enqueued{}, err
	}
	args["contract_sha256"] = h.CapabilitiesSHA256
	if _, err := o.s.exec(ctx, tx, "contract_pin_absent", map[string]any{
		"endpoint": p.Endpoint, "capabilities_sha256": h.CapabilitiesSHA256, "now": now,
	}); err != nil {
		return Enqueued{}, err
	}
	pinned, err := o.s.Contracts().get(ctx, tx, p.Endpoint)
	if err != nil {
		return Enqueued{}, err
	}
	if pinned.CapabilitiesSHA256 != h.CapabilitiesSHA256 {
		// The same command enqueued before the pin changed is still a no-op.
		if e, err := o.existing(ctx, tx, args); err == nil || courier.CodeOf(err) == courier.CodeIdempotencyCollision {
			return e, err
		}
		return Enqueued{}, ErrContractChanged
	}
	var id int64
	q := o.s.q("enqueue_command")
	err = tx.QueryRowContext(ctx, q.text, q.args(args)...).Scan(&id)
	switch {
	case err == nil:
		return Enqueued{ID: id}, nil
	case !isNoRows(err):
		return Enqueued{}, o.s.dialect.interpret(q.name, err)
	}
	return o.existing(ctx, tx, args)
}

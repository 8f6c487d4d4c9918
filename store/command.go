package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
)

// Command priorities: removals (cancellation, tombstone) are claimed before
// changes; within a class, oldest first.
const (
	priorityRemoval = -1
	priorityChange  = 0
)

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
// profile ack.ProfileCommand, removals (cancellations and tombstones)
// claimed before changes. The delivery records the
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
	priority := priorityChange
	switch h.Operation {
	case "change":
	case "cancellation", "tombstone":
		priority = priorityRemoval
	default:
		return Enqueued{}, invalidArgument("command operation must be change, cancellation or tombstone")
	}
	switch {
	case !ack.IsToken(h.RequestID):
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
		Profile: ack.ProfileCommand, KeyID: p.KeyID, Priority: priority, MaxAttempts: p.MaxAttempts,
		NotBefore: p.NotBefore, Deadline: p.Deadline,
	}, now)
	if err != nil {
		return Enqueued{}, err
	}
	args["contract_sha256"], args["event_type"] = h.CapabilitiesSHA256, h.Operation
	if _, err := o.s.exec(ctx, tx, "contract_pin_absent", map[string]any{
		"endpoint": p.Endpoint, "capabilities_sha256": h.CapabilitiesSHA256, "now": now,
	}); err != nil {
		return Enqueued{}, err
	}
	pinned, err := o.s.Contracts.get(ctx, tx, p.Endpoint)
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
	return o.write(ctx, tx, "outbox_enqueue_command", args)
}

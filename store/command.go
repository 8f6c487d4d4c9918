package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
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
	// Endpoint is the source's URL, as EnqueueParams.Endpoint.
	Endpoint string
	// Payload is the command's exact bytes, as package ack's
	// Command.Payload writes them: a valid ack.Command (see
	// EnqueueCommand) of at most 1 MiB, the body a Source reads unless its
	// Body.MaxBytes says otherwise.
	Payload []byte
	// MaxAttempts is courier's delivery budget, at most the command's
	// source_max_attempts, since the source refuses every later attempt
	// (a larger one is invalid_argument). Defaults to source_max_attempts.
	MaxAttempts int
	// KeyID, NotBefore and Deadline are as in EnqueueParams.
	KeyID     string
	NotBefore time.Time
	Deadline  time.Time
}

// EnqueueCommand enqueues a command inside the caller's transaction tx, as
// Enqueue does, under the notification_id operation ":" request_id, with
// profile ack.ProfileCommand, removals (cancellations and tombstones)
// claimed before changes. Commands take no ordering key: a removal may
// reach the source before a change enqueued earlier (see ack's Command
// operations for what a source does about it).
//
// The payload is validated whole before anything is written, as the
// source will read it: at most 1 MiB (a Source with its default body limit
// refuses a larger one at every attempt, 413), one strict JSON document
// (no duplicate keys), exactly the members of ack.Command, each valid (a
// change carries a body). A payload that is not is refused with code
// request_invalid; the error names the fields (errors.As gives the
// *ack.ValidationError, rule "size" for the size), never their content.
//
// The delivery records the command's capabilities digest; the first
// command for an endpoint pins it (see Contracts), and a command under
// another digest than the pinned one is courier.CodeContractChanged. Enqueueing the
// same command again is a no-op, after a Redrive too; the same identity
// with another payload (which includes source_max_attempts and the digest)
// or another delivery budget than it was enqueued with (not the one a
// Redrive gave it since) is CodeIdempotencyCollision.
func (o *Outbox) EnqueueCommand(ctx context.Context, tx DBTX, p CommandParams) (Enqueued, error) {
	return inOneTx(ctx, o.s, tx, func(tx DBTX) (Enqueued, error) { return o.enqueueCommand(ctx, tx, p) })
}

func (o *Outbox) enqueueCommand(ctx context.Context, tx DBTX, p CommandParams) (Enqueued, error) {
	c, err := parseCommand(p.Payload)
	if err != nil {
		return Enqueued{}, err
	}
	priority := priorityChange
	if c.Operation == ack.OperationCancellation || c.Operation == ack.OperationTombstone {
		priority = priorityRemoval
	}
	p.Endpoint = normalEndpoint(p.Endpoint)
	if err := checkContract(p.Endpoint, c.CapabilitiesSHA256); err != nil {
		return Enqueued{}, err
	}
	if err := refuseNewEndpoint("Endpoint", p.Endpoint); err != nil {
		return Enqueued{}, err
	}
	switch {
	case p.MaxAttempts == 0:
		p.MaxAttempts = c.SourceMaxAttempts
	case p.MaxAttempts > c.SourceMaxAttempts:
		return Enqueued{}, invalidArgument(fmt.Sprintf("MaxAttempts %d is more than the command's source_max_attempts %d: the source refuses every attempt past it", p.MaxAttempts, c.SourceMaxAttempts))
	}
	now := o.s.now()
	args, err := o.enqueueArgs(EnqueueParams{
		NotificationID: c.DedupeKey(), Endpoint: p.Endpoint, Payload: p.Payload,
		Profile: ack.ProfileCommand, KeyID: p.KeyID, Priority: priority, MaxAttempts: p.MaxAttempts,
		NotBefore: p.NotBefore, Deadline: p.Deadline,
	}, now)
	if err != nil {
		return Enqueued{}, err
	}
	args["contract_sha256"], args["event_type"] = c.CapabilitiesSHA256, c.Operation
	if _, err := o.s.exec(ctx, tx, "contract_pin_absent", map[string]any{
		"endpoint": p.Endpoint, "capabilities_sha256": c.CapabilitiesSHA256, "now": now,
	}); err != nil {
		return Enqueued{}, err
	}
	pinned, err := o.s.Contracts.get(ctx, tx, p.Endpoint)
	if err != nil {
		return Enqueued{}, err
	}
	if pinned.CapabilitiesSHA256 != c.CapabilitiesSHA256 {
		// The same command enqueued before the pin changed is still a no-op.
		if e, _, err := o.existing(ctx, tx, args); err == nil || courier.CodeOf(err) == courier.CodeIdempotencyCollision {
			return e, err
		}
		return Enqueued{}, errContractChanged
	}
	return o.write(ctx, tx, "outbox_enqueue_command", args)
}

// parseCommand reads a command payload whole, as the source will: its
// size against what a Source reads by default (wire.MaxBody), strict JSON,
// then ack.Command's own decoding (exact members, integer budget) and
// validation. Every refusal is request_invalid and names fields only.
func parseCommand(payload []byte) (ack.Command, error) {
	var c ack.Command
	if len(payload) == 0 || len(payload) > wire.MaxBody {
		return c, requestInvalid(ack.FieldError{Field: "", Rule: "size"})
	}
	if err := strictjson.Check(payload); err != nil {
		rule := "json"
		if errors.Is(err, strictjson.ErrDuplicateKey) {
			rule = "duplicate_key"
		}
		return c, requestInvalid(ack.FieldError{Field: "", Rule: rule})
	}
	err := json.Unmarshal(payload, &c)
	if err == nil {
		err = ack.Validate(c)
	}
	var ve *ack.ValidationError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &ve):
		return c, requestInvalid(ve.Fields...)
	case errors.As(err, &te): // its message may quote the value: keep the field only
		return c, requestInvalid(ack.FieldError{Field: te.Field, Rule: "type"})
	}
	return c, requestInvalid(ack.FieldError{Field: "", Rule: "json"})
}

// requestInvalid is a command refused for fields, a case of
// courier.CodePayloadInvalid with code request_invalid, whose chain holds
// the *ack.ValidationError listing them.
func requestInvalid(fields ...ack.FieldError) error {
	ve := &ack.ValidationError{Fields: fields}
	return &coded.Error{Code: courier.CodeRequestInvalid, Msg: "store: the command is invalid" + fieldList(ve), Err: ve}
}

package ack

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
)

// The source-delivery profile's wire strings.
const (
	commandSchema = "courier.source-command.v1"
	// AttemptHeader carries the attempt's place in the delivery's budget
	// (1-based) on every request: its number, less the earlier attempts
	// its workers cut short as they stopped, which spend no budget (a
	// deploy during a command's last attempt leaves it that attempt, and
	// the source does not refuse it). The source echoes it in its
	// response. It is not signed, so it is informational: the source
	// bounds new commands by it (source_max_attempts), and the sender
	// does not bind the response to it (see ProfileCommand).
	AttemptHeader = "Courier-Attempt"
)

// Command operations. Courier gives them no meaning beyond their order:
// what a removal removes (a pending change, a page) is for its body to name
// and for the source to decide. Removals (cancellation, tombstone) are
// claimed before changes, so a removal reaches the source before a change
// enqueued earlier that is still due, and a failed attempt is retried after
// commands enqueued later: commands reach the source in no order a source
// may rely on. A source whose removal must not be undone by a change that
// arrives after it remembers what it removed (a tombstone of its own, kept
// in the function's transaction) and answers such a change
// handler.ErrAlreadyApplied, or builds its changes so that an older one
// never replaces a newer state (a version in the body).
const (
	OperationChange       = "change"
	OperationCancellation = "cancellation"
	OperationTombstone    = "tombstone"
)

// Command response statuses.
const (
	CommandApplied        = "applied"         // the source applied the command now
	CommandAlreadyApplied = "already_applied" // its effect was already present
)

// Command is a change, cancellation or tombstone a website host sends to
// its source, enqueued under the capabilities digest of the source contract
// it was built for. Every member is required and no other is allowed.
type Command struct {
	Schema    string `json:"schema" validate:"eq=courier.source-command.v1"`
	Operation string `json:"operation" validate:"oneof=change cancellation tombstone"`
	// RequestID is a token (1-256 of A-Z a-z 0-9 _ . : -) short enough
	// that the command's identity, operation ":" request_id (DedupeKey),
	// is a token too: at most 256 characters in all, so at most 249 for a
	// change, 246 for a tombstone and 243 for a cancellation.
	RequestID          string `json:"request_id" validate:"courier_token"`
	SourceMaxAttempts  int    `json:"source_max_attempts" validate:"min=1,max=20"`
	CapabilitiesSHA256 string `json:"capabilities_sha256" validate:"courier_sha256"`
	// Body is the change's content: one strict JSON value (no duplicate
	// keys, finite numbers, as Canonical reads it), null allowed only for
	// removals.
	Body json.RawMessage `json:"body"`
}

// maxIdentity bounds a command's identity, operation ":" request_id: it is
// the notification id the command is delivered under, a token.
const maxIdentity = 256

// commandFields is Command's exact member set, sorted.
var commandFields = []string{"body", "capabilities_sha256", "operation", "request_id", "schema", "source_max_attempts"}

// NewCommand completes c with its schema and validates it.
func NewCommand(c Command) (Command, error) {
	c.Schema = commandSchema
	if len(c.Body) == 0 {
		c.Body = json.RawMessage("null")
	}
	if err := Validate(c); err != nil {
		return Command{}, err
	}
	return c, nil
}

// DedupeKey returns the command's identity, operation ":" request_id: the
// notification_id it is delivered under and the source's dedupe key.
func (c Command) DedupeKey() string { return c.Operation + ":" + c.RequestID }

// Payload returns c's canonical JSON: the bytes a sender enqueues and sends.
func (c Command) Payload() ([]byte, error) { return canonical.Marshal(c) }

// Check applies the rules struct tags cannot express: the command's
// identity (DedupeKey) is at most 256 characters, its body is one JSON
// value that Payload can write (read strictly, numbers finite), and a
// change carries a body that is not null.
func (c Command) Check() error {
	var fields []FieldError
	if len(c.DedupeKey()) > maxIdentity {
		fields = append(fields, FieldError{Field: "request_id", Rule: "identity_length"})
	}
	if len(c.Body) > 0 {
		if _, err := Canonical(c.Body); err != nil {
			fields = append(fields, FieldError{Field: "body", Rule: bodyRule(err)})
		}
	}
	if c.Operation == OperationChange && (len(c.Body) == 0 || bytes.Equal(bytes.TrimSpace(c.Body), []byte("null"))) {
		fields = append(fields, FieldError{Field: "body", Rule: "required_for_change"})
	}
	if len(fields) > 0 {
		return &ValidationError{Fields: fields}
	}
	return nil
}

// bodyRule names what Canonical found wrong with a body.
func bodyRule(err error) string {
	switch {
	case errors.Is(err, strictjson.ErrDuplicateKey):
		return "duplicate_key"
	case errors.Is(err, canonical.ErrNotFinite):
		return "finite"
	}
	return "json"
}

// UnmarshalJSON decodes a command strictly: one object, no duplicate keys,
// every member present, no other member, source_max_attempts an integer.
func (c *Command) UnmarshalJSON(b []byte) error {
	err := exactMembers(b, commandFields, func(m strictjson.Member) *FieldError {
		if m.Key == "source_max_attempts" && (m.Val.Kind != strictjson.Number || !canonical.IsInteger(m.Val.Text)) {
			return &FieldError{Field: m.Key, Rule: "integer"}
		}
		return nil
	})
	if err != nil {
		return err
	}
	type plain Command // no UnmarshalJSON method
	return json.Unmarshal(b, (*plain)(c))
}

// CommandResponse is the document a source answers an accepted command
// with. It binds the command's identity, the digest of the exact request
// body, the capabilities digest and the source's budget; it also names the
// attempt the source saw, for information only (the AttemptHeader it
// came in is not signed). handler.NewSource writes it, as canonical JSON,
// and the sender's worker verifies it (ProfileCommand); a user reads it
// with encoding/json.
type CommandResponse struct {
	// Schema is "courier.source-command-response.v1".
	Schema             string `json:"schema"`
	Operation          string `json:"operation"`
	RequestID          string `json:"request_id"`
	PayloadSHA256      string `json:"payload_sha256"`
	CapabilitiesSHA256 string `json:"capabilities_sha256"`
	Status             string `json:"status"`
	Attempt            int    `json:"attempt"`
	SourceMaxAttempts  int    `json:"source_max_attempts"`
}

// responseFields is CommandResponse's exact member set, sorted.
var responseFields = []string{
	"attempt", "capabilities_sha256", "operation", "payload_sha256",
	"request_id", "schema", "source_max_attempts", "status",
}

// verifyCommandResponse is the sender's side of the source-delivery
// profile (ProfileCommand): it checks the source's response to payload
// exactly: the member set, the schema, the identity, the digest of
// payload, the capabilities digest and budget of the command, a known
// status, and an attempt within 1..source_max_attempts. The attempt is
// informational and not bound to the one sent: the stored response names
// the request that applied the command, and since the AttemptHeader is
// not signed, that may be a replay of a genuine request carrying any
// attempt number within the budget, processed before the genuine one. The
// error wraps courier.CodeAckInvalid and names the member that differed,
// never its content.
func verifyCommandResponse(payload []byte, response []byte) error {
	var c Command
	if err := json.Unmarshal(payload, &c); err != nil {
		return invalid("payload is not a command")
	}
	if len(response) > wire.MaxAckSize {
		return invalid("response too large")
	}
	v, err := strictjson.Parse(response)
	if err != nil || v.Kind != strictjson.Object {
		return invalid("response is not a JSON object")
	}
	if len(v.Members) != len(responseFields) {
		return invalid("unexpected or missing member")
	}
	got := make(map[string]strictjson.Value, len(v.Members))
	for _, m := range v.Members {
		if _, ok := slices.BinarySearch(responseFields, m.Key); !ok {
			return invalid("unexpected member")
		}
		got[m.Key] = m.Val
	}
	str := func(name, want string) error {
		if m := got[name]; m.Kind != strictjson.String || m.Text != want {
			return invalid("wrong " + name)
		}
		return nil
	}
	integer := func(name string, lo, hi int) error {
		m := got[name]
		if m.Kind != strictjson.Number || !canonical.IsInteger(m.Text) {
			return invalid("wrong " + name)
		}
		n, err := strconv.Atoi(m.Text)
		if err != nil || n < lo || n > hi {
			return invalid("wrong " + name)
		}
		return nil
	}
	for _, check := range []error{
		str("schema", wire.CommandResponseSchema),
		str("operation", c.Operation),
		str("request_id", c.RequestID),
		str("payload_sha256", Digest(payload)),
		str("capabilities_sha256", c.CapabilitiesSHA256),
		integer("source_max_attempts", c.SourceMaxAttempts, c.SourceMaxAttempts),
		integer("attempt", 1, c.SourceMaxAttempts),
	} {
		if check != nil {
			return check
		}
	}
	if s := got["status"]; s.Kind != strictjson.String || (s.Text != CommandApplied && s.Text != CommandAlreadyApplied) {
		return invalid("wrong status")
	}
	return nil
}

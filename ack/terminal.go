package ack

import (
	"encoding/json"
	"slices"

	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/strictjson"
)

// The terminal profile's wire strings. They are the reference system's and
// must match byte for byte.
const (
	terminalSchema    = "blun.cms-source-terminal-notification.v1"
	terminalAckSchema = "blun.cms-source-terminal-notification-ack.v1"
	terminalIDPrefix  = "terminal-"
)

// Terminal is a terminal notification: the verified end of a localization
// lifecycle, sent by a website host to its source CMS. Every field is
// required and no other field is allowed. NotificationID is derived from the
// content (see NewTerminal) and LifecycleSHA256 is null exactly when the
// status is cancelled or superseded.
//
// SourceSequence and JobCount are any positive integers, as the reference
// system takes them: JSON numbers without fraction or exponent, kept as
// their decimal digits (json.Number), so a value beyond 2^63 round-trips
// exactly on both ends. Build one from an integer with strconv, e.g.
// json.Number(strconv.FormatInt(seq, 10)).
//
// Its identity is its event: a receiver dedupes terminal notifications by
// event_id (DedupeKey) and judges them by the digest of their canonical
// JSON (PayloadSHA256), so a redelivery re-serialized by another encoder is
// a duplicate, and another notification for an event already accepted is
// an idempotency collision.
type Terminal struct {
	Schema                 string      `json:"schema" validate:"eq=blun.cms-source-terminal-notification.v1"`
	NotificationID         string      `json:"notification_id" validate:"courier_token"`
	EventID                string      `json:"event_id" validate:"courier_token"`
	SiteID                 string      `json:"site_id" validate:"courier_token"`
	PlanID                 string      `json:"plan_id" validate:"courier_token"`
	WebsiteVersion         string      `json:"website_version" validate:"courier_token"`
	SourceSequence         json.Number `json:"source_sequence" validate:"number,startsnotwith=0"`
	JobCount               json.Number `json:"job_count" validate:"number,startsnotwith=0"`
	ChangeSHA256           string      `json:"change_sha256" validate:"courier_sha256"`
	LifecycleBindingSHA256 string      `json:"lifecycle_binding_sha256" validate:"courier_sha256"`
	TerminalStatus         string      `json:"terminal_status" validate:"oneof=cancelled deleted deletion_failed localization_failed publication_blocked publication_failed published superseded"`
	LifecycleSHA256        *string     `json:"lifecycle_sha256" validate:"omitnil,courier_sha256"`
}

// terminalFields is Terminal's exact member set.
var terminalFields = []string{
	"change_sha256", "event_id", "job_count", "lifecycle_binding_sha256",
	"lifecycle_sha256", "notification_id", "plan_id", "schema", "site_id",
	"source_sequence", "terminal_status", "website_version",
}

// NewTerminal completes t with its schema and content-derived
// notification_id and validates it. The other fields must be set.
func NewTerminal(t Terminal) (Terminal, error) {
	t.Schema = terminalSchema
	t.NotificationID = ""
	id, err := t.derivedID()
	if err != nil {
		return Terminal{}, err
	}
	t.NotificationID = id
	if err := Validate(t); err != nil {
		return Terminal{}, err
	}
	return t, nil
}

// derivedID returns the notification_id t's content implies: "terminal-"
// followed by the hex SHA-256 of the canonical JSON of every field but
// notification_id.
func (t Terminal) derivedID() (string, error) {
	var fields []FieldError
	if !isPositiveInteger(string(t.SourceSequence)) { // json.Marshal writes "" as 0
		fields = append(fields, FieldError{Field: "source_sequence", Rule: "number"})
	}
	if !isPositiveInteger(string(t.JobCount)) {
		fields = append(fields, FieldError{Field: "job_count", Rule: "number"})
	}
	if fields != nil {
		return "", &ValidationError{Fields: fields}
	}
	type content struct { // Terminal without notification_id
		Schema                 string      `json:"schema"`
		EventID                string      `json:"event_id"`
		SiteID                 string      `json:"site_id"`
		PlanID                 string      `json:"plan_id"`
		WebsiteVersion         string      `json:"website_version"`
		SourceSequence         json.Number `json:"source_sequence"`
		JobCount               json.Number `json:"job_count"`
		ChangeSHA256           string      `json:"change_sha256"`
		LifecycleBindingSHA256 string      `json:"lifecycle_binding_sha256"`
		TerminalStatus         string      `json:"terminal_status"`
		LifecycleSHA256        *string     `json:"lifecycle_sha256"`
	}
	b, err := canonical.Marshal(content{
		t.Schema, t.EventID, t.SiteID, t.PlanID, t.WebsiteVersion, t.SourceSequence,
		t.JobCount, t.ChangeSHA256, t.LifecycleBindingSHA256, t.TerminalStatus, t.LifecycleSHA256,
	})
	if err != nil {
		return "", err
	}
	return terminalIDPrefix + Digest(b), nil
}

// Check applies the rules struct tags cannot express: lifecycle_sha256 is
// null exactly when the status is cancelled or superseded, and
// notification_id is the one the content implies.
func (t Terminal) Check() error {
	var fields []FieldError
	withoutLifecycle := t.TerminalStatus == "cancelled" || t.TerminalStatus == "superseded"
	if withoutLifecycle != (t.LifecycleSHA256 == nil) {
		fields = append(fields, FieldError{Field: "lifecycle_sha256", Rule: "null_iff_cancelled_or_superseded"})
	}
	if id, err := t.derivedID(); err != nil || id != t.NotificationID {
		fields = append(fields, FieldError{Field: "notification_id", Rule: "content_derived"})
	}
	if fields != nil {
		return &ValidationError{Fields: fields}
	}
	return nil
}

// isPositiveInteger reports whether s is the decimal form of a positive
// integer: digits, the first not 0.
func isPositiveInteger(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// UnmarshalJSON decodes a terminal notification strictly: every member must
// be present (lifecycle_sha256 as null where it has no value) and no other
// member is allowed. source_sequence and job_count must be JSON integers
// (no string, fraction or exponent), as the reference system requires; any
// size.
func (t *Terminal) UnmarshalJSON(b []byte) error {
	if err := exactMembers(b, terminalFields, checkTerminalMember); err != nil {
		return err
	}
	type plain Terminal // no UnmarshalJSON method
	return json.Unmarshal(b, (*plain)(t))
}

// checkTerminalMember refuses a source_sequence or job_count that is not
// a JSON integer literal: encoding/json would read the string "3", or 3.5,
// into a json.Number.
func checkTerminalMember(m strictjson.Member) *FieldError {
	if (m.Key == "source_sequence" || m.Key == "job_count") && (m.Val.Kind != strictjson.Number || !canonical.IsInteger(m.Val.Text)) {
		return &FieldError{Field: m.Key, Rule: "type"}
	}
	return nil
}

// exactMembers checks that b is one JSON object (no duplicate keys) whose
// members are exactly fields (sorted), each passing check when it is set.
func exactMembers(b []byte, fields []string, check func(strictjson.Member) *FieldError) error {
	v, err := strictjson.Parse(b)
	if err != nil {
		return canonical.WithCode(err)
	}
	if v.Kind != strictjson.Object {
		return &ValidationError{Fields: []FieldError{{Field: "", Rule: "object"}}}
	}
	var errs []FieldError
	seen := make([]string, 0, len(v.Members))
	for _, m := range v.Members {
		if _, ok := slices.BinarySearch(fields, m.Key); !ok {
			errs = append(errs, FieldError{Field: m.Key, Rule: "unknown"})
			continue
		}
		if check != nil {
			if fe := check(m); fe != nil {
				errs = append(errs, *fe)
			}
		}
		seen = append(seen, m.Key)
	}
	for _, name := range fields {
		if !slices.Contains(seen, name) {
			errs = append(errs, FieldError{Field: name, Rule: "required"})
		}
	}
	if errs != nil {
		return &ValidationError{Fields: errs}
	}
	return nil
}

// DedupeKey returns the event_id: the reference system keys terminal
// notifications by their event, so a receiver records one notification
// per event and sender, and another one for the same event is an
// idempotency collision. Give a sender of terminal notifications its own
// verified sender name if it also sends payloads of other types to
// receivers on the same Inbox: keys are unique per sender, not per type.
func (t Terminal) DedupeKey() string { return t.EventID }

// PayloadSHA256 implements Digester: the digest of body's canonical JSON,
// the notification_sha256 of its Ack. Every serialization of the same
// notification (whitespace, member order, escapes) has the same one.
func (t Terminal) PayloadSHA256(body []byte) (string, error) {
	canonical, err := Canonical(body)
	if err != nil {
		return "", err
	}
	return Digest(canonical), nil
}

// Payload returns t's canonical JSON: the bytes a sender enqueues and sends.
func (t Terminal) Payload() ([]byte, error) { return canonical.Marshal(t) }

// Ack returns the terminal Ack for t received as body. Its
// notification_sha256 is the digest of the canonical payload, which is the
// digest of the bytes a courier sender sends.
func (t Terminal) Ack(body []byte) (Ack, error) {
	digest, err := t.PayloadSHA256(body)
	if err != nil {
		return Ack{}, err
	}
	return Ack{
		Schema:             terminalAckSchema,
		NotificationID:     t.NotificationID,
		Status:             statusAccepted,
		NotificationSHA256: digest,
		Extra:              map[string]string{"event_id": t.EventID, "site_id": t.SiteID},
	}, nil
}

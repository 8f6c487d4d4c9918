package ack

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/internal/coded"
	"github.com/courier-go/courier/internal/strictjson"
	"github.com/courier-go/courier/internal/wire"
)

// schemaV1 is the schema of courier's own Ack document.
const schemaV1 = "courier.ack.v1"

// statusAccepted is the only status an Ack carries.
const statusAccepted = "accepted"

// The members every Ack has.
const (
	fieldSchema = "schema"
	fieldID     = "notification_id"
	fieldStatus = "status"
	fieldSHA256 = "notification_sha256"
)

// Ack is an acknowledgement document. Every member is a string. Profiles add
// members of their own in Extra (the terminal profile adds event_id and
// site_id).
type Ack struct {
	// Schema names the document: "courier.ack.v1" for courier's own Ack
	// (New), "blun.cms-source-terminal-notification-ack.v1" for the
	// terminal profile's.
	Schema         string
	NotificationID string
	// Status is "accepted", the only status an Ack carries.
	Status             string
	NotificationSHA256 string
	Extra              map[string]string
}

// New returns courier's own Ack for the notification id received as body.
func New(id string, body []byte) Ack {
	return Ack{Schema: schemaV1, NotificationID: id, Status: statusAccepted, NotificationSHA256: Digest(body)}
}

func (a Ack) members() map[string]string {
	m := make(map[string]string, 4+len(a.Extra))
	maps.Copy(m, a.Extra)
	m[fieldSchema] = a.Schema
	m[fieldID] = a.NotificationID
	m[fieldStatus] = a.Status
	m[fieldSHA256] = a.NotificationSHA256
	return m
}

// Marshal returns the Ack's canonical JSON bytes (keys sorted), the bytes a
// receiver stores and replays for every redelivery.
func (a Ack) Marshal() []byte {
	m := a.members()
	keys := slices.Sorted(maps.Keys(m))
	b := make([]byte, 0, 256)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = canonical.AppendString(b, k)
		b = append(b, ':')
		b = canonical.AppendString(b, m[k])
	}
	return append(b, '}')
}

// parse reads an Ack strictly: at most 16 KiB, the most a sender reads of
// an answer, holding one JSON object whose members are all strings, no
// duplicate keys, the four common members present. It does not judge the
// values; see Verify.
func parse(b []byte) (Ack, error) {
	if len(b) > wire.MaxAckSize {
		return Ack{}, invalid("ack too large")
	}
	v, err := strictjson.Parse(b)
	if err != nil {
		if errors.Is(err, strictjson.ErrDuplicateKey) {
			return Ack{}, invalid("duplicate member")
		}
		return Ack{}, invalid("not JSON")
	}
	if v.Kind != strictjson.Object {
		return Ack{}, invalid("not an object")
	}
	var a Ack
	for _, m := range v.Members {
		if m.Val.Kind != strictjson.String {
			return Ack{}, invalid("member is not a string")
		}
		switch m.Key {
		case fieldSchema:
			a.Schema = m.Val.Text
		case fieldID:
			a.NotificationID = m.Val.Text
		case fieldStatus:
			a.Status = m.Val.Text
		case fieldSHA256:
			a.NotificationSHA256 = m.Val.Text
		default:
			if a.Extra == nil {
				a.Extra = make(map[string]string)
			}
			a.Extra[m.Key] = m.Val.Text
		}
	}
	if a.Schema == "" || a.NotificationID == "" || a.Status == "" || a.NotificationSHA256 == "" {
		return Ack{}, invalid("member missing")
	}
	return a, nil
}

// Verify checks that got is exactly this Ack: the same members, each with
// the same value, and no other member. Member order and whitespace do not
// matter. The error wraps courier.CodeAckInvalid and names which part
// differed, never its content.
func (a Ack) Verify(got []byte) error {
	g, err := parse(got)
	if err != nil {
		return err
	}
	switch {
	case g.Schema != a.Schema:
		return invalid("wrong schema")
	case g.NotificationID != a.NotificationID:
		return invalid("wrong notification_id")
	case g.Status != a.Status:
		return invalid("wrong status")
	case g.NotificationSHA256 != a.NotificationSHA256:
		return invalid("wrong notification_sha256")
	case len(g.Extra) != len(a.Extra):
		return invalid("unexpected or missing member")
	}
	for k, want := range a.Extra {
		if have, ok := g.Extra[k]; !ok || have != want {
			return invalid(fmt.Sprintf("wrong %s", k))
		}
	}
	return nil
}

func invalid(msg string) error {
	return &coded.Error{Code: courier.CodeAckInvalid, Msg: msg}
}

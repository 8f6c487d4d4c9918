package ack

import "encoding/json"

// Names of the built-in profiles, as the outbox stores them with each
// delivery.
const (
	ProfileCourier  = "courier"  // courier.ack.v1 over the exact bytes sent
	ProfileTerminal = "terminal" // the terminal notification Ack
	ProfileNone     = "none"     // any 2xx; the receiver answers without an Ack (AdCP)
)

// Notification is a payload a receiver can dedupe: DedupeKey is its
// identity. Receivers answer with courier's own Ack ([New]) unless the
// payload is an Acker.
type Notification interface {
	DedupeKey() string
}

// Acker is a Notification with an Ack of its own profile.
type Acker interface {
	Notification
	Ack(body []byte) (Ack, error)
}

// Profile tells a sender which Ack proves a delivery was received.
type Profile struct {
	// Name is stored with each delivery and selects the profile at send time.
	Name string
	// Expect returns the Ack a receiver must answer for payload sent under
	// id. Nil means the receiver answers any 2xx without an Ack.
	Expect func(id string, payload []byte) (Ack, error)
}

// Builtin returns the built-in profile with the given name.
func Builtin(name string) (Profile, bool) {
	switch name {
	case ProfileCourier:
		return Profile{Name: name, Expect: func(id string, payload []byte) (Ack, error) { return New(id, payload), nil }}, true
	case ProfileTerminal:
		return Profile{Name: name, Expect: expectTerminal}, true
	case ProfileNone:
		return Profile{Name: name}, true
	case ProfileReporting:
		return ReportingProfile(), true
	}
	return Profile{}, false
}

func expectTerminal(id string, payload []byte) (Ack, error) {
	var t Terminal
	if err := json.Unmarshal(payload, &t); err != nil {
		return Ack{}, err
	}
	if t.NotificationID != id {
		return Ack{}, &ValidationError{Fields: []FieldError{{Field: "notification_id", Rule: "delivery_identity"}}}
	}
	return t.Ack(payload)
}

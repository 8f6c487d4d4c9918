package ack

import "encoding/json"

// Names of the built-in profiles, as the outbox stores them with each
// delivery (store.EnqueueParams.Profile).
const (
	ProfileCourier   = "courier"   // courier.ack.v1 over the exact bytes sent (the default)
	ProfileTerminal  = "terminal"  // the terminal notification Ack
	ProfileNone      = "none"      // any 2xx; the receiver answers without an Ack (Standard Webhooks, AdCP)
	ProfileReporting = "reporting" // AdCP reporting webhooks: any 2xx, deduped by idempotency_key
	ProfileCommand   = "command"   // the source's CommandResponse; the attempt it names is informational
)

// Notification is a payload a receiver can dedupe: DedupeKey is its
// identity, the key the receiver's Inbox records it under for its verified
// sender. A payload type that carries no id of its own returns "": the
// receiver then dedupes it by the message id its sender signed (Standard
// Webhooks' webhook-id, Svix's svix-id), and refuses it when the
// signature scheme signs none. Receivers answer with courier's own Ack
// ([New]) unless the payload is an Acker.
//
// A key is a token, as a notification_id is: 1-256 of A-Z a-z 0-9 _ . : -
// (validate the fields it is made of with courier_token, or build it from
// fields that are tokens). A receiver refuses a payload whose key is
// anything else, 400 validation_failed naming notification_id, and
// records nothing. The key must depend on the payload alone, the same for
// the same payload whenever and wherever it is received: a key that
// changes with the time, a counter or the instance makes every redelivery
// a new notification, processed again.
type Notification interface {
	DedupeKey() string
}

// Digester is a Notification whose identity is its content rather than
// the exact bytes it arrived as. A receiver records each notification
// under its DedupeKey with a digest, and judges a later request under the
// same key by it: the same digest is a redelivery, answered with the
// stored Ack; another digest is an idempotency collision. By default the
// digest is the SHA-256 of the bytes received, as courier's own Ack binds
// them; a Digester's PayloadSHA256 digests a form every serialization of
// the same content shares (the terminal profile's canonical JSON), so a
// redelivery that another encoder re-serialized is still a duplicate.
type Digester interface {
	Notification
	// PayloadSHA256 returns the digest of the notification received as
	// body (the bytes it was decoded from), in Digest's form.
	PayloadSHA256(body []byte) (string, error)
}

// Acker is a Notification with an Ack of its own profile. Ack returns the
// Ack that answers the notification received as body; a receiver records
// it with the notification and answers every redelivery with those bytes.
// Its NotificationID is the notification's id: where the signature scheme
// signs a message id (Standard Webhooks' webhook-id), a receiver refuses
// an Ack naming another, 400 validation_failed. Its sender verifies the
// answer with a Profile of its own that expects this Ack (registered in
// store.Config.Profiles and named by the deliveries): courier's default
// profile fails it with ack_invalid.
type Acker interface {
	Notification
	Ack(body []byte) (Ack, error)
}

// Sent is what one delivery attempt sent; a receiver's answer is judged
// against it.
type Sent struct {
	ID      string // the notification id
	Payload []byte // the exact bytes sent
	Attempt int    // the attempt's place in the budget, 1-based, as AttemptHeader sent it
}

// Profile tells a sender which answer proves a delivery was received.
type Profile struct {
	// Name is stored with each delivery and selects the profile at send
	// time.
	Name string
	// Verify checks the body of a receiver's 2xx answer to sent. Any
	// error fails the delivery for good with ack_invalid, whatever it
	// wraps: the receiver did not prove it received these bytes, and there
	// is no retry. Nil means the receiver answers without an Ack: any 2xx
	// succeeds.
	Verify func(sent Sent, response []byte) error
}

// Builtin returns the built-in profile with the given name (the Profile*
// constants).
func Builtin(name string) (Profile, bool) {
	switch name {
	case ProfileCourier:
		return Profile{Name: name, Verify: func(s Sent, resp []byte) error { return New(s.ID, s.Payload).Verify(resp) }}, true
	case ProfileTerminal:
		return Profile{Name: name, Verify: verifyTerminal}, true
	case ProfileNone, ProfileReporting:
		return Profile{Name: name}, true
	case ProfileCommand:
		return Profile{Name: name, Verify: func(s Sent, resp []byte) error { return verifyCommandResponse(s.Payload, resp) }}, true
	}
	return Profile{}, false
}

// verifyTerminal checks a terminal Ack: the payload must be the terminal
// notification sent under its own id.
func verifyTerminal(s Sent, resp []byte) error {
	var t Terminal
	if err := json.Unmarshal(s.Payload, &t); err != nil {
		return invalid("payload is not a terminal notification")
	}
	if t.NotificationID != s.ID {
		return invalid("payload names another notification_id")
	}
	want, err := t.Ack(s.Payload)
	if err != nil {
		return invalid("payload is not a valid terminal notification")
	}
	return want.Verify(resp)
}

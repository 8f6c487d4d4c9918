// Package ack is courier's wire contract: canonical JSON, SHA-256 digests,
// the Ack document a receiver answers with, and the built-in payload
// profiles that shape notifications and their Acks.
//
// A receiver that accepted a notification answers 200 with an Ack that binds
// the exact bytes it received:
//
//	{"notification_id":"…","notification_sha256":"<hex>","schema":"courier.ack.v1","status":"accepted"}
//
// The sender verifies the Ack exactly ([Ack.Verify]): an Ack that does not
// prove receipt of those bytes is a contract violation, and the delivery
// fails with code ack_invalid rather than being retried.
//
// # Profiles: what proves a delivery arrived
//
// Each delivery names a [Profile] (store.EnqueueParams.Profile), which
// the sender's worker checks a receiver's 2xx answer with. The built-in
// ones ([Builtin]) pair with a receiver of package handler:
//
//	ProfileCourier    (the default) courier's Ack above, for these exact bytes:
//	                  handler.NewReceiver of an application's own type
//	ProfileTerminal   the terminal Ack of a Terminal notification, bound to its
//	                  canonical JSON: handler.NewReceiver of Terminal
//	ProfileCommand    the CommandResponse to a Command: handler.NewSource
//	ProfileReporting  any 2xx (AdCP reporting has no Ack): handler.NewReporting
//	ProfileNone       any 2xx: a receiver that is not courier's
//
// A delivery whose receiver answers another profile's Ack fails
// ack_invalid: a terminal notification sent under the default profile is
// applied by its receiver and fails all the same, at every redrive.
//
// # Payload types: what a receiver does with them
//
// handler.NewReceiver decodes each request into the application's type,
// validates it (validator/v10 tags, and [Checker] for rules tags cannot
// express) and then asks it, through the interfaces it implements, how to
// dedupe and answer it:
//
//	Notification  DedupeKey: its identity, the key its Inbox record has
//	              ("": the message id its sender signed)
//	Digester      PayloadSHA256: judge a redelivery by its content, not its
//	              bytes (a re-serialized redelivery is still a duplicate)
//	Acker         Ack: answer with an Ack of its own profile, not courier's
//	Checker       Check: the rules its tags cannot express
//
// [Terminal] implements all four; an application's own type usually only
// Notification, and is answered with courier's Ack ([New]).
package ack

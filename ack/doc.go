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
package ack

// Package courier is the vocabulary shared by both ends of courier's
// at-least-once notification contract: delivery statuses, stable error codes
// and the sentinel errors that carry them.
//
// The sender side lives in [github.com/courier-go/courier/store] (the outbox,
// written inside the application's own transaction) and
// [github.com/courier-go/courier/client] (the delivery worker). The receiver
// side lives in [github.com/courier-go/courier/handler]. The wire contract
// (canonical JSON, digests, the Ack document) is in
// [github.com/courier-go/courier/ack] and the signing schemes are in
// [github.com/courier-go/courier/signature].
//
// This package performs no I/O and imports nothing outside the standard library.
package courier

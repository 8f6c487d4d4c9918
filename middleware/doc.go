// Package middleware holds courier's func(http.Handler) http.Handler pieces:
// bounded body reads, panic recovery, signature verification and a
// per-request database transaction.
//
// Each middleware validates its configuration once, when it is built, and
// panics on an invalid one; no request ever pays for that check. Every
// refusal is an RFC 9457 application/problem+json body with a stable code.
//
// A receiver composes them outermost first:
//
//	h := middleware.Recover(logger)(
//		middleware.PostJSON(
//			middleware.Verify(verifier, middleware.BodyLimits{MaxBytes: 1 << 20})(
//				middleware.Transaction(s.Begin)(app))))
//
// Recover turns a panic anywhere below it into a 500, and lends its
// logger to Transaction, which logs with it a transaction it could not
// begin or commit. PostJSON answers what is not a POST of JSON sent as
// it is (405, 415) before any body is read. Verify reads the body once,
// within [BodyLimits], checks its signature and hands app the same bytes
// in r.Body, with [PrincipalFromContext]. Transaction runs app inside one transaction
// ([TxFromContext]) and holds app's response back until the transaction
// has committed, so a client never sees a success that was rolled back.
//
// Reading a body is where an unauthenticated client can cost a server the
// most, so every read is bounded before the signature is checked: in size
// (413), in time (408, and the connection closes), and in the bytes all
// requests buffer at once, against a [Budget] (503 server_busy, never a
// queue). A refused upload is still answered: what the client keeps
// sending is discarded, within bounds, before the connection closes.
// [ReadBody] is the same read for a handler of your own.
//
// # A receiver of your own
//
// These pieces are what package handler's receivers are built from, and a
// receiver composed of them still owes its sender what those receivers add
// on top. Verify checks the signature of whatever request it gets: put
// [PostJSON] in front of it, which refuses, before any body is read, what
// is not a POST of JSON sent as it is (405, 415). Decode the body
// strictly: a duplicate key (ack.Canonical refuses one, duplicate_json_key)
// can mean two readers see two documents. Dedupe in app's transaction, in
// a table of your own keyed by the verified sender and the notification's
// id ([PrincipalFromContext]'s Sender and MessageID, or an id in the
// body), and answer a redelivery what you answered the first time, without
// running the effect again: the Inbox of package store serves package
// handler's receivers only. Answer a refusal of your own with [Refuse] and
// a code of package courier's (422 rejected refuses a notification for
// good, as handler.Reject does), and a failure the sender should retry
// with a 5xx (503 with Retry-After when it is the database).
package middleware

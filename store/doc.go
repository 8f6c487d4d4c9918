// Package store is courier's durable state: the Outbox a sender enqueues
// into inside its own transactions, the attempts log, and the Inbox a
// receiver dedupes by, with the replay cache signatures are checked
// against, the subscriptions registry, endpoint health and contract pins.
//
// # Engines
//
// One Go implementation serves every engine; each engine is a package that
// brings its SQL and driver: github.com/courier-go/courier/store/sqlite
// (the embedded default, one file on one host) and
// github.com/courier-go/courier/store/postgres (many application instances
// on one database, no cgo). sqlite.Open is the whole setup on SQLite; on
// PostgreSQL import the engine, run Migrate (or the SQL with your own
// migration tool) and call Open on your *sqlx.DB. Both pass the same
// conformance suite.
//
// # Mental model
//
// A delivery is one notification to one endpoint: its identity is
// (notification id, endpoint), its payload bytes are fixed at enqueue and
// sent byte for byte on every attempt. Enqueue writes it in the caller's
// transaction, so it exists exactly when the caller's business rows do.
// A client.Worker then moves it through its states:
//
//	pending --claim--> leased --2xx + valid Ack--> succeeded
//	                     |--retry--> retry_wait --due--> leased
//	                     |--permanent failure, budget or deadline spent--> failed
//	                     |--subscription changed or disabled--> suppressed
//	                     |--payload no longer matches its digest--> quarantined
//	                     '--lease expired (its worker died)--> retry_wait or failed
//
// Which file decides each transition:
//
//	enqueue.go, command.go, publish.go  -> pending (idempotent: same identity and content is a no-op, other content ErrIdempotencyCollision)
//	claim.go                            pending/retry_wait -> leased, or -> failed (expired) once the deadline
//	                                    has come; expired leased -> retry_wait/failed;
//	                                    leased -> quarantined (integrity), suppressed (subscription changed)
//	settle.go                           leased -> succeeded, retry_wait, failed (fenced by the lease's token;
//	                                    a retry past the budget or the deadline fails); leased -> pending/retry_wait (release)
//	delivery.go                         pending/retry_wait -> suppressed (Cancel); failed -> pending (Redrive)
//	endpoints.go                        an endpoint's breaker: closed, open, half_open, disabled
//	contracts.go                        an endpoint held back while a changed contract is unresolved
//
// # The deadline
//
// Every delivery has a deadline (EnqueueParams.Deadline, by default the
// Store's RetryHorizon after enqueue), and no attempt starts at or after
// it. A due delivery whose deadline has come is never leased: the claim
// that reaches it ends it failed with code expired instead, after an
// outage of the workers as much as after a long series of retries. A
// retry that would be due at or after the deadline fails the delivery
// when it is settled, and a lease that expires at or after the deadline
// is reclaimed as failed. A delivery the claim ends this way was never
// attempted again, so the attempts log has no row for it; its status,
// code and update time say what happened.
//
// The worker's policy (which answers retry, how long to wait) is package
// client's; the store only fences and records. Every attempt is recorded
// in the attempts log (no payload, header or secret content), and so is
// every claimed delivery the claim takes out of circulation
// (quarantined, suppressed).
//
// # Integrity
//
// Open runs the schema guard: courier's tables must be at this courier's
// version with exactly the columns its migrations made. Claims keep
// checking, cheaply: a schema altered after Open stops them with code
// schema_altered, leasing nothing (SQLite notices at the next claim, from
// its schema cookie; PostgreSQL within seconds, from its catalog). A
// claim verifies what it touches: each claimed payload against its
// digest (or the delivery is quarantined). Outbox.Health reads counts
// only; Outbox.Check, for a periodic job, adds the engine's own integrity
// check, the schema guard and a bounded, rotating validation of stored
// rows.
//
// The Inbox is the receiver's: one record per (verified sender, dedupe
// key), written in the transaction of the application's own effects, so a
// redelivery is answered with the stored Ack and never processed twice.
//
// All times are stored as unix microseconds. Every method takes a context
// and is safe for concurrent use.
package store

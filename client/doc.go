// Package client is courier's sender side at work: the delivery Worker and
// the SSRF-safe HTTP transport it sends through ([Guard]).
//
// # Mental model
//
// A Worker repeats one cycle over the outbox of a store.Store:
//
//  1. Claim: lease a batch of due deliveries (priority, due time, age),
//     each under a random token that expires after Config.Lease. A lease
//     is the only right to settle a delivery: a worker that stalls past
//     it loses the delivery to another, and its late outcome is refused.
//  2. Attempt: sign the stored bytes with Config.Signer (fresh per
//     attempt: timestamps and nonces), POST them within Config.Timeout
//     through Config.Transport, and judge the answer. A 2xx is judged by
//     the delivery's Ack profile (package ack): an answer that does not
//     prove receipt of these bytes fails with ack_invalid. Anything else
//     is judged by Config.Classify (retry or fail, with a code), and a
//     retry waits as Config.Backoff says, honouring Retry-After.
//  3. Settle: record the outcome, fenced by the lease, together with the
//     outcomes of attempts that finished meanwhile (one transaction for
//     many deliveries under load).
//
// Run does this until its context is done, woken within milliseconds of a
// committed enqueue where the engine can tell (in-process on SQLite,
// pg_notify on PostgreSQL) and polling otherwise; Work does one cycle and
// returns, for tests and schedulers of one's own. Any number of workers,
// in any number of processes, may share one outbox.
//
// Sending is closed by default: the zero Guard lets requests reach only
// https on port 443 at public addresses, checked at dial time, and no
// redirect is followed. Open it explicitly (Guard's fields) for private
// networks and tests.
package client

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
//     The claim takes no more of one endpoint's deliveries than it has
//     room for (see Delivery control below) and only the next delivery of
//     each ordering key.
//  2. Attempt: an attempt starts only while its lease still covers a
//     whole Config.Timeout and the delivery's deadline has not come (by
//     the worker's clock): otherwise the delivery is given back unsent,
//     its attempt not counted, or, past its deadline, ended failed with
//     code expired (its lease logged as an attempt without a request, no
//     HTTP status). Sign the stored bytes with Config.Signer (fresh per
//     attempt: timestamps and nonces); if the lease no longer covers a
//     whole Timeout once they are signed (a slow Config.SignerFor), give
//     the delivery back unsent as well, and if its deadline came
//     meanwhile, end it expired unsent. A signing that alone took more
//     than Lease less Timeout is not given back but retried unsent, its
//     attempt counted, with code signing_failed after Config.Backoff:
//     given back, it would be claimed and signed as slowly at once, again
//     and again, never counted. POST them within Config.Timeout
//     through Config.Transport (Content-Type application/json, User-Agent
//     courier/1, the attempt's place in the delivery's budget in
//     ack.AttemptHeader), and judge
//     the answer; at most 16 KiB of it is read. A 2xx is judged by
//     the delivery's Ack profile (package ack): an answer that does not
//     prove receipt of these bytes fails with ack_invalid. Anything else
//     is judged by Config.Classify (retry or fail, with a code), and a
//     retry waits as Config.Backoff says, honouring Retry-After. A refusal
//     with an application/problem+json body keeps the receiver's own code
//     (validation_failed, plan_unknown, ...) beside courier's: on the
//     delivery, in the attempts log, the Event and the log line. It is
//     the body's top-level "code", kept when it has courier.Code's form
//     and the body, at most 4 KiB, arrives within a second.
//  3. Settle: record the outcome, fenced by the lease, together with the
//     outcomes of attempts that finished meanwhile (one transaction for
//     many deliveries under load). A settle the database refuses for a
//     passing reason (busy, a lost connection) is tried again for as long
//     as the lease lasts, so a delivery that was sent is not sent again.
//
// Run does this until its context is done, woken within milliseconds of a
// committed enqueue where the engine can tell (in-process on SQLite,
// pg_notify on PostgreSQL) and polling otherwise; Work does one cycle and
// returns, for tests and schedulers of one's own. Any number of workers,
// in any number of processes, may share one outbox.
//
// # Delivery control
//
// Three rules, all decided in the database by the claim (package store
// says how), keep endpoints from hurting each other and receivers from
// being overrun:
//
//   - Fair share. A worker holds at most Config.EndpointConcurrency
//     deliveries of any one endpoint at once (by default half its
//     Concurrency, rounded up). An endpoint that answers in five seconds,
//     or not at all until its breaker opens, with a deep backlog, holds
//     that share and no more; the other endpoints' deliveries go through
//     the rest of the slots meanwhile. The slots come back as the
//     endpoint's attempts are settled, given back, or their leases expire.
//     The share is each endpoint's, so at the default two stalled
//     endpoints hold every slot: a worker sending to many receivers, a
//     few of which may stall at once, sets a smaller share.
//   - Endpoint limits. store.Endpoints.SetLimits gives an endpoint a
//     maximum of deliveries in flight and a rate (requests per second,
//     with a burst), held across every worker of every process sharing
//     the database. A worker that finds an endpoint's bucket empty
//     claims it again at its next poll or wake-up: keep
//     Limits.Burst ≥ Rate × PollInterval for the rate to be reached.
//   - Ordering keys. Deliveries enqueued with the same
//     store.EnqueueParams.OrderingKey to the same endpoint are sent one
//     at a time in enqueue order: the next becomes claimable when the one
//     before it succeeds (or is suppressed or cancelled). A retry holds
//     its key, not the endpoint, and not the worker's slots; a delivery
//     that fails for good holds its key (store.OrderingHoldKey) or lets the next
//     go (store.OrderingSkipFailed), as store.Config.OrderingOnFailure says.
//
// # Stopping
//
// Worker.Stop is the soft shutdown (SIGTERM): no more claims, deliveries
// claimed and not started given back uncounted, attempts in flight
// finished and settled, and cut short only when Stop's context ends (Stop
// then returns its context's error at once; Run returns when the attempts
// cut short are settled). Cancelling Run's context is the hard one:
// attempts in flight are cut short at once. Either way no lease is left
// behind: an attempt cut short is settled as a retry with code
// worker_stopped, due again at once, for any worker. It is counted and
// logged as an attempt, but spares the delivery's budget, which grows by
// one: a stop during a delivery's last attempt does not fail it (its
// deadline still ends it). Call Stop from any goroutine but
// Config.Hook's: the Hook runs on an attempt's goroutine, which Stop waits
// for.
//
//	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
//	defer cancel()
//	go func() {
//		<-ctx.Done()
//		grace, done := context.WithTimeout(context.Background(), 20*time.Second)
//		defer done()
//		w.Stop(grace)
//	}()
//	err := w.Run(context.Background()) // returns when Stop lets it
//
// # Logs
//
// Config.Logger (without one, slog.Default(), which hears the Warn and
// Error lines alone) hears of every delivery that fails for good and every
// destination the guard refuses (Warn), every retry from the third
// attempt on (Info), with the codes (code, remote_code, http_status) and
// the endpoint redacted (scheme and host, "/…" for a path: never userinfo,
// path or query, any of which may be a credential) and by its ref
// (endpoint_ref), which the ops page and the CLI show too; and of every
// endpoint whose circuit breaker opens (Warn, with the reason and until
// when), disables it (Warn) or closes again (Info), once each time, by
// the worker whose attempt moved it. A line never holds payload, header
// or key content.
//
// Every line the worker logs, by level. A line about an attempt names its
// delivery, attempt, endpoint and endpoint_ref, and its codes; error is a
// cause (the transport's, the store's, the guard's reason), which names
// addresses and host names, never what the other side sent. The error of
// a Config.SignerFor, a Signer or a Transport of your own is logged with
// every URL in it redacted as the endpoint is, for it may name a key
// store's or a proxy's URL with a credential; keep other secrets out of
// such errors:
//
//	Error  worker: settle failed                         every write of an outcome failed while its lease lasted,
//	                                                     or the store refused it as invalid (error)
//	Error  worker: delivery quarantined at claim, not sent   its stored bytes altered, or unreadable under the Store's keys
//	Error  worker: claim failed                          (error)
//	Error  worker: release failed                        (error)
//	Error  worker: attempt panicked; retried later       a callback's panic, its value not logged
//	Error  worker: attempt panicked; given back unsent   one after a hard shutdown, before the request was sent
//	Error  worker: Hook panicked; the panic was dropped
//	Error  worker: Now panicked
//	Warn   worker: delivery failed                       failed for good (code; error: why no answer came, or why an answer was no Ack)
//	Warn   worker: destination refused                   the Guard refused it (error: the scheme, the port, the kind of address; the Guard's fields that open it)
//	Warn   worker: lease lost before settling            another worker holds the delivery now
//	Warn   worker: lease too short to start an attempt, released   (see Config.Lease)
//	Warn   worker: signing took more of the lease than a Timeout leaves, retried later
//	Warn   worker: request not written within its Timeout, released
//	Warn   worker: attempt outlived its lease            a callback ignores its context (see Config)
//	Warn   worker: endpoint's breaker opened, its deliveries paused   (code: the reason; open_until)
//	Warn   worker: endpoint disabled by its breaker, until an operator enables it
//	Warn   worker: wake-ups unavailable, polling         (see Config.PollInterval)
//	Warn   worker: wake-ups lost, listening again
//	Warn   worker: expired leases taken back            a worker died or stalled holding them, or its settle or
//	                                                     release failed: their attempts count (deliveries)
//	Warn   worker: stop deadline passed, cutting attempts short
//	Warn   worker: Store closed; claimed deliveries left to their leases   once per Run or Work that ends so
//	Warn   worker: HTTPS_PROXY is set and not used: …    or https_proxy, HTTP_PROXY, http_proxy: once per worker (see Guard.Transport)
//	Info   worker: delivery retrying                     from the third attempt on
//	Info   worker: delivery suppressed at claim, not sent   its subscription changed
//	Info   worker: endpoint's breaker closed, its deliveries resumed
//	Info   worker: stopping
//	Info   worker: wake-ups back
//	Debug  worker: attempt settled                       every other attempt
//	Debug  worker: endpoint's probe failed, its breaker open again
//	Debug  worker: released unstarted deliveries
//	Debug  worker: store write failed, trying again      (error)
//
// Sending is closed by default: the zero Guard lets requests reach only
// https on port 443 at public addresses, checked at dial time, and no
// redirect is followed. Open it explicitly (Guard's fields) for private
// networks and tests.
package client

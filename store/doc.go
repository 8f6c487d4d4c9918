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
// (notification id, endpoint), the endpoint being its URL with scheme and
// host in lower case and without the scheme's default port (every
// spelling of one receiver's URL is one endpoint; see Endpoints). Its
// payload bytes are fixed at enqueue and sent byte for byte on every
// attempt. Enqueue writes it in the caller's
// transaction, so it exists exactly when the caller's business rows do.
// A client.Worker then moves it through its states:
//
//	pending --claim--> leased --2xx + valid Ack--> succeeded
//	                     |--retry--> retry_wait --due--> leased
//	                     |--permanent failure, budget or deadline spent--> failed
//	                     |--subscription changed or paused--> suppressed
//	                     |--payload cannot be opened or no longer matches its digest--> quarantined
//	                     '--lease expired (its worker died)--> retry_wait or failed
//
// What moves each transition:
//
//	Outbox.Enqueue, EnqueueMany,     -> pending (idempotent: same identity and content is a no-op, other content CodeIdempotencyCollision)
//	EnqueueCommand, Publish          (Publish again: suppressed subscription_changed -> pending)
//	a worker's claim                 pending/retry_wait -> leased, or -> failed (expired) once the deadline
//	                                 has come; expired leased -> retry_wait/failed;
//	                                 leased -> quarantined (integrity, payload unreadable), suppressed (subscription changed)
//	a worker's settle                leased -> succeeded, retry_wait, failed (fenced by the lease's token;
//	                                 a retry past the budget or the deadline fails; an attempt cut short
//	                                 as its worker stopped, worker_stopped, spares the budget: it grows
//	                                 by one); leased -> pending/retry_wait (release)
//	Outbox.Cancel                    pending/retry_wait/failed/quarantined -> suppressed
//	Outbox.Redrive                   failed, quarantined payload_unreadable -> pending
//	Endpoints                        an endpoint's breaker (closed, open, half_open, disabled) and its limits
//	                                 (deliveries in flight, rate and burst)
//	EnqueueParams.OrderingKey        which delivery of a key is claimable next
//	Contracts                        an endpoint held back while a changed contract is unresolved
//
// (In the source, by row: enqueue.go, command.go and publish.go; claim.go;
// settle.go; delivery.go, for Cancel and Redrive; endpoints.go and
// limits.go; ordering.go; contracts.go.)
//
// # In the application's transaction
//
// Enqueue, EnqueueMany, EnqueueCommand and Publish (and package postgres's
// Enqueue, EnqueueMany and Publish, on a pgx.Tx) write in the transaction
// they are given, as the application set it up, and their errors say what
// became of it:
//
//   - CodeDatabaseUnavailable: the database ended the statement, and with
//     it (on PostgreSQL) the transaction. Roll it back and run it again
//     whole, business writes included: a serialization failure (40001) or
//     deadlock (40P01), a lock_timeout or statement_timeout of the
//     transaction's, a lost connection, or a transaction a failure before
//     the enqueue had aborted already (25P02; the error says so). An
//     enqueue the retry makes again finds what an earlier try committed
//     (Existed), so a retried transaction ends with one delivery, as long
//     as it carries the same payload: build it from the business data,
//     not from the clock or a random source, or the retry after a commit
//     whose answer was lost is an idempotency collision. A few
//     causes of this code do not pass by themselves, and the error carries
//     the database's words for them: a read-only transaction or database.
//     Bound the retries.
//   - CodeConfigInvalid: the transaction cannot reach courier's tables
//     (it is on another database than the one migrated, or its
//     search_path leaves courier's schema out) or its role lacks their
//     privileges. No retry helps until the setup is mended; the error
//     carries the database's words.
//   - CodeInvalidArgument (a violated constraint too, which is also
//     CodePayloadInvalid) and CodeIdempotencyCollision: the enqueue itself
//     is refused, and would be again; no retry helps. A refusal before any
//     statement ran (invalid input, a collision) leaves the transaction as
//     it was. A statement that failed (a violated constraint) leaves a
//     PostgreSQL transaction aborted, to go on only from a savepoint taken
//     before the enqueue; and EnqueueMany's refusal of one delivery may
//     leave others of its batch written: roll back, to such a savepoint at
//     least.
//
// The application's own Commit may fail with a serialization failure as
// well, in its driver's words: that too is a transaction to run again.
//
// Any isolation level serves. At READ COMMITTED (PostgreSQL's default) a
// second transaction enqueueing a delivery, publishing an event or
// joining an ordering key that a first one holds uncommitted waits for
// it, then finds the delivery Existed (or takes its turn behind the
// first's on the key). At REPEATABLE READ or SERIALIZABLE, PostgreSQL
// cannot show it a row its snapshot predates, and ends it with a
// serialization failure instead, as above; keep transactions that
// enqueue with ordering keys at READ COMMITTED, where they take turns
// rather than fail. On PostgreSQL Store.Begin begins at
// READ COMMITTED whatever the default; begin on DB() with sql.TxOptions
// for another level.
//
// A savepoint the application rolls back to undoes the enqueues made
// after it entirely: their rows, their ordering keys' turns and, on
// PostgreSQL, their wake-ups (a transaction left with none wakes no
// worker); what survives commits with the transaction. A read-only
// transaction refuses the enqueue, CodeDatabaseUnavailable as above.
// Courier's statements run under the transaction's settings: a SET
// LOCAL statement_timeout or lock_timeout bounds them too, a role must
// hold courier's privileges, and the search_path must lead to courier's
// tables, which are named without a schema: one that leads to another
// courier's tables first (another tenant's schema) writes there. On SQLite,
// the transaction may belong to another pool on the same file; see
// package sqlite for transactions that begin deferred.
//
// # Delivery control
//
// A pending or retrying delivery may be due and still not claimable: it is
// held (Delivery.Held), out of the due index the claim reads, so that no
// claim ever walks over it. There are two holds.
//
// Held by its endpoint (HeldByEndpoint): the claim that reached it found
// the endpoint without room. An endpoint's room, reckoned by each claim
// in its own transaction, is the least of
//
//	the claiming worker's share: its client.Config.EndpointConcurrency
//	                             less the leases that worker holds on the endpoint
//	the endpoint's MaxInFlight:  less every lease on it, by any worker (Endpoints.SetLimits)
//	the endpoint's Rate:         the whole tokens in its bucket, which refills at Rate up to Burst
//	its breaker:                 none while it is open, half open or disabled, but for its
//	                             probe, which takes the room (a slot, a token) of one lease
//
// A claim leases an endpoint's due deliveries, in claim order, while it has
// room and parks the rest: once it finds an endpoint without room it parks
// that endpoint's due backlog in one statement (at most 10,000 rows per
// claim, so a deeper one is parked over a few claims, each row once). Every
// claim first looks at the endpoints with parked deliveries (one index step
// each, however many are parked), the one parked longest first, and gives
// each as many as it has room for: being the oldest due, they are the next
// it leases, but for deliveries of a lower priority waiting in the due
// index or parked at another endpoint (a removal enqueued behind parked
// changes), which come first. An endpoint without limits has them leased
// straight from its parked rows when all are of the lowest priority
// waiting; otherwise, and for one with limits, they are put back in the
// due index, for the statements that lease in claim order and lock its
// limits row. A breaker's probe goes before all of them, whatever its
// priority, so that a recovering endpoint is never starved by the others'
// backlog. A delivery given back (a release) behind parked ones of its
// endpoint is parked too, keeping its place. Leases are counted
// from the leased rows themselves, so a settle, a release, a reclaimed
// lease each give their slot back with no counter to keep; the token
// buckets live in courier_endpoint_limits. On PostgreSQL a claim locks
// the limits row of each limited endpoint it picked rows of, until it
// commits, and counts leases and tokens in a statement that starts after
// those locks: two workers in two processes never both take the last
// slot or token; a breaker's probe is counted the same way, under the
// same lock. A claim never waits for a limits row another claim holds:
// it leaves that endpoint's rows due, for the claim that holds it or the
// next, and picks on past them for the other endpoints' (the rows it
// picked and left stay locked until it commits). On SQLite the one writer
// gives the same.
//
// Held by its ordering key (HeldByKey): within (endpoint,
// EnqueueParams.OrderingKey) a delivery is claimable only once every
// delivery enqueued before it has finished. courier_ordering_keys holds
// one row per key with an unfinished delivery, naming its head (the one
// claimable, in flight, or waiting for its retry). An enqueue with a key
// joins it: it heads the key when the key has no row, and otherwise waits
// behind; enqueues of one key take turns on that row's lock until they
// commit. Whatever finishes a head (a settle, an expiry at claim, a
// reclaimed lease out of attempts, quarantine or suppression at claim,
// Cancel) promotes the next delivery of the key in enqueue order, or
// removes the key's row when none is left. The worker's settles and claims
// never wait for a key's row: while an application's transaction that
// joined the key holds it, the finished head is left heading it, and the
// claims that follow move the key on once the row is free (soon, in the
// process that left it; within 30 seconds in any other). A retry keeps
// its key: the deliveries behind it wait, while other keys and the endpoint's other
// deliveries flow. A head that fails for good (failed, or quarantined)
// does what Config.OrderingOnFailure says: OrderingHoldKey (the default) keeps
// the key blocked (Endpoints.BlockedKeys lists it) until an operator
// redrives the head (sent again, first) or cancels it (the next goes; a
// quarantined head is redriven only if its payload could not be opened,
// payload_unreadable, and an altered one can only be cancelled);
// OrderingSkipFailed promotes the next at once, and a later Redrive of the failed
// one sends it after the key's current head. A delivery waiting for its
// key is ended by its deadline only once it heads the key.
//
// Commands (EnqueueCommand) take no ordering key: their order is the
// source-delivery contract's, pinned per endpoint (see Contracts); the
// endpoint limits and fair share apply to them as to any delivery. A
// terminal notification may carry an ordering key like any Enqueue.
//
// # The deadline
//
// Every delivery has a deadline (EnqueueParams.Deadline, by default the
// Store's RetryHorizon after its first attempt is due), and no attempt starts at or after
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
// version with exactly the columns its migrations made, and the indexes
// and triggers its queries rely on (by name: an index a claim reads, the
// trigger that deletes a delivery's payload with it on SQLite), or at a
// newer courier's that this one may run on (see Upgrades). Claims keep
// checking, cheaply: a schema altered after Open stops them with code
// schema_altered, leasing nothing (SQLite notices at the next claim, from
// its schema cookie; PostgreSQL within seconds, from its catalog's
// columns, and an index or trigger dropped at the next Open or Check). A
// claim verifies what it touches: each claimed payload against its
// digest (or the delivery is quarantined). Outbox.Health reads counts,
// and looks whether the database's files are still the ones the Store
// opened; Outbox.Check, for a periodic job, adds the engine's own
// integrity check, the schema guard and a bounded, rotating validation of
// stored rows.
//
// The Inbox is the receiver's: one record per (verified sender, dedupe
// key), written in the transaction of the application's own effects, so a
// redelivery is answered with the stored Ack and never processed twice.
//
// # Retention
//
// What courier's tables record for the past stays until a retention pass
// deletes it: run them from a periodic job (or the courier prune
// command), each in short bounded statements (PruneParams). A pass is four
// calls, and the courier prune command makes the same four:
//
//	Outbox.Prune          finished deliveries, and dead endpoints' breaker records, after OlderThan
//	Outbox.PruneAttempts  the attempts log, after OlderThan
//	Inbox.Prune           the receivers' records, after OlderThan (at least 24 hours)
//	ReplayCache.Prune     the RFC 9421 nonces, once each has expired (OlderThan changes nothing)
//
// Seven days for each OlderThan (the command's default) is a safe start:
// longer than a sender's 72-hour retry horizon and its last hour, so a
// redelivery still finds its inbox record and an application's enqueue
// retried within the window still finds its delivery; longer if failed
// deliveries may be redriven later than that (see Inbox.Prune). Run the pass
// every hour or so, from one process or many (each call is safe beside
// another): each run deletes what aged past the window since the last, so the
// tables hold the window's traffic and an hour more, and no run deletes much
// at once. ExampleOutbox_Prune is such a pass. A Store opened for the
// pass alone takes the workers' Config.Breaker: its DisableAfter tells
// the endpoints their breaker disabled, whose records go, from those an
// operator disabled, which stay. What each table keeps:
//
//	courier_outbox           succeeded and suppressed deliveries go after OlderThan (Outbox.Prune);
//	                         unfinished ones, and failed or quarantined ones, stay until an
//	                         operator settles them (Outbox.Cancel, Outbox.Redrive)
//	courier_outbox_payload   (SQLite) a delivery's payload, deleted with its delivery
//	courier_attempts         rows go after OlderThan (Outbox.PruneAttempts)
//	courier_endpoints        the breaker records of endpoints with nothing left to send go after
//	                         OlderThan (Outbox.Prune): failing, open, and those the breaker disabled
//	                         (410 Gone, or failing for Config.Breaker.DisableAfter); one an operator
//	                         disabled (Endpoints.Disable) stays until Endpoints.Enable
//	courier_ordering_keys    a key's row goes with its last unfinished delivery; a key blocked by a
//	                         failed head (OrderingHoldKey) stays until that head is cancelled or redriven
//	courier_inbox            records go after OlderThan, at least 24 hours and longer than the
//	                         senders retry (Inbox.Prune): the receivers' records, and on a
//	                         sender's Store the publish API's Idempotency-Key records
//	                         (handler.NewPublish), pruned alike
//	courier_replay, _counts  pairs go once expired, their counts with them (ReplayCache.Prune)
//	courier_endpoint_limits  an operator's or application's setting: stays until the zero Limits
//	                         (Endpoints.SetLimits)
//	courier_contracts        a pin, set by the first command to an endpoint or by Contracts.Pin,
//	                         stays until Contracts.Unpin: it is what holds back a later command
//	                         built for another contract, however long the endpoint was idle
//	courier_subscriptions    the application's (Subscriptions): paused by Update, removed by Delete
//
// So the tables an operator does not tend grow with the traffic of the
// retention window, and the others with what operators and the
// application set or leave unsettled: failed deliveries, blocked keys,
// disabled endpoints, limits, pins and subscriptions, one row each,
// which Outbox.Health, Endpoints.List, Contracts.List and
// Subscriptions.List show. A payload key retired from Config.Encryption
// keeps rows until the pass deletes them: Store.KeysInUse says when it
// keeps none. The space deleted rows held is reused for new ones
// (PostgreSQL's autovacuum makes it reusable); a SQLite file does not
// shrink without a VACUUM.
//
// # Upgrades
//
// A rolling deploy runs two releases on one database for a while: the new
// release migrates (Migrate, or its files with your own tool) while the
// processes of the one it replaces keep enqueueing, claiming, settling
// and receiving, and one of them may restart, and migrate on start,
// before the rollout ends. Courier's migrations are made for it:
//
//   - They only add: tables, indexes, and columns that are NULL (or take a
//     default) for the rows and the inserts of a release that does not
//     know them, with constraints its writes meet. Courier's SQL names
//     every column it reads or writes, so a release runs on the schema of
//     the releases after it. A migration that would remove, rename or
//     change the meaning of something an earlier release uses is made in
//     two releases: the first stops using it, the next changes it.
//   - An earlier courier serves on that newer schema: Open and the claims
//     of a running Store accept a newer version as long as courier's
//     tables still have every column the earlier courier knows, in its
//     order (a newer courier's columns come after), and the indexes and
//     triggers it relies on (SQLite's queries name some), and Migrate finds
//     nothing to apply. So the processes being replaced keep delivering
//     while the new release rolls out, one that restarts starts again,
//     and rolling back to the earlier release needs no migration down.
//   - A newer migration an earlier courier must not run on (one courier
//     never made without the two steps above, or a change it could not
//     make in two) says so in courier_schema, and the earlier courier's
//     Open, Migrate and claims refuse the schema with schema_too_new:
//     its processes stop claiming (their enqueues, settles and receivers
//     go on, unless the migration removed a column they write; the
//     deliveries wait for the new release's workers) and one that
//     restarts does not start. That release's notes say so; deploy it
//     with every process of the earlier one stopped, or expect this.
//     SQLite's migration 13 is one: it moves every payload out of
//     courier_outbox into a table of its own, so that a claim or settle,
//     which changes the size of the delivery's row, no longer writes the
//     payload again (SQLite writes such a row whole); the earlier
//     courier's enqueues, which write the column, fail, and so does
//     every read of a delivery's payload it makes (Get, its admin's
//     delivery page, Check).
//
// Couriers from before these upgrades refuse every newer version, as that
// last case: their processes stop claiming once the new release's
// migration commits, and one that restarts fails with schema_too_new, so
// replace them promptly and do not roll back to them once it has run.
//
// A migration locks what it alters until Migrate commits. On PostgreSQL,
// adding a column takes courier_outbox ACCESS EXCLUSIVE, and every
// enqueue, claim and settle of every process waits for it; Migrate waits
// for that lock at most a second at a time (unless the connection sets a
// lock_timeout of its own), stepping aside between tries so that a long
// application transaction that enqueued does not stop the outbox behind
// it, and gives up after 30 tries. No migration rewrites a table on
// PostgreSQL (a column added with no default, or a constant one, changes
// the catalog only); a column's CHECK constraint, or an index built, costs
// one read of the table, and a release's migrations apply in one
// transaction, under the lock the first takes (the latest release's, 13
// to 16, a column with its CHECK, two indexes, and a column whose CHECK
// is NOT VALID, which reads no row: three reads, held
// courier_outbox about 1 s for 200,000 deliveries on a shared 2-core
// machine, TestTheLatestMigrationsLockOnALargeOutbox). On
// SQLite the migration holds the write lock, and a column's CHECK has
// SQLite check the whole table with its indexes (PRAGMA quick_check)
// before it commits: about 0.8 s for 200,000 deliveries, during which
// other writers wait (up to the busy timeout, 10 s, then fail busy).
// SQLite's migration 13 copies every payload and rewrites every row of
// courier_outbox without it: about 2.5 s for 200,000 deliveries of a few
// bytes there, more with larger payloads; it needs free disk space for
// about twice the outbox's payloads (the copy, and the rewritten table in
// the -wal file; a migration that runs out rolls back whole), and the
// file keeps the pages it frees until a VACUUM.
// Prune before upgrading a large outbox either way.
//
// # Clocks
//
// Every time the store writes or compares (leases, due times, deadlines,
// breakers, rate buckets, records, prunes) is read from Config.Now, which
// on PostgreSQL defaults to the database server's clock, as each process
// keeps it (see Config.Now): the processes sharing the database need not
// agree with each other, only the server's clock must be right. A step of
// it reaches each process at its next reading (within a minute, in a
// process that keeps beginning transactions); until then, a process that
// has not read it again takes the leases the others stamped for as much
// shorter (or longer) as the step. What the stamps are compared with is
// that clock too, not the host's: EnqueueParams.NotBefore and Deadline
// are instants on it, so a time computed from a host's time.Now carries
// that host's skew (a Deadline 5 minutes ahead on a host 6 minutes behind
// the server is refused as already come; a NotBefore on a host ahead
// waits that much longer).
//
// The other ends read their hosts' own clocks, and there skew matters: a
// worker signs each attempt at its client.Config.Now, which the receiver
// checks against its own clock (see client.Config.Now), and a receiver's
// verifier checks a signature's window on its host's clock, which may run
// at most 5 minutes behind the Store's for the replay cache to refuse
// every replay (ReplayCache.Remember).
//
// A Config.Now set by hand is taken as it is, on every engine: processes
// sharing PostgreSQL then each stamp with their own, and must agree. One
// whose clock is d ahead of another's ends that one's leases d early (it
// sends a delivery again while the lease's holder may still be sending
// it, whose outcome is then refused, and counts the lease out of the
// endpoint's MaxInFlight; keep d well below a worker's Lease less its
// Timeout), judges breakers, due times and deadlines d early, and prunes
// records d early. An endpoint's Rate holds while their clocks agree
// within a minute; further apart, a claim takes a stamp more than a
// minute ahead of its own clock for a step back and refills the bucket
// whole, each time the two alternate.
//
// All times are stored as unix microseconds. Every method that reaches the
// database takes a context, and every method is safe for concurrent use.
package store

-- courier's queries for PostgreSQL: the outbox: enqueue, claim, settle, and what operators read and do.
-- store/sqlite/sql/queries/outbox.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: outbox_enqueue
-- As in SQLite (a conflict on either unique index inserts nothing; a
-- delivery with an ordering key is inserted waiting for it), plus pg_notify: it is queued with the transaction and
-- delivered to listening workers only when the caller commits. Identical
-- notifications in one transaction are folded into one.
WITH inserted AS (
    INSERT INTO courier_outbox (
        notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, event_type, dedupe_key, trace_parent, trace_state, ordering_key, hold, status,
        priority, attempts, max_attempts, enqueued_max_attempts, next_attempt_at, deadline, created_at, updated_at
    ) VALUES (
        :notification_id, :endpoint, :payload, :payload_key_id, :payload_sha256, :profile, :key_id, :subscription_id, :subscription_fingerprint, :event_type, :dedupe_key, :trace_parent, :trace_state, :ordering_key, :hold, 'pending',
        :priority, 0, :max_attempts, :enqueued_max_attempts, :next_attempt_at, :deadline, :now, :now
    )
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT id FROM inserted, pg_notify('courier_outbox', '');

-- name: outbox_enqueue_existing
-- The row an enqueue met, for the store to compare, and whether it still
-- waits for its ordering key (hold), which the enqueue then joins again
-- (see writeFor in store/enqueue.go); a publish also reads its state, the
-- subscription it was published to (see outbox_publish_refresh,
-- outbox_publish_revive) and the type of the event it carries. The
-- budget compared is the one the enqueue asked for (enqueued_max_attempts,
-- migration 13), which a redrive or a revival does not raise; NULL for a
-- row enqueued before it, whose max_attempts the store compares instead.
SELECT id, payload_sha256, payload_key_id, profile, key_id, max_attempts, enqueued_max_attempts, priority, ordering_key, hold,
    status, attempts, last_error_code, subscription_id, subscription_fingerprint, event_type
FROM courier_outbox WHERE notification_id = :notification_id AND endpoint = :endpoint;

-- name: outbox_publish_refresh
-- A publish again of an event whose delivery is unfinished but was
-- published under another fingerprint of its subscription (key or
-- profile changed since): the claim would suppress it, so it takes the
-- subscription as it is now (what it is signed with, its Ack profile, its
-- payload, sealed again) in place. Its schedule, attempts and lease stay:
-- an attempt in flight finishes under what it was claimed with, and the
-- next one, if any, is made under this. Conditional on the state the
-- store read: a row a claim or settle moved since is read again.
UPDATE courier_outbox SET payload = :payload, payload_key_id = :payload_key_id, payload_sha256 = :payload_sha256,
    profile = :profile, key_id = :key_id, subscription_fingerprint = :subscription_fingerprint, event_type = :event_type,
    trace_parent = :trace_parent, trace_state = :trace_state, updated_at = :now
WHERE id = :id AND status IN ('pending', 'retry_wait', 'leased');

-- name: outbox_publish_revive
-- As in SQLite (a delivery suppressed subscription_changed is sent again
-- under the subscription as it is now, with a fresh budget and horizon,
-- keeping the budget asked for in enqueued_max_attempts),
-- plus pg_notify, as outbox_enqueue: listening workers hear of it when
-- the caller commits.
WITH revived AS (
    UPDATE courier_outbox SET status = 'pending', payload = :payload, payload_key_id = :payload_key_id, payload_sha256 = :payload_sha256,
        profile = :profile, key_id = :key_id, subscription_fingerprint = :subscription_fingerprint, event_type = :event_type,
        trace_parent = :trace_parent, trace_state = :trace_state,
        enqueued_max_attempts = COALESCE(enqueued_max_attempts, max_attempts),
        max_attempts = LEAST(attempts + :max_attempts, :max_attempts_bound),
        next_attempt_at = :next_attempt_at, deadline = :deadline,
        hold = CASE WHEN ordering_key IS NOT NULL THEN 'key' END,
        last_error_code = NULL, last_status = NULL, last_remote_code = NULL, updated_at = :now
    WHERE id = :id AND status = 'suppressed' AND last_error_code = 'subscription_changed' AND attempts < :max_attempts_bound
    RETURNING id
)
SELECT id FROM revived, pg_notify('courier_outbox', '');

-- name: outbox_payload_write
-- PostgreSQL: nothing to do; the payload is a column of the delivery's
-- row, written by the statement that writes the row. TOAST keeps a large
-- one out of line, and an UPDATE that leaves it as it is (a claim, a
-- settle) does not copy it. SQLite keeps it in a table of its own, which
-- this statement writes there.

-- name: outbox_write_begin
-- PostgreSQL: nothing to do; one statement writes a delivery with its
-- payload, and a statement that fails aborts the transaction. SQLite's
-- are two, under a savepoint.

-- name: outbox_write_undo
-- PostgreSQL: nothing to do (see outbox_write_begin).

-- name: outbox_write_end
-- PostgreSQL: nothing to do (see outbox_write_begin).

-- name: outbox_reclaim_expired_leases
-- As in SQLite: the leases attempts_log_expired_leases logged (:ids, a
-- JSON array of their deliveries), each read by its id, by the primary
-- key whatever the plan. PostgreSQL: the log statement locked them, so
-- they are still the leases it logged; no other row is read or locked. A
-- lease it skipped (locked by another transaction then) may be free by
-- now; it waits for the next claim rather than being reclaimed without
-- its attempt logged.
UPDATE courier_outbox SET
    status = CASE WHEN attempts >= max_attempts OR :now >= deadline THEN 'failed' ELSE 'retry_wait' END,
    next_attempt_at = :now,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = CASE WHEN attempts < max_attempts AND :now >= deadline THEN 'expired' ELSE 'lease_expired' END,
    updated_at = :now
WHERE id = ANY (ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb)))
-- The rows that failed may have headed their ordering key; each row's
-- status and code are reported (EventSettled).
RETURNING id, endpoint, ordering_key, status, last_error_code;

-- name: outbox_claim_pick
-- As in SQLite: the next :limit due deliveries of one priority, in claim
-- order, from the due index (held rows are not in it).
-- PostgreSQL: FOR UPDATE SKIP LOCKED lets many workers claim at once, each
-- taking rows no other claimer holds. The limited endpoints' rows are
-- locked too: outbox_claim, a statement of its own with a snapshot taken
-- after those locks, then counts every lease and token the other claimers
-- committed, so no endpoint's limits are exceeded across processes. They
-- are taken SKIP LOCKED as well: a claim runs several picks, and waiting
-- for a limits row while holding another from an earlier pick, two
-- claims could wait for each other in a circle. A picked row whose
-- endpoint's limits row another claimer holds is busy: the claim leaves
-- it due, for that claimer or the next claim, and picks again past that
-- endpoint (:busy, a JSON array of endpoints the claim found busy: the
-- next pick leaves their rows out, so they neither fill its :limit nor
-- are locked again). The rows are picked once, in a MATERIALIZED CTE: as
-- an IN subquery the planner may rescan the LIMIT. The array is read
-- once, before the scan, and compared with an expression of the endpoint,
-- of which the planner keeps no statistics: compared with the column, an
-- endpoint that holds most of the backlog made it estimate that almost
-- no row passes, and it sorted the whole backlog instead of reading the
-- due index in order (135 ms a claim at 100,000 due, against 4 ms),
-- whatever :busy held.
WITH picked AS MATERIALIZED (
    SELECT o.id, o.endpoint FROM courier_outbox AS o
    WHERE o.status IN ('pending', 'retry_wait') AND o.hold IS NULL AND o.priority = :priority AND o.next_attempt_at <= :now
        AND (o.endpoint || '') <> ALL (ARRAY(SELECT jsonb_array_elements_text(:busy::jsonb)))
        -- Contract pinning (migration 4): an endpoint with an unfinished
        -- delivery enqueued under another digest than its pinned one is
        -- held back whole, until an operator acts (contract_changed).
        AND NOT EXISTS (SELECT 1 FROM courier_contracts AS k
                        JOIN courier_outbox AS m ON m.endpoint = k.endpoint
                        WHERE k.endpoint = o.endpoint
                            AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
                            AND (m.contract_sha256 < k.capabilities_sha256 OR m.contract_sha256 > k.capabilities_sha256))
    ORDER BY o.next_attempt_at, o.created_at, o.id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
limited AS MATERIALIZED (
    SELECT l.endpoint FROM courier_endpoint_limits AS l
    WHERE l.endpoint IN (SELECT endpoint FROM picked)
    FOR UPDATE SKIP LOCKED
)
SELECT p.id, p.endpoint, (l.endpoint IS NOT NULL) AS limited,
    (l.endpoint IS NULL AND EXISTS (SELECT 1 FROM courier_endpoint_limits AS x WHERE x.endpoint = p.endpoint)) AS busy
FROM picked AS p LEFT JOIN limited AS l ON l.endpoint = p.endpoint;

-- fragment: endpoint_room
-- As in SQLite: the room endpoint d.endpoint has for new leases now.
-- PostgreSQL: LEAST is the scalar least; floor takes the whole tokens.
-- Each count of an endpoint's leases stops at what it is compared with
-- (the worker's share :cap, the endpoint's max_in_flight): a room of 0
-- is no room, as one below 0 would be. The LIMIT bounds the planner's
-- price of the count as well: with a fleet's leases in the statistics
-- (20,000 to one endpoint), counts priced whole, for the hundred parked
-- endpoints the planner guesses, put outbox_claim_look above
-- jit_above_cost, and PostgreSQL compiled it at every claim (some 45 ms,
-- nothing parked).
CASE WHEN EXISTS (SELECT 1 FROM courier_endpoints AS b WHERE b.endpoint = d.endpoint AND b.state <> 'closed') THEN 0
ELSE LEAST(
    CASE WHEN :cap::bigint > 0 THEN :cap::bigint - (SELECT COUNT(*) FROM (SELECT 1 FROM courier_outbox AS f
                                    WHERE f.endpoint = d.endpoint AND f.status = 'leased' AND f.lease_owner = :owner
                                    LIMIT :cap::bigint) AS mine)
         ELSE 1000000 END,
    COALESCE((SELECT CASE WHEN l.max_in_flight > 0 THEN l.max_in_flight - (SELECT COUNT(*) FROM (SELECT 1 FROM courier_outbox AS f
                                                                          WHERE f.endpoint = d.endpoint AND f.status = 'leased'
                                                                          LIMIT l.max_in_flight) AS leased)
                          ELSE 1000000 END
              FROM courier_endpoint_limits AS l WHERE l.endpoint = d.endpoint), 1000000),
    COALESCE((SELECT CASE WHEN l.rate > 0 THEN floor(LEAST(l.burst, CASE WHEN l.tokens_at - :now > 60000000 THEN l.burst ELSE l.tokens + GREATEST(0, :now - l.tokens_at) * l.rate / 1e6 END))::bigint
                          ELSE 1000000 END
              FROM courier_endpoint_limits AS l WHERE l.endpoint = d.endpoint), 1000000))
END

-- name: outbox_claim
-- As in SQLite: leases the picked rows (:ids) each endpoint has room for
-- (endpoint_room), parks the rest, ends those past their deadline.
-- gen_random_uuid is evaluated per row. A parameter beside NULL in a CASE
-- has no type of its own; the casts give the column's.
WITH ranked AS MATERIALIZED (
    SELECT o.id, o.endpoint, o.deadline <= :now AS expired,
        row_number() OVER (PARTITION BY o.endpoint, o.deadline <= :now ORDER BY o.next_attempt_at, o.created_at, o.id) AS n
    FROM courier_outbox AS o
    -- An array, not IN (subquery): the planner sees the ids and reads
    -- them by the primary key, never the whole table.
    WHERE o.id = ANY (ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb)))
        AND o.status IN ('pending', 'retry_wait') AND o.hold IS NULL
),
room AS MATERIALIZED (
    SELECT d.endpoint,
        {{endpoint_room}} AS room
    FROM (SELECT DISTINCT endpoint FROM ranked) AS d
),
act AS MATERIALIZED (
    SELECT r.id, CASE WHEN r.expired THEN 'expire' WHEN r.n <= m.room THEN 'lease' ELSE 'park' END AS act
    FROM ranked AS r JOIN room AS m ON m.endpoint = r.endpoint
)
UPDATE courier_outbox SET
    status = CASE act.act WHEN 'expire' THEN 'failed' WHEN 'lease' THEN 'leased' ELSE status END,
    hold = CASE act.act WHEN 'park' THEN 'endpoint' END,
    attempts = CASE act.act WHEN 'lease' THEN attempts + 1 ELSE attempts END,
    lease_owner = CASE act.act WHEN 'lease' THEN :owner::text END,
    lease_token = CASE act.act WHEN 'lease' THEN replace(gen_random_uuid()::text, '-', '') END,
    leased_at = CASE act.act WHEN 'lease' THEN :now::bigint END,
    lease_expires_at = CASE act.act WHEN 'lease' THEN :lease_expires_at::bigint END,
    last_error_code = CASE act.act WHEN 'expire' THEN 'expired' ELSE last_error_code END,
    updated_at = CASE act.act WHEN 'park' THEN updated_at ELSE :now::bigint END
FROM act
WHERE courier_outbox.id = act.id
RETURNING courier_outbox.id, status, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, spared_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint, event_type, trace_parent, trace_state, ordering_key;

-- name: outbox_claim_look
-- What a claim reads before it leases anything, in one statement: one row
-- per endpoint with parked deliveries and the room it has now (none if no
-- endpoint has, and then one row with endpoint ''), each carrying the same
-- three answers: whether a lease has expired (attempts_log_expired_leases
-- would log one), whether an endpoint is due a probe (endpoint_probes
-- would find one), and the priorities that have waiting rows, lowest
-- first, as a JSON array. A claim at rest, its endpoints closed and its
-- leases live, so reads in one round trip what took four.
-- The parked endpoints by a loose index scan of courier_outbox_parked,
-- each step ORDER BY … LIMIT 1, not MIN: right after a claim parked a
-- backlog the statistics still count no parked row, and the planner then
-- aggregates MIN over the whole index instead of reading its first entry.
-- The priorities by a loose index scan of the due index: one O(log n)
-- step per distinct priority. Nothing is locked: a claim that unparks more
-- than an endpoint has room for by the time it leases parks the rest again.
WITH RECURSIVE e(endpoint) AS (
    SELECT (SELECT endpoint FROM courier_outbox WHERE hold = 'endpoint' ORDER BY endpoint LIMIT 1)
    UNION ALL
    SELECT (SELECT endpoint FROM courier_outbox WHERE hold = 'endpoint' AND endpoint > e.endpoint ORDER BY endpoint LIMIT 1)
    FROM e WHERE e.endpoint IS NOT NULL
),
prio(v) AS (
    SELECT MIN(priority) FROM courier_outbox WHERE status IN ('pending', 'retry_wait') AND hold IS NULL
    UNION ALL
    SELECT (SELECT MIN(priority) FROM courier_outbox WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority > prio.v)
    FROM prio WHERE prio.v IS NOT NULL
),
parked AS (
    SELECT d.endpoint,
        {{endpoint_room}} AS room,
        EXISTS (SELECT 1 FROM courier_endpoint_limits AS l WHERE l.endpoint = d.endpoint) AS limited,
        (SELECT p.next_attempt_at FROM courier_outbox AS p WHERE p.hold = 'endpoint' AND p.endpoint = d.endpoint
         ORDER BY p.priority, p.next_attempt_at, p.created_at, p.id LIMIT 1) AS first_due,
        -- As in SQLite: the first and last parked deliveries' priorities,
        -- and the lowest waiting in the due index (an InitPlan, read once;
        -- ORDER BY … LIMIT 1, as in the loose index scan above).
        (SELECT p.priority FROM courier_outbox AS p WHERE p.hold = 'endpoint' AND p.endpoint = d.endpoint
         ORDER BY p.priority, p.next_attempt_at, p.created_at, p.id LIMIT 1) AS first_priority,
        (SELECT p.priority FROM courier_outbox AS p WHERE p.hold = 'endpoint' AND p.endpoint = d.endpoint
         ORDER BY p.priority DESC LIMIT 1) AS last_priority,
        (SELECT priority FROM courier_outbox WHERE status IN ('pending', 'retry_wait') AND hold IS NULL ORDER BY priority LIMIT 1) AS lowest_due
    FROM e AS d WHERE d.endpoint IS NOT NULL
        -- A disabled endpoint has no room until Enable: its deliveries wait
        -- (and end at their deadline, outbox_expire_parked) without costing
        -- each claim its reckoning.
        AND NOT EXISTS (SELECT 1 FROM courier_endpoints AS x WHERE x.endpoint = d.endpoint AND x.state = 'disabled')
),
answers AS (
    SELECT
        EXISTS (SELECT 1 FROM courier_outbox WHERE status = 'leased' AND lease_expires_at <= :now) AS expired_leases,
        -- endpoint_probes's condition.
        EXISTS (SELECT 1 FROM courier_endpoints AS b
                WHERE b.state IN ('open', 'half_open') AND b.open_until <= :now
                    AND (b.state = 'half_open' OR b.open_until <> b.updated_at
                        OR EXISTS (SELECT 1 FROM courier_outbox AS q WHERE q.hold = 'endpoint' AND q.endpoint = b.endpoint))) AS probes_due,
        (SELECT COALESCE(json_agg(v ORDER BY v), '[]')::text FROM prio WHERE v IS NOT NULL) AS priorities
)
SELECT a.expired_leases, a.probes_due, a.priorities,
    COALESCE(d.endpoint, '') AS endpoint, COALESCE(d.room, 0) AS room, COALESCE(d.limited, false) AS limited,
    COALESCE(d.first_due, 0) AS first_due, COALESCE(d.first_priority, 0) AS first_priority,
    COALESCE(d.last_priority, 0) AS last_priority, d.lowest_due
FROM answers AS a LEFT JOIN parked AS d ON true;

-- name: outbox_park_due
-- As in SQLite. PostgreSQL: rows another claimer holds are skipped; the
-- rows are picked once, in a MATERIALIZED CTE (see outbox_expire_due).
WITH picked AS MATERIALIZED (
    SELECT id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority = :priority AND next_attempt_at <= :now
        AND endpoint = :endpoint AND deadline > :now
    ORDER BY next_attempt_at, created_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_outbox AS o SET hold = 'endpoint'
FROM picked
WHERE o.id = picked.id AND o.hold IS NULL;

-- name: outbox_unpark
-- As in SQLite, returning the priorities it put back. PostgreSQL: rows
-- another claimer holds are skipped; the rows are picked once, in a
-- MATERIALIZED CTE (see outbox_expire_due).
WITH picked AS MATERIALIZED (
    SELECT id FROM courier_outbox WHERE hold = 'endpoint' AND endpoint = :endpoint
    ORDER BY priority, next_attempt_at, created_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_outbox AS o SET hold = NULL
FROM picked
WHERE o.id = picked.id AND o.hold = 'endpoint'
RETURNING o.priority;

-- name: outbox_expire_due
-- Called after a claim statement ended expired rows (see outbox_claim):
-- the claim sweeps on through the next :limit due rows of the priority, in
-- claim order, and ends those whose deadline has come, so a backlog of
-- expired rows (workers down for longer than the horizon) is ended in one
-- bounded statement rather than a claim batch at a time. Rows held back
-- (contract) are ended too: none of them may be sent any more.
-- PostgreSQL: rows another claimer holds are skipped. The rows are picked
-- once, in a MATERIALIZED CTE: as an IN subquery the planner may rescan
-- the LIMIT for every row, each rescan skipping the rows this statement
-- already ended and picking further ones, well past :limit.
WITH picked AS MATERIALIZED (
    SELECT id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority = :priority AND next_attempt_at <= :now
    ORDER BY next_attempt_at, created_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_outbox AS o SET status = 'failed', last_error_code = 'expired', updated_at = :now
FROM picked
WHERE o.id = picked.id AND o.deadline <= :now
-- The rows ended may have headed their ordering key.
RETURNING o.id, o.endpoint, o.ordering_key, o.status;

-- name: outbox_expire_parked
-- Parked deliveries (their endpoint had no room) whose deadline has come
-- are ended, oldest deadline first: a claim unparks an endpoint's
-- deliveries only when it has room, so those of an endpoint that has none
-- for good (disabled) would never end. It reads every parked row, from
-- courier_outbox_parked, so claims run it seldom (store/claim.go). An
-- index on their deadline would make it cheap, at a price paid by every
-- claim on PostgreSQL, whose planner then chose it for others.
-- PostgreSQL: as outbox_expire_due, rows another claimer holds are
-- skipped, and the rows are picked once, in a MATERIALIZED CTE.
WITH picked AS MATERIALIZED (
    SELECT id FROM courier_outbox
    WHERE hold = 'endpoint' AND deadline <= :now
    ORDER BY deadline
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_outbox AS o SET status = 'failed', last_error_code = 'expired', hold = NULL, updated_at = :now
FROM picked
WHERE o.id = picked.id
-- The rows ended may have headed their ordering key.
RETURNING o.id, o.endpoint, o.ordering_key, o.status;

-- name: outbox_claim_probe
-- One due delivery of an endpoint whose cool-down ended: its probe, once
-- endpoint_probe_take found the endpoint room for it (the store counts
-- its token, endpoint_limits_take). The store first unparks one of the
-- endpoint's parked deliveries (the claims park an open endpoint's), so
-- there is one to probe with.
-- PostgreSQL: FOR UPDATE SKIP LOCKED lets many workers claim at once, each
-- taking rows no other claimer holds; SQLite serializes writers instead.
-- gen_random_uuid is evaluated per row.
-- No attempt starts at or after a delivery's deadline: a row the subquery
-- picks whose deadline has come is ended instead of leased, failed with
-- code expired, its attempts uncounted (no attempt was made); RETURNING
-- gives its status so the store tells the two apart.
-- PostgreSQL: a parameter beside NULL in a CASE has no type of its own;
-- the casts give the column's. The rows are picked once, in a
-- MATERIALIZED CTE: as an IN subquery the planner may rescan the LIMIT for
-- every row, each rescan passing over the rows this statement changed and
-- picking further ones, past :limit.
WITH picked AS MATERIALIZED (
    SELECT id AS picked_id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND next_attempt_at <= :now
        AND endpoint = :endpoint
        -- Contract pinning (migration 4): an endpoint with an unfinished
        -- delivery enqueued under another digest than its pinned one is
        -- held back whole, until an operator acts (contract_changed).
        -- Asked of :endpoint, not per row, so it is evaluated once and
        -- the rows are read in index order.
        AND NOT EXISTS (SELECT 1 FROM courier_contracts AS k
                        JOIN courier_outbox AS m ON m.endpoint = k.endpoint
                        WHERE k.endpoint = :endpoint
                            AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
                            AND (m.contract_sha256 < k.capabilities_sha256 OR m.contract_sha256 > k.capabilities_sha256))
    ORDER BY priority, next_attempt_at, created_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_outbox SET
    status = CASE WHEN deadline <= :now THEN 'failed' ELSE 'leased' END,
    attempts = CASE WHEN deadline <= :now THEN attempts ELSE attempts + 1 END,
    lease_owner = CASE WHEN deadline <= :now THEN NULL ELSE :owner END,
    lease_token = CASE WHEN deadline <= :now THEN NULL ELSE replace(gen_random_uuid()::text, '-', '') END,
    leased_at = CASE WHEN deadline <= :now THEN NULL ELSE :now::bigint END,
    lease_expires_at = CASE WHEN deadline <= :now THEN NULL ELSE :lease_expires_at::bigint END,
    last_error_code = CASE WHEN deadline <= :now THEN 'expired' ELSE last_error_code END,
    updated_at = :now
FROM picked
WHERE id = picked.picked_id
RETURNING id, status, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, spared_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint, event_type, trace_parent, trace_state, ordering_key;

-- name: outbox_claim_parked
-- As in SQLite. PostgreSQL: rows another claimer holds are skipped; the
-- rows are picked once, in a MATERIALIZED CTE (see outbox_expire_due).
WITH picked AS MATERIALIZED (
    SELECT id AS picked_id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND hold = 'endpoint' AND next_attempt_at <= :now
        AND endpoint = :endpoint
        -- Contract pinning (migration 4): an endpoint with an unfinished
        -- delivery enqueued under another digest than its pinned one is
        -- held back whole, until an operator acts (contract_changed).
        -- Asked of :endpoint, not per row, so it is evaluated once and
        -- the rows are read in index order.
        AND NOT EXISTS (SELECT 1 FROM courier_contracts AS k
                        JOIN courier_outbox AS m ON m.endpoint = k.endpoint
                        WHERE k.endpoint = :endpoint
                            AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
                            AND (m.contract_sha256 < k.capabilities_sha256 OR m.contract_sha256 > k.capabilities_sha256))
    ORDER BY priority, next_attempt_at, created_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE courier_outbox SET
    status = CASE WHEN deadline <= :now THEN 'failed' ELSE 'leased' END,
    attempts = CASE WHEN deadline <= :now THEN attempts ELSE attempts + 1 END,
    lease_owner = CASE WHEN deadline <= :now THEN NULL ELSE :owner END,
    lease_token = CASE WHEN deadline <= :now THEN NULL ELSE replace(gen_random_uuid()::text, '-', '') END,
    leased_at = CASE WHEN deadline <= :now THEN NULL ELSE :now::bigint END,
    lease_expires_at = CASE WHEN deadline <= :now THEN NULL ELSE :lease_expires_at::bigint END,
    last_error_code = CASE WHEN deadline <= :now THEN 'expired' ELSE last_error_code END,
    hold = NULL,
    updated_at = :now
FROM picked
WHERE id = picked.picked_id
RETURNING id, status, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, spared_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint, event_type, trace_parent, trace_state, ordering_key;

-- name: outbox_quarantine
UPDATE courier_outbox SET
    status = 'quarantined',
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = :code, updated_at = :now
WHERE id = :id AND status = 'leased' AND lease_token = :token;

-- name: outbox_release_leases
-- The rows of the leases Release gives back (:batch, {id, token}) that
-- still hold them, read without a lock, each with its endpoint and its
-- lock_key: Release takes the breakers' locks (endpoint_lock) of those
-- endpoints first, in their order, as a settle does, before it locks any
-- of the rows (outbox_release_lock).
-- = ANY reads the batch's rows by id (see outbox_settle).
SELECT o.id, o.endpoint, hashtext(o.endpoint) AS lock_key
FROM courier_outbox AS o, jsonb_to_recordset(:batch::jsonb) AS v(id bigint, token text)
WHERE o.id = ANY (ARRAY(SELECT (e ->> 'id')::bigint FROM jsonb_array_elements(:batch::jsonb) AS e))
    AND o.id = v.id AND o.lease_token = v.token AND (o.status = 'leased') IS TRUE;

-- name: outbox_release_lock
-- The rows of :batch no other transaction holds, locked, before
-- endpoint_probe_released and outbox_release read and change them: no
-- other transaction ends a lease meanwhile (a claim reclaiming it). A
-- release waits for none of them while it holds the others and the
-- breakers' locks: a claim's pick, FOR UPDATE SKIP LOCKED though it is,
-- waits for the transaction that holds the newest version of a row the
-- pick saw due, when the claim that leased it commits as the pick reaches
-- it (PostgreSQL follows the row's updates under its lock); holding one
-- while waiting for a lease that claim reclaimed, or a breaker's lock it
-- took, the release would wait for it in a circle. Release waits for a
-- held row alone (outbox_release_wait), then gives back its lease.
SELECT o.id FROM courier_outbox AS o
WHERE o.id = ANY (ARRAY(SELECT (e ->> 'id')::bigint FROM jsonb_array_elements(:batch::jsonb) AS e))
ORDER BY o.id FOR UPDATE SKIP LOCKED;

-- name: outbox_release_wait
-- Waits, in a transaction of its own that holds nothing else, until no
-- other transaction holds delivery :id, a row outbox_release_lock passed.
SELECT 1 FROM courier_outbox WHERE id = :id FOR UPDATE;

-- name: outbox_release
-- Gives back leases whose attempt was never made (a worker stopping with
-- deliveries it claimed ahead): the claim's attempt is not counted, and
-- the row is due again as it was. :batch is a JSON array of {id, token};
-- each is fenced by its token like a settle.
UPDATE courier_outbox AS o SET
    status = CASE WHEN o.last_error_code IS NULL THEN 'pending' ELSE 'retry_wait' END,
    attempts = o.attempts - 1,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    -- Behind parked deliveries of its endpoint it is parked too: a claim
    -- leases an endpoint's parked deliveries before its due ones, and this
    -- one keeps its place among them.
    hold = CASE WHEN EXISTS (SELECT 1 FROM courier_outbox AS p WHERE p.hold = 'endpoint' AND p.endpoint = o.endpoint)
        THEN 'endpoint' END,
    updated_at = :now
FROM jsonb_to_recordset(:batch::jsonb) AS v(id bigint, token text)
-- = ANY reads the batch's rows by id, and IS TRUE keeps the status off
-- the lease index (see outbox_settle).
WHERE o.id = ANY (ARRAY(SELECT (e ->> 'id')::bigint FROM jsonb_array_elements(:batch::jsonb) AS e))
    AND o.id = v.id AND o.lease_token = v.token AND (o.status = 'leased') IS TRUE;

-- name: outbox_settle_lock_timeout
-- First in a settle's transaction: it waits at most a second for any lock
-- another transaction holds (a row of the batch, endpoint_lock), then
-- fails with SQLSTATE 55P03 and is rolled back. The store then settles
-- the outcomes one per transaction (store/settle.go): only an outcome
-- whose row is still held fails, and its worker tries it again. Without a
-- bound, a transaction outside the worker (an application's Cancel or
-- Redrive in a long transaction of its own, an operator's SELECT ... FOR
-- UPDATE in psql) would hold up every outcome batched with it and, the
-- worker settling one transaction at a time, every one after it, until
-- their leases ran out and their deliveries were sent again. A second:
-- courier's own transactions (settles, claims, releases) hold the locks a
-- settle meets for milliseconds, so a busy system does not trip it, and
-- it is a small part of a lease (a minute by default), so the outcomes
-- queued behind it are still settled in time. LOCAL: for this transaction
-- only; the session's own setting is back once it ends.
SET LOCAL lock_timeout = '1s';

-- name: outbox_settle
-- Settles a batch of outcomes in one statement. :batch is a JSON array of
-- {id, token, result, code, next_at, http, ack, remote, sealed, spare}, one
-- per delivery. Every outcome is fenced: it applies only while the
-- caller's lease is the row's lease and has not expired; the caller reads
-- the rows returned to know which did. The status is decided here, against
-- the row's own budget and deadline: a retry past the budget, or due at or
-- after the deadline (when no attempt may start), ends the delivery. An
-- Ack's digest is kept as the store keyed it for the payload key the
-- attempt was claimed under (sealed); a publish again may have sealed the
-- row under another since (outbox_publish_refresh), and then '' is kept,
-- as for a key that is gone.
UPDATE courier_outbox AS o SET
    -- spare (1 or 0) is what the outcome gives back to the budget: a retry
    -- whose worker cut the attempt short as it stopped is counted in
    -- attempts and logged, and raises the budget by one, up to
    -- max_attempts' bound (:max_attempts_bound, 1000: the most attempts any
    -- delivery makes, which ends it there), so it leaves the delivery the
    -- attempts it had.
    -- The deadline is not moved. The budget the enqueue asked for stays in
    -- enqueued_max_attempts, for an enqueue made again to compare, as
    -- outbox_redrive keeps it. spared_attempts counts the attempts so
    -- spared (what the budget grew by): Courier-Attempt is attempts less them.
    status = CASE
        WHEN v.result <> 'retry' THEN v.result
        WHEN o.attempts >= o.max_attempts + v.spare OR o.attempts >= :max_attempts_bound OR v.next_at >= o.deadline THEN 'failed'
        ELSE 'retry_wait' END,
    last_error_code = CASE
        WHEN v.result = 'retry' AND o.attempts < o.max_attempts + v.spare AND o.attempts < :max_attempts_bound AND v.next_at >= o.deadline THEN 'expired'
        ELSE v.code END,
    max_attempts = LEAST(o.max_attempts + v.spare, :max_attempts_bound),
    spared_attempts = o.spared_attempts + LEAST(o.max_attempts + v.spare, :max_attempts_bound) - o.max_attempts,
    enqueued_max_attempts = CASE WHEN v.spare > 0 THEN COALESCE(o.enqueued_max_attempts, o.max_attempts) ELSE o.enqueued_max_attempts END,
    next_attempt_at = CASE WHEN v.result = 'retry' THEN v.next_at ELSE o.next_attempt_at END,
    last_status = v.http,
    last_remote_code = v.remote,
    ack_sha256 = CASE WHEN v.ack IS NOT NULL AND o.payload_key_id <> v.sealed THEN '' ELSE v.ack END,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    updated_at = :now
FROM jsonb_to_recordset(:batch::jsonb)
    AS v(id bigint, token text, result text, code text, next_at bigint, http integer, ack text, remote text, sealed text, spare integer)
-- The ids again as an array, for the primary key: joined to the recordset
-- alone, the planner reads every lease (or the whole table) and hashes it,
-- a settle costing what all workers hold in flight; = ANY reads the
-- batch's rows by id, as outbox_claim does. IS TRUE keeps the lease
-- conditions off courier_outbox_leases, which the planner would otherwise
-- read whole beside the primary key (status is never NULL, so it changes
-- nothing else).
WHERE o.id = ANY (ARRAY(SELECT (e ->> 'id')::bigint FROM jsonb_array_elements(:batch::jsonb) AS e))
    AND o.id = v.id AND o.lease_token = v.token AND (o.status = 'leased' AND o.lease_expires_at > :now) IS TRUE
-- Whether the endpoint has a breaker row: most have none (healthy), and
-- then the settle needs no read of courier_endpoints. lock_key: the
-- endpoint's, as endpoint_lock takes it.
RETURNING o.id, o.status, o.last_error_code, o.endpoint, o.ordering_key, hashtext(o.endpoint) AS lock_key,
    EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = o.endpoint) AS tracked;

-- name: outbox_settle_plain
-- Settles, in one statement and its own transaction, the outcomes of a
-- batch that change nothing but their row and the attempts log: :batch
-- is outbox_settle's, each outcome with its attempt as attempts_log reads
-- it. Only rows whose endpoint has no breaker row and which have no
-- ordering key are settled here (their outcomes move no breaker and no
-- key, which outbox_settle's transaction does under locks); the caller
-- settles the rest, and those whose lease it lost, through outbox_settle.
-- The row and its attempt are written as outbox_settle and attempts_log
-- write them: the SET is outbox_settle's, the attempt's outcome is the
-- status the row ended in, its code the attempt's own (the row's is
-- expired where a retry would be due at or past the deadline).
-- NOWAIT instead of outbox_settle_lock_timeout, which needs a transaction
-- of its own: a row another transaction holds fails the statement at
-- once (55P03, busy), nothing written, and the caller settles the batch
-- through outbox_settle, which waits for it a while. The rows are locked
-- first, by the ARRAY the UPDATE reads them through (an InitPlan, run
-- before the UPDATE touches a row).
WITH v AS (
    SELECT * FROM jsonb_to_recordset(:batch::jsonb)
        AS v(id bigint, token text, result text, code text, next_at bigint, http integer, ack text, remote text, sealed text, spare integer,
            attempt integer, owner text, leased_at bigint, lease_expires_at bigint, duration_us bigint)
), held AS MATERIALIZED (
    SELECT o.id FROM courier_outbox AS o
    WHERE o.id = ANY (ARRAY(SELECT (e ->> 'id')::bigint FROM jsonb_array_elements(:batch::jsonb) AS e))
    FOR UPDATE NOWAIT
), settled AS (
    UPDATE courier_outbox AS o SET
        status = CASE
            WHEN v.result <> 'retry' THEN v.result
            WHEN o.attempts >= o.max_attempts + v.spare OR o.attempts >= :max_attempts_bound OR v.next_at >= o.deadline THEN 'failed'
            ELSE 'retry_wait' END,
        last_error_code = CASE
            WHEN v.result = 'retry' AND o.attempts < o.max_attempts + v.spare AND o.attempts < :max_attempts_bound AND v.next_at >= o.deadline THEN 'expired'
            ELSE v.code END,
        max_attempts = LEAST(o.max_attempts + v.spare, :max_attempts_bound),
        spared_attempts = o.spared_attempts + LEAST(o.max_attempts + v.spare, :max_attempts_bound) - o.max_attempts,
        enqueued_max_attempts = CASE WHEN v.spare > 0 THEN COALESCE(o.enqueued_max_attempts, o.max_attempts) ELSE o.enqueued_max_attempts END,
        next_attempt_at = CASE WHEN v.result = 'retry' THEN v.next_at ELSE o.next_attempt_at END,
        last_status = v.http,
        last_remote_code = v.remote,
        ack_sha256 = CASE WHEN v.ack IS NOT NULL AND o.payload_key_id <> v.sealed THEN '' ELSE v.ack END,
        lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
        updated_at = :now
    FROM v
    WHERE o.id = ANY (ARRAY(SELECT id FROM held))
        AND o.id = v.id AND o.lease_token = v.token AND (o.status = 'leased' AND o.lease_expires_at > :now) IS TRUE
        AND o.ordering_key IS NULL AND NOT EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = o.endpoint)
    RETURNING o.id, o.status, o.last_error_code
), logged AS (
    INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, http_status, error_code, remote_code)
    SELECT s.id, v.attempt, v.owner, v.leased_at, v.lease_expires_at, :now, v.duration_us,
        CASE s.status WHEN 'retry_wait' THEN 'retry' WHEN 'failed' THEN 'failed' ELSE v.result END,
        v.http, v.code, v.remote
    FROM settled AS s JOIN v ON v.id = s.id
)
SELECT id, status, last_error_code FROM settled;

-- name: outbox_get
SELECT id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox WHERE id = :id;

-- name: outbox_health_counts
SELECT status, COUNT(*) AS n FROM courier_outbox GROUP BY status;

-- name: outbox_health_unreadable
-- As in SQLite: the quarantined rows that could not be opened, from the
-- status index.
SELECT COUNT(*) FROM courier_outbox
WHERE status = 'quarantined' AND last_error_code = 'payload_unreadable';

-- name: outbox_health_due
-- As in SQLite: the due rows and the parked rows, each read once, the due
-- index as a range per priority.
-- PostgreSQL: LATERAL, and OFFSET 0 to keep the planner from merging it
-- into the join, make each priority's range a read of its own: joined,
-- the planner read every row of the due index for next_attempt_at and
-- matched the priorities after, the rows waiting for a later time too.
WITH RECURSIVE p(v) AS (
    SELECT MIN(priority) FROM courier_outbox WHERE status IN ('pending', 'retry_wait') AND hold IS NULL
    UNION ALL
    SELECT (SELECT MIN(priority) FROM courier_outbox WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority > p.v)
    FROM p WHERE p.v IS NOT NULL
),
w(due, next_attempt_at, late) AS (
    SELECT NOT EXISTS (SELECT 1 FROM courier_endpoints AS e
                       WHERE e.endpoint = o.endpoint AND (e.state = 'disabled'
                           OR e.state IN ('open', 'half_open') AND e.open_until > :now)),
        o.next_attempt_at, o.deadline <= :now
    FROM p CROSS JOIN LATERAL (
        SELECT endpoint, next_attempt_at, deadline FROM courier_outbox
        WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority = p.v AND next_attempt_at <= :now
        OFFSET 0) AS o
    UNION ALL
    SELECT q.next_attempt_at <= :now
            AND NOT EXISTS (SELECT 1 FROM courier_endpoints AS e
                            WHERE e.endpoint = q.endpoint AND (e.state = 'disabled'
                                OR e.state IN ('open', 'half_open') AND e.open_until > :now)),
        q.next_attempt_at, q.deadline <= :parked_late
    FROM courier_outbox AS q WHERE q.hold = 'endpoint'
)
SELECT COUNT(CASE WHEN due THEN 1 END), COALESCE(MIN(CASE WHEN due THEN next_attempt_at END), 0),
    COUNT(CASE WHEN late THEN 1 END)
FROM w;

-- name: outbox_health_expired
SELECT COUNT(*) FROM courier_outbox WHERE status = 'leased' AND lease_expires_at <= :now;

-- name: outbox_suppress
-- A claimed delivery whose subscription changed or was paused.
UPDATE courier_outbox SET
    status = 'suppressed',
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = :code, updated_at = :now
WHERE id = :id AND status = 'leased' AND lease_token = :token;

-- name: outbox_redrive_last
-- The last delivery of a status Redrive takes (:status, failed or
-- quarantined) in courier_outbox_status's order when Redrive begins: its
-- batches go no further (see outbox_redrive_batch).
SELECT updated_at, id FROM courier_outbox
WHERE status = :status
ORDER BY updated_at DESC, id DESC LIMIT 1;

-- name: outbox_redrive_in_order
-- First in the read-only transaction of outbox_redrive_batch: the batch is
-- read in order from courier_outbox_status, never sorted. The statistics
-- of a table whose deliveries failed since it was last analyzed count few
-- failed ones, and the planner then reads and sorts every one of them for
-- each batch, which makes a large Redrive quadratic.
SET LOCAL enable_sort = off;

-- name: outbox_redrive_batch
-- The next deliveries Redrive moves, at most :limit, of one status, read
-- in courier_outbox_status's order after the last batch's last one and
-- up to the status's last one when Redrive began (outbox_redrive_last),
-- each batch from where the last one stopped: a delivery it redrove that
-- fails again, stamped later, is after the bound, and waits for the next
-- Redrive. Read outside the batch's transaction, which moves what of it
-- is still to be moved (outbox_redrive's conditions), and locks nothing.
SELECT updated_at, id FROM courier_outbox
WHERE status = :status AND (updated_at, id) > (:after_updated_at::bigint, :after_id::bigint)
    AND (updated_at, id) <= (:last_updated_at::bigint, :last_id::bigint)
    AND (status = 'failed' OR last_error_code = 'payload_unreadable') AND attempts < :max_attempts_bound AND (:endpoint = '' OR endpoint = :endpoint)
    AND NOT (contract_sha256 IS NOT NULL AND EXISTS (SELECT 1 FROM courier_contracts AS k
        WHERE k.endpoint = courier_outbox.endpoint AND k.capabilities_sha256 <> courier_outbox.contract_sha256))
ORDER BY updated_at, id LIMIT :limit;

-- name: outbox_redrive_keys
-- The ordering keys of the deliveries outbox_redrive is about to move
-- (its conditions, repeated), each with the first of them by id: Redrive
-- takes each key's row (ordering_key_join makes a missing one, headed by
-- that delivery) in key order before it locks any delivery, as Cancel
-- does (see ordering_key_lock_of). Locking the deliveries first, it would
-- hold a failed head that a Cancel holding the head's key waits for,
-- while it waited for that key. The batch's ids are an array, not IN
-- (subquery): the planner reads them by the primary key. The status is
-- compared as (status || ''), which no index holds: the statistics of a
-- table whose deliveries failed since it was last analyzed count few
-- failed ones, and the planner then read every failed delivery from
-- courier_outbox_status for each batch, in its transaction.
SELECT endpoint, ordering_key, MIN(id) AS id FROM courier_outbox
WHERE ordering_key IS NOT NULL AND id = ANY (ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb)))
    AND (status || '') IN ('failed', 'quarantined') AND (status = 'failed' OR last_error_code = 'payload_unreadable')
    AND attempts < :max_attempts_bound AND (:endpoint = '' OR endpoint = :endpoint)
    AND NOT (contract_sha256 IS NOT NULL AND EXISTS (SELECT 1 FROM courier_contracts AS k
        WHERE k.endpoint = courier_outbox.endpoint AND k.capabilities_sha256 <> courier_outbox.contract_sha256))
GROUP BY endpoint, ordering_key;

-- name: outbox_redrive
-- Failed deliveries go back to pending with a fresh budget and horizon,
-- and so do quarantined ones whose payload could not be opened
-- (payload_unreadable: a key missing or wrong, which an operator fixes);
-- an altered row (integrity_mismatch) stays quarantined. Attempt numbers
-- keep counting, so one that made the most attempts any delivery may
-- (:max_attempts_bound, 1000) stays as it is. One with an ordering key
-- waits for its key (hold 'key') until the store has seen whether it
-- heads it. The budget its enqueue asked for stays in
-- enqueued_max_attempts, for an enqueue made again to compare (a row
-- enqueued before migration 13 keeps there its max_attempts before this).
-- It moves a batch's deliveries (:ids, a JSON array; see
-- outbox_redrive_batch), read by the primary key (see outbox_redrive_keys).
UPDATE courier_outbox SET status = 'pending', next_attempt_at = :now, deadline = :deadline,
    enqueued_max_attempts = COALESCE(enqueued_max_attempts, max_attempts),
    max_attempts = LEAST(attempts + :budget, :max_attempts_bound),
    hold = CASE WHEN ordering_key IS NOT NULL THEN 'key' END,
    last_error_code = NULL, last_status = NULL, last_remote_code = NULL, updated_at = :now
WHERE id = ANY (ARRAY(SELECT value::bigint FROM jsonb_array_elements_text(:ids::jsonb)))
    AND (status || '') IN ('failed', 'quarantined') AND (status = 'failed' OR last_error_code = 'payload_unreadable')
    AND attempts < :max_attempts_bound AND (:endpoint = '' OR endpoint = :endpoint)
    -- A command enqueued under another contract than its endpoint's pin
    -- stays where it is: sent again it would hold the endpoint back, and the
    -- source would refuse it (Contracts: it is re-issued, never redriven).
    AND NOT (contract_sha256 IS NOT NULL AND EXISTS (SELECT 1 FROM courier_contracts AS k
        WHERE k.endpoint = courier_outbox.endpoint AND k.capabilities_sha256 <> courier_outbox.contract_sha256))
    -- One with an ordering key moves only if outbox_redrive_keys found it,
    -- so Redrive holds its key: one of another key that failed since waits
    -- for the next Redrive. Its key taken after its row, Redrive would wait
    -- for a Cancel of it, which holds the key and waits for the row.
    AND (ordering_key IS NULL OR EXISTS (SELECT 1 FROM jsonb_to_recordset(:keys::jsonb) AS rk(endpoint text, ordering_key text)
        WHERE rk.endpoint = courier_outbox.endpoint AND rk.ordering_key = courier_outbox.ordering_key))
RETURNING id, endpoint, ordering_key, status;

-- name: outbox_list
-- Keyset pagination on id, newest first; empty filters match everything.
-- :max_id is the id just below the cursor, the largest id there is for the
-- first page (which shows a delivery of that id too): every page seeks it
-- by the primary key rather than walk down from the newest.
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox
WHERE (:status = '' OR status = :status) AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id::bigint
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_list_by_status
-- outbox_list for one status, with no window of time (Since, Until: see
-- outbox_list_by_status_window), read from courier_outbox_listed (status,
-- id) in id order from the cursor down (migration 14): a page reads the
-- rows it shows, and those of its status the other filters leave out.
-- PostgreSQL: the status is compared as = ANY (ARRAY[...]), which makes
-- no equivalence of it, and the rows are ordered by (status, id): so only
-- courier_outbox_listed reads them in that order. Compared with =, the
-- status is a constant of the order, the primary key gives the id order
-- as well, and a generic plan (plan_cache_mode), which cannot see the
-- status and takes it to hold as many rows as any other, walked the
-- primary key through the whole outbox for the few of a rare one.
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox
WHERE status = ANY (ARRAY[:status]) AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND id <= :max_id::bigint
ORDER BY status DESC, id DESC
LIMIT :limit;

-- name: outbox_plan_with_values
-- First in the read-only transaction of a statement no one plan serves,
-- outbox_list_by_status_window's or a prune's count (see
-- outbox_prune_count): it is planned with its values, whatever
-- plan_cache_mode the connection has (LOCAL: for this transaction only).
-- No one plan serves every window: a narrow one is read from
-- courier_outbox_status and sorted, a wide one walked in id order from
-- courier_outbox_listed, and a plan made without the window (generic)
-- read and sorted every delivery of the status for a wide one.
SET LOCAL plan_cache_mode = force_custom_plan;

-- name: outbox_list_by_status_window
-- outbox_list_by_status within a window of time (updated_at in [:since,
-- :until)), planned with its values (outbox_plan_with_values): a page
-- reads, of a narrow window, the status's deliveries updated in it, from
-- courier_outbox_status, and sorts them; of a wide one, the rows it
-- shows and those of its status the window leaves out, from
-- courier_outbox_listed. A statement of its own: a generic plan, which
-- cannot see whether a page has a window, planned every page of
-- outbox_list_by_status as one of a narrow window.
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox
WHERE status = :status AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id::bigint
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_list_by_endpoint
-- outbox_list for one endpoint, with no status or a finished one
-- (succeeded, suppressed: see Outbox.List), read from
-- courier_outbox_endpoint (endpoint, id) in id order from the cursor down
-- (migration 15): a page reads the rows it shows, and those of its
-- endpoint the other filters leave out. The endpoint may be stored under
-- two forms (:endpoint, :endpoint_spelled: see Endpoints), each a range
-- of the index of its own: the two are read in id order, each up to a
-- page, and merged; one range under both filters (endpoint IN (...))
-- would be read whole and sorted. The second is read only when the
-- spelling differs, or a delivery under the normalized form would be
-- listed twice.
-- PostgreSQL: each read has an ORDER BY and LIMIT of its own: a read
-- without them is planned apart from the order the page asks for (as is
-- a UNION ALL at the top of a query), read whole and sorted. Each
-- compares the endpoint as = ANY (ARRAY[...]), which makes no
-- equivalence of it, and orders its rows by (endpoint, id): so only
-- courier_outbox_endpoint reads them in that order. Compared with =, the
-- endpoint is a constant of the order, the primary key gives the id
-- order as well, and a generic plan (plan_cache_mode), which cannot see
-- the endpoint and takes it to hold as many rows as any other, walked the
-- primary key through the whole outbox for the few of a rare one. The two
-- reads, ordered by their endpoints, are merged in id order by the store
-- (Outbox.List), not here: ordered by id, they would be sorted.
SELECT * FROM ((
    SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
        priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
        lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
    FROM courier_outbox
    WHERE endpoint = ANY (ARRAY[:endpoint]) AND (:status = '' OR status = :status)
        AND updated_at >= :since AND updated_at < :until AND id <= :max_id::bigint
    ORDER BY endpoint DESC, id DESC LIMIT :limit
    ) UNION ALL (
    SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
        priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
        lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
    FROM courier_outbox
    WHERE endpoint = ANY (ARRAY[:endpoint_spelled]) AND :endpoint_spelled <> :endpoint AND (:status = '' OR status = :status)
        AND updated_at >= :since AND updated_at < :until AND id <= :max_id::bigint
    ORDER BY endpoint DESC, id DESC LIMIT :limit
)) AS d;

-- name: outbox_cancel
-- An operator withdraws a delivery that has not been sent successfully:
-- a pending or retrying one (held or not), or settles one that will not be
-- sent: a quarantined one (its stored bytes cannot be sent again) or a
-- failed one (dismissed rather than redriven). Either frees the ordering
-- key it may hold (a failed one under OrderingOnFailure OrderingHoldKey).
UPDATE courier_outbox SET status = 'suppressed', last_error_code = 'cancelled', hold = NULL, updated_at = :now
WHERE id = :id AND status IN ('pending', 'retry_wait', 'quarantined', 'failed')
RETURNING id, endpoint, ordering_key, status;

-- name: outbox_prune
-- Finished deliveries past their age, oldest first, bounded.
-- The rows are picked once, in a MATERIALIZED CTE (see outbox_expire_due).
-- Each status's oldest :limit rows are read in order from
-- courier_outbox_status (status, updated_at, id), and the oldest :limit of
-- those go, so a batch reads at most twice its rows: no index gives
-- status IN ('succeeded', 'suppressed') in updated_at order, and sorting
-- every prunable row for each batch made a whole prune quadratic.
-- PostgreSQL: unlike SQLite it does not merge the two ordered reads (it
-- would read and sort both whole), and FOR UPDATE is not allowed with
-- UNION: so each status reads and locks its own :limit rows, skipping
-- those another instance is pruning (many prune at once). What a status
-- locked beyond the batch is left for the next one.
WITH picked AS MATERIALIZED (
    SELECT id FROM (
        SELECT id, updated_at FROM (
            SELECT id, updated_at FROM courier_outbox
            WHERE status = 'succeeded' AND updated_at < :before
            ORDER BY updated_at LIMIT :limit FOR UPDATE SKIP LOCKED
        ) AS s
        UNION ALL
        SELECT id, updated_at FROM (
            SELECT id, updated_at FROM courier_outbox
            WHERE status = 'suppressed' AND updated_at < :before
            ORDER BY updated_at LIMIT :limit FOR UPDATE SKIP LOCKED
        ) AS x
    ) AS u
    ORDER BY updated_at LIMIT :limit
)
DELETE FROM courier_outbox AS o USING picked WHERE o.id = picked.id;

-- name: outbox_prune_count
-- How many rows outbox_prune would delete, in every batch: a dry run's.
-- PostgreSQL: outbox_prune reads and locks each status's rows apart,
-- which a count, locking nothing, need not; it reads the same statuses'
-- rows past the same age. Planned with its values (outbox_plan_with_values,
-- as every count is): a generic plan, which cannot see the age, takes it
-- to leave a third of the finished deliveries and scanned the whole
-- outbox, where an hourly prune finds an hour's.
SELECT COUNT(*) FROM courier_outbox WHERE status IN ('succeeded', 'suppressed') AND updated_at < :before;

-- name: outbox_enqueue_command
-- enqueue for the source-delivery profile: the row also records the
-- capabilities digest it was enqueued under (contract_sha256) and the
-- command's operation (event_type). As enqueue,
-- pg_notify wakes listening workers when the caller commits.
WITH inserted AS (
    INSERT INTO courier_outbox (
        notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, contract_sha256, event_type, trace_parent, trace_state, status,
        priority, attempts, max_attempts, enqueued_max_attempts, next_attempt_at, deadline, created_at, updated_at
    ) VALUES (
        :notification_id, :endpoint, :payload, :payload_key_id, :payload_sha256, :profile, :key_id, :contract_sha256, :event_type, :trace_parent, :trace_state, 'pending',
        :priority, 0, :max_attempts, :enqueued_max_attempts, :next_attempt_at, :deadline, :now, :now
    )
    ON CONFLICT (notification_id, endpoint) DO NOTHING
    RETURNING id
)
SELECT id FROM inserted, pg_notify('courier_outbox', '');

-- name: outbox_check_rows
-- Outbox.Check's slice of the outbox: every column of the rows after
-- :after, in id order, from the primary key. The payload only of a
-- delivery that may still be sent: Check holds only those to their digest
-- (rowProblem in store/check.go), and leaves other payloads unread.
-- key_unjoined: the delivery waits for its ordering key (hold 'key') but
-- no key row has another head to be promoted after: no settle ever
-- promotes it (an enqueue that failed between its insert and its join,
-- committed anyway). Looked up by the key's primary key, for those rows only.
SELECT id, notification_id, endpoint,
    CASE WHEN status IN ('pending', 'retry_wait', 'leased', 'failed') THEN payload END AS payload,
    payload_key_id, payload_sha256, profile, key_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at,
    subscription_id, subscription_fingerprint, contract_sha256, event_type, dedupe_key, ordering_key, hold, trace_parent, trace_state,
    COALESCE(hold, '') = 'key' AND NOT EXISTS (
        SELECT 1 FROM courier_ordering_keys AS k
        WHERE k.endpoint = courier_outbox.endpoint AND k.ordering_key = courier_outbox.ordering_key AND k.head_id <> courier_outbox.id) AS key_unjoined
FROM courier_outbox WHERE id > :after ORDER BY id LIMIT :limit;

-- name: outbox_lookup
-- One delivery by its identity, from the identity's unique index.
SELECT id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox WHERE notification_id = :notification_id AND endpoint = :endpoint;

-- name: outbox_list_by_notification
-- outbox_list for one notification id: its deliveries, one per endpoint,
-- read from the identity's unique index (notification_id is its first
-- column); the other filters apply to those few rows.
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox
WHERE notification_id = :notification_id
    AND (:status = '' OR status = :status) AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id::bigint
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_list_by_id
-- outbox_list for one delivery id, read by the primary key; the other
-- filters apply to that row. What an operator's view of one delivery
-- reads: every column but the payload (up to its size limit, opened only
-- by outbox_get).
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox
WHERE id = :id
    AND (:notification_id = '' OR notification_id = :notification_id)
    AND (:status = '' OR status = :status) AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id::bigint
LIMIT :limit;

-- name: outbox_health_operations
-- Command deliveries by operation (event_type, migration 5) and status,
-- from their partial index: the index's condition is repeated verbatim.
SELECT COALESCE(event_type, '') AS operation, status, COUNT(*) AS n FROM courier_outbox
WHERE profile = 'command'
GROUP BY event_type, status;

-- name: outbox_promote
-- As in SQLite: the next delivery waiting for an ordering key, in enqueue
-- order, becomes its head.
UPDATE courier_outbox SET hold = NULL, updated_at = :now
WHERE id = (SELECT id FROM courier_outbox
            WHERE hold = 'key' AND endpoint = :endpoint AND ordering_key = :ordering_key
            ORDER BY id LIMIT 1)
RETURNING id;

-- name: outbox_hold
-- As in SQLite: whether a delivery waits for its ordering key.
UPDATE courier_outbox SET hold = :hold
WHERE id = :id AND status IN ('pending', 'retry_wait');

-- courier's queries for SQLite: the outbox: enqueue, claim, settle, and what operators read and do.
-- store/postgres/sql/queries/outbox.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: outbox_enqueue
-- The notification's identity is (notification_id, endpoint): a second
-- enqueue of it inserts nothing; the store then reads the existing row and
-- compares. So does a terminal notification for an event the endpoint has
-- one for already (dedupe_key, migration 5): no target, so the conflict
-- may be on either unique index. SQLite: no RETURNING; the store takes the id from
-- last_insert_rowid, which costs a third of a RETURNING row here.
-- A delivery with an ordering key (migration 8) is inserted waiting for its
-- key (:hold 'key'); the store then makes it its key's head when the key
-- has no other unfinished delivery (see ordering_key_join).
-- SQLite: the payload goes to a table of its own (migration 13), by
-- outbox_payload_write, which the store runs next with the new id.
INSERT INTO courier_outbox (
    notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, event_type, dedupe_key, trace_parent, trace_state, ordering_key, hold, status,
    priority, attempts, max_attempts, enqueued_max_attempts, next_attempt_at, deadline, created_at, updated_at
) VALUES (
    :notification_id, :endpoint, :payload_key_id, :payload_sha256, :profile, :key_id, :subscription_id, :subscription_fingerprint, :event_type, :dedupe_key, :trace_parent, :trace_state, :ordering_key, :hold, 'pending',
    :priority, 0, :max_attempts, :enqueued_max_attempts, :next_attempt_at, :deadline, :now, :now
)
ON CONFLICT DO NOTHING;

-- name: outbox_enqueue_existing
-- The row an enqueue met, for the store to compare, and whether it still
-- waits for its ordering key (hold), which the enqueue then joins again
-- (see writeFor in store/enqueue.go); a publish also reads its state, the
-- subscription it was published to (see outbox_publish_refresh,
-- outbox_publish_revive) and the type of the event it carries. The
-- budget compared is the one the enqueue asked for (enqueued_max_attempts,
-- migration 12), which a redrive or a revival does not raise; NULL for a
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
-- SQLite: the payload is written by outbox_payload_write, which the store
-- runs next (migration 13).
UPDATE courier_outbox SET payload_key_id = :payload_key_id, payload_sha256 = :payload_sha256,
    profile = :profile, key_id = :key_id, subscription_fingerprint = :subscription_fingerprint, event_type = :event_type,
    trace_parent = :trace_parent, trace_state = :trace_state, updated_at = :now
WHERE id = :id AND status IN ('pending', 'retry_wait', 'leased');

-- name: outbox_publish_revive
-- A publish again of an event whose delivery a claim suppressed because
-- its subscription had changed or was paused (subscription_changed):
-- the subscriber never got it, so it is sent again, under the
-- subscription as it is now, with a fresh budget and horizon, as
-- outbox_redrive gives them (attempt numbers keep counting; the budget
-- asked for stays in enqueued_max_attempts, as there). Its identity
-- (notification id, endpoint) is unchanged, so a receiver that got an
-- earlier attempt dedupes it. One with an ordering key waits for its key
-- (hold 'key') until the store has joined it.
-- SQLite: the payload is written by outbox_payload_write, which the store
-- runs next (migration 13); that write is what wakes the workers of the
-- process as the transaction commits (see package sqlite's hookCommits),
-- as PostgreSQL's pg_notify does.
UPDATE courier_outbox SET status = 'pending', payload_key_id = :payload_key_id, payload_sha256 = :payload_sha256,
    profile = :profile, key_id = :key_id, subscription_fingerprint = :subscription_fingerprint, event_type = :event_type,
    trace_parent = :trace_parent, trace_state = :trace_state,
    enqueued_max_attempts = COALESCE(enqueued_max_attempts, max_attempts),
    max_attempts = MIN(attempts + :max_attempts, :max_attempts_bound),
    next_attempt_at = :next_attempt_at, deadline = :deadline,
    hold = CASE WHEN ordering_key IS NOT NULL THEN 'key' END,
    last_error_code = NULL, last_status = NULL, last_remote_code = NULL, updated_at = :now
WHERE id = :id AND status = 'suppressed' AND last_error_code = 'subscription_changed' AND attempts < :max_attempts_bound
RETURNING id;

-- name: outbox_payload_write
-- A delivery's payload, in a table of its own (migration 13), keyed by
-- the delivery's id: written after the statement that wrote the
-- delivery, its insert (outbox_enqueue, outbox_enqueue_command) or a
-- publish that sealed it again (outbox_publish_refresh,
-- outbox_publish_revive). SQLite writes a row whole when an UPDATE changes
-- its size, and every claim and settle changes a delivery's: kept in the
-- delivery's row, its payload, up to 4 MiB, was written again by each.
INSERT INTO courier_outbox_payload (id, payload) VALUES (:id, :payload)
ON CONFLICT (id) DO UPDATE SET payload = excluded.payload;

-- name: outbox_write_begin
-- A delivery and its payload are two statements (outbox_payload_write),
-- and a statement that fails leaves SQLite's transaction going: without
-- a savepoint around both, a payload that could not be written would
-- leave the delivery's row in the caller's transaction, and an enqueue
-- made again there would find it, its payload missing. The store undoes
-- both (outbox_write_undo) when one fails, and ends the savepoint
-- (outbox_write_end) either way.
SAVEPOINT courier_write;

-- name: outbox_write_undo
ROLLBACK TO courier_write;

-- name: outbox_write_end
RELEASE courier_write;

-- name: outbox_reclaim_expired_leases
-- The leases attempts_log_expired_leases logged (:ids, a JSON array of
-- their deliveries), each read by its id: the same rows, in the same
-- transaction of the one writer.
UPDATE courier_outbox SET
    status = CASE WHEN attempts >= max_attempts OR :now >= deadline THEN 'failed' ELSE 'retry_wait' END,
    next_attempt_at = :now,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = CASE WHEN attempts < max_attempts AND :now >= deadline THEN 'expired' ELSE 'lease_expired' END,
    updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
-- The rows that failed may have headed their ordering key; each row's
-- status and code are reported (EventSettled).
RETURNING id, endpoint, ordering_key, status, last_error_code;

-- name: outbox_claim_pick
-- The next :limit due deliveries of one priority (see
-- outbox_claim_look), in claim order: the due index is read as a
-- range, (priority = p, next_attempt_at <= now), so rows waiting for a
-- later time are never walked, and held rows (hold, migration 8) are not
-- in it. outbox_claim then leases, parks or ends each. limited says
-- whether the endpoint has a courier_endpoint_limits row; busy, that
-- another claimer holds it (never, here). :busy is a JSON array of the
-- endpoints a claim found busy, whose rows it leaves out of its next
-- picks (always empty here).
-- SQLite: writers are serialized (BEGIN IMMEDIATE), so nothing picked here
-- can be taken, and no endpoint's leases or tokens change, before
-- outbox_claim; PostgreSQL locks the rows and the limited endpoints' rows
-- (SKIP LOCKED) instead.
SELECT o.id, o.endpoint, EXISTS (SELECT 1 FROM courier_endpoint_limits AS l WHERE l.endpoint = o.endpoint) AS limited, 0 AS busy
FROM courier_outbox AS o
WHERE o.status IN ('pending', 'retry_wait') AND o.hold IS NULL AND o.priority = :priority AND o.next_attempt_at <= :now
    AND o.endpoint NOT IN (SELECT value FROM json_each(:busy))
    -- Contract pinning (migration 4): an endpoint with an unfinished
    -- delivery enqueued under another digest than its pinned one is
    -- held back whole, until an operator acts (contract_changed).
    AND NOT EXISTS (SELECT 1 FROM courier_contracts AS k
                    JOIN courier_outbox AS m ON m.endpoint = k.endpoint
                    WHERE k.endpoint = o.endpoint
                        AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
                        AND (m.contract_sha256 < k.capabilities_sha256 OR m.contract_sha256 > k.capabilities_sha256))
ORDER BY o.next_attempt_at, o.created_at, o.id
LIMIT :limit;

-- fragment: endpoint_room
-- The room endpoint d.endpoint has for new leases now, as outbox_claim
-- leases by it and outbox_claim_look reports it: the least of
--   :cap less the leases :owner holds on it (the worker's fair share; 0 for no cap),
--   its max_in_flight less every lease on it (Endpoints.SetLimits; 0 for none),
--   the whole tokens in its bucket (rate; 0 for none),
--   and none while its breaker is not closed (outbox_claim_probe takes its probe,
--   once endpoint_probe_take found it room for one).
-- The leases are counted from courier_outbox_in_flight, so a settle, a
-- release or an expired lease gives its slot back with the row itself.
-- SQLite: MIN with several arguments is the scalar least; CAST truncates
-- the whole tokens (the bucket is never negative).
CASE WHEN EXISTS (SELECT 1 FROM courier_endpoints AS b WHERE b.endpoint = d.endpoint AND b.state <> 'closed') THEN 0
ELSE MIN(
    CASE WHEN :cap > 0 THEN :cap - (SELECT COUNT(*) FROM courier_outbox AS f
                                    WHERE f.endpoint = d.endpoint AND f.status = 'leased' AND f.lease_owner = :owner)
         ELSE 1000000 END,
    COALESCE((SELECT CASE WHEN l.max_in_flight > 0 THEN l.max_in_flight - (SELECT COUNT(*) FROM courier_outbox AS f
                                                                          WHERE f.endpoint = d.endpoint AND f.status = 'leased')
                          ELSE 1000000 END
              FROM courier_endpoint_limits AS l WHERE l.endpoint = d.endpoint), 1000000),
    COALESCE((SELECT CASE WHEN l.rate > 0 THEN CAST(MIN(l.burst, CASE WHEN l.tokens_at - :now > 60000000 THEN l.burst ELSE l.tokens + MAX(0, :now - l.tokens_at) * l.rate / 1e6 END) AS INTEGER)
                          ELSE 1000000 END
              FROM courier_endpoint_limits AS l WHERE l.endpoint = d.endpoint), 1000000))
END

-- name: outbox_claim
-- Leases the rows outbox_claim_pick picked (:ids, a JSON array), as many
-- of each endpoint as it has room for (endpoint_room), in claim order;
-- parks the rest (hold 'endpoint': out of the due index until a claim
-- finds the endpoint has room, see outbox_claim_look).
-- No attempt starts at or after a delivery's deadline: a picked row whose
-- deadline has come is ended instead of leased, failed with code expired,
-- its attempts uncounted (no attempt was made); RETURNING gives its status
-- (leased, failed, or pending/retry_wait for a parked row) so the store
-- tells them apart. The token is random per row: randomblob is evaluated
-- once per updated row.
-- SQLite: MATERIALIZED: each endpoint's room is reckoned once, not once
-- per column the UPDATE sets.
WITH ranked AS MATERIALIZED (
    SELECT o.id, o.endpoint, o.deadline <= :now AS expired,
        row_number() OVER (PARTITION BY o.endpoint, o.deadline <= :now ORDER BY o.next_attempt_at, o.created_at, o.id) AS n
    -- SQLite: NOT INDEXED, so the picked ids are read by rowid. Without
    -- statistics the planner would read every due row by
    -- courier_outbox_status instead, a claim costing the whole backlog.
    FROM courier_outbox AS o NOT INDEXED
    WHERE o.id IN (SELECT value FROM json_each(:ids)) AND o.status IN ('pending', 'retry_wait') AND o.hold IS NULL
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
    lease_owner = CASE act.act WHEN 'lease' THEN :owner END,
    lease_token = CASE act.act WHEN 'lease' THEN lower(hex(randomblob(16))) END,
    leased_at = CASE act.act WHEN 'lease' THEN :now END,
    lease_expires_at = CASE act.act WHEN 'lease' THEN :lease_expires_at END,
    last_error_code = CASE act.act WHEN 'expire' THEN 'expired' ELSE last_error_code END,
    updated_at = CASE act.act WHEN 'park' THEN updated_at ELSE :now END
FROM act
WHERE courier_outbox.id = act.id
RETURNING id, status, notification_id, endpoint,
    -- SQLite: the payload from its table (migration 13), of a leased row only.
    CASE WHEN status = 'leased' THEN (SELECT p.payload FROM courier_outbox_payload AS p WHERE p.id = courier_outbox.id) END AS payload,
    payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, spared_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint, event_type, trace_parent, trace_state, ordering_key;

-- name: outbox_claim_look
-- What a claim reads before it leases anything, in one statement: one row
-- per endpoint with parked deliveries and the room it has now
-- (endpoint_room; none if no endpoint has, and then one row with
-- endpoint ''), each carrying the same three answers: whether a lease has
-- expired (attempts_log_expired_leases would log one), whether an
-- endpoint is due a probe (endpoint_probes would find one), and the
-- priorities that have waiting rows, lowest first, as a JSON array. A
-- claim at rest, its endpoints closed and its leases live, so runs one
-- statement where it ran four.
-- The parked endpoints are read from courier_outbox_parked by a loose
-- index scan: one O(log n) step per such endpoint, however many wait; the
-- priorities from the due index likewise, one step per distinct priority.
-- SQLite: INDEXED BY holds the planner to those indexes; with statistics
-- it may prefer courier_outbox_status for the first step and walk every
-- held row.
WITH RECURSIVE e(endpoint) AS (
    SELECT MIN(endpoint) FROM courier_outbox INDEXED BY courier_outbox_parked WHERE hold = 'endpoint'
    UNION ALL
    SELECT (SELECT MIN(endpoint) FROM courier_outbox INDEXED BY courier_outbox_parked WHERE hold = 'endpoint' AND endpoint > e.endpoint)
    FROM e WHERE e.endpoint IS NOT NULL
),
prio(v) AS (
    SELECT MIN(priority) FROM courier_outbox INDEXED BY courier_outbox_due WHERE status IN ('pending', 'retry_wait') AND hold IS NULL
    UNION ALL
    SELECT (SELECT MIN(priority) FROM courier_outbox INDEXED BY courier_outbox_due WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority > prio.v)
    FROM prio WHERE prio.v IS NOT NULL
),
parked AS (
    SELECT d.endpoint,
        {{endpoint_room}} AS room,
        EXISTS (SELECT 1 FROM courier_endpoint_limits AS l WHERE l.endpoint = d.endpoint) AS limited,
        (SELECT p.next_attempt_at FROM courier_outbox AS p INDEXED BY courier_outbox_parked WHERE p.hold = 'endpoint' AND p.endpoint = d.endpoint
         ORDER BY p.priority, p.next_attempt_at, p.created_at, p.id LIMIT 1) AS first_due,
        -- The first and last parked deliveries' priorities, and the lowest
        -- waiting in the due index: a waiting delivery of a lower one comes
        -- before those of the endpoint's parked ones in claim order.
        (SELECT p.priority FROM courier_outbox AS p INDEXED BY courier_outbox_parked WHERE p.hold = 'endpoint' AND p.endpoint = d.endpoint
         ORDER BY p.priority, p.next_attempt_at, p.created_at, p.id LIMIT 1) AS first_priority,
        (SELECT p.priority FROM courier_outbox AS p INDEXED BY courier_outbox_parked WHERE p.hold = 'endpoint' AND p.endpoint = d.endpoint
         ORDER BY p.priority DESC LIMIT 1) AS last_priority,
        (SELECT MIN(priority) FROM courier_outbox INDEXED BY courier_outbox_due WHERE status IN ('pending', 'retry_wait') AND hold IS NULL) AS lowest_due
    FROM e AS d WHERE d.endpoint IS NOT NULL
        -- A disabled endpoint has no room until Enable: its deliveries wait
        -- (and end at their deadline, outbox_expire_parked) without costing
        -- each claim its reckoning.
        AND NOT EXISTS (SELECT 1 FROM courier_endpoints AS x WHERE x.endpoint = d.endpoint AND x.state = 'disabled')
),
answers AS (
    SELECT
        EXISTS (SELECT 1 FROM courier_outbox INDEXED BY courier_outbox_leases WHERE status = 'leased' AND lease_expires_at <= :now) AS expired_leases,
        -- endpoint_probes's condition.
        EXISTS (SELECT 1 FROM courier_endpoints AS b
                WHERE b.state IN ('open', 'half_open') AND b.open_until <= :now
                    AND (b.state = 'half_open' OR b.open_until <> b.updated_at
                        OR EXISTS (SELECT 1 FROM courier_outbox AS q WHERE q.hold = 'endpoint' AND q.endpoint = b.endpoint))) AS probes_due,
        (SELECT json_group_array(v) FROM prio WHERE v IS NOT NULL) AS priorities
)
SELECT a.expired_leases, a.probes_due, a.priorities,
    COALESCE(d.endpoint, '') AS endpoint, COALESCE(d.room, 0) AS room, COALESCE(d.limited, 0) AS limited,
    COALESCE(d.first_due, 0) AS first_due, COALESCE(d.first_priority, 0) AS first_priority,
    COALESCE(d.last_priority, 0) AS last_priority, d.lowest_due
FROM answers AS a LEFT JOIN parked AS d ON 1;

-- name: outbox_park_due
-- Parks an endpoint's next :limit due deliveries of a priority in one
-- statement, once a claim found the endpoint without room (see
-- outbox_claim): the claim then walks on past its backlog to other
-- endpoints' deliveries without a statement per batch of it. Rows whose
-- deadline has come stay, for the claim to end.
UPDATE courier_outbox SET hold = 'endpoint'
WHERE id IN (
    SELECT id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority = :priority AND next_attempt_at <= :now
        AND endpoint = :endpoint AND deadline > :now
    ORDER BY next_attempt_at, created_at, id
    LIMIT :limit
);

-- name: outbox_unpark
-- Puts an endpoint's first :limit parked deliveries, in claim order, back
-- in the due index, and returns the priority of each: the claim adds them
-- to the priorities outbox_claim_look read, rather than read the look
-- again, and every parked endpoint's room with it, to learn them.
UPDATE courier_outbox SET hold = NULL
WHERE id IN (
    SELECT id FROM courier_outbox WHERE hold = 'endpoint' AND endpoint = :endpoint
    ORDER BY priority, next_attempt_at, created_at, id
    LIMIT :limit
)
RETURNING priority;

-- name: outbox_expire_due
-- Called after a claim statement ended expired rows (see outbox_claim):
-- the claim sweeps on through the next :limit due rows of the priority, in
-- claim order, and ends those whose deadline has come, so a backlog of
-- expired rows (workers down for longer than the horizon) is ended in one
-- bounded statement rather than a claim batch at a time. Rows held back
-- (contract) are ended too: none of them may be sent any more.
UPDATE courier_outbox SET status = 'failed', last_error_code = 'expired', updated_at = :now
WHERE id IN (
    SELECT id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority = :priority AND next_attempt_at <= :now
    ORDER BY next_attempt_at, created_at, id
    LIMIT :limit
) AND deadline <= :now
-- The rows ended may have headed their ordering key.
RETURNING id, endpoint, ordering_key, status;

-- name: outbox_expire_parked
-- Parked deliveries (their endpoint had no room) whose deadline has come
-- are ended, oldest deadline first: a claim unparks an endpoint's
-- deliveries only when it has room, so those of an endpoint that has none
-- for good (disabled) would never end. It reads every parked row, from
-- courier_outbox_parked, so claims run it seldom (store/claim.go). An
-- index on their deadline would make it cheap, at a price paid by every
-- claim on PostgreSQL, whose planner then chose it for others.
UPDATE courier_outbox SET status = 'failed', last_error_code = 'expired', hold = NULL, updated_at = :now
WHERE id IN (
    SELECT id FROM courier_outbox INDEXED BY courier_outbox_parked
    WHERE hold = 'endpoint' AND deadline <= :now
    ORDER BY deadline
    LIMIT :limit
)
-- The rows ended may have headed their ordering key.
RETURNING id, endpoint, ordering_key, status;

-- name: outbox_claim_probe
-- One due delivery of an endpoint whose cool-down ended: its probe, once
-- endpoint_probe_take found the endpoint room for it (the store counts
-- its token, endpoint_limits_take). The store first unparks one of the
-- endpoint's parked deliveries (the claims park an open endpoint's), so
-- there is one to probe with.
-- One statement claims the batch. SQLite: writers are serialized (BEGIN
-- IMMEDIATE), so the subquery's rows cannot be taken by anyone else before
-- the UPDATE; PostgreSQL needs FOR UPDATE SKIP LOCKED for that. The token is
-- random per row: randomblob is evaluated once per updated row.
-- No attempt starts at or after a delivery's deadline: a row the subquery
-- picks whose deadline has come is ended instead of leased, failed with
-- code expired, its attempts uncounted (no attempt was made); RETURNING
-- gives its status so the store tells the two apart.
UPDATE courier_outbox SET
    status = CASE WHEN deadline <= :now THEN 'failed' ELSE 'leased' END,
    attempts = CASE WHEN deadline <= :now THEN attempts ELSE attempts + 1 END,
    lease_owner = CASE WHEN deadline <= :now THEN NULL ELSE :owner END,
    lease_token = CASE WHEN deadline <= :now THEN NULL ELSE lower(hex(randomblob(16))) END,
    leased_at = CASE WHEN deadline <= :now THEN NULL ELSE :now END,
    lease_expires_at = CASE WHEN deadline <= :now THEN NULL ELSE :lease_expires_at END,
    last_error_code = CASE WHEN deadline <= :now THEN 'expired' ELSE last_error_code END,
    updated_at = :now
WHERE id IN (
    -- SQLite: INDEXED BY, so the due rows are read in claim order up to
    -- the endpoint's first, not all of them (by courier_outbox_status,
    -- the planner's pick without statistics) and sorted.
    SELECT id FROM courier_outbox INDEXED BY courier_outbox_due
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
)
RETURNING id, status, notification_id, endpoint,
    -- SQLite: the payload from its table (migration 13), of a leased row only.
    CASE WHEN status = 'leased' THEN (SELECT p.payload FROM courier_outbox_payload AS p WHERE p.id = courier_outbox.id) END AS payload,
    payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, spared_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint, event_type, trace_parent, trace_state, ordering_key;

-- name: outbox_claim_parked
-- Leases up to :limit parked deliveries of an endpoint without limits, in
-- claim order, straight from courier_outbox_parked: the room the endpoint
-- has again (see outbox_claim_look), given without a walk of the due index.
-- Rows whose deadline has come are ended, as by outbox_claim.
UPDATE courier_outbox SET
    status = CASE WHEN deadline <= :now THEN 'failed' ELSE 'leased' END,
    attempts = CASE WHEN deadline <= :now THEN attempts ELSE attempts + 1 END,
    lease_owner = CASE WHEN deadline <= :now THEN NULL ELSE :owner END,
    lease_token = CASE WHEN deadline <= :now THEN NULL ELSE lower(hex(randomblob(16))) END,
    leased_at = CASE WHEN deadline <= :now THEN NULL ELSE :now END,
    lease_expires_at = CASE WHEN deadline <= :now THEN NULL ELSE :lease_expires_at END,
    last_error_code = CASE WHEN deadline <= :now THEN 'expired' ELSE last_error_code END,
    hold = NULL,
    updated_at = :now
WHERE id IN (
    SELECT id FROM courier_outbox
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
)
RETURNING id, status, notification_id, endpoint,
    -- SQLite: the payload from its table (migration 13), of a leased row only.
    CASE WHEN status = 'leased' THEN (SELECT p.payload FROM courier_outbox_payload AS p WHERE p.id = courier_outbox.id) END AS payload,
    payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, spared_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint, event_type, trace_parent, trace_state, ordering_key;

-- name: outbox_quarantine
-- A claimed row whose payload no longer matches its digest, or cannot be
-- decrypted.
UPDATE courier_outbox SET
    status = 'quarantined',
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = :code, updated_at = :now
WHERE id = :id AND status = 'leased' AND lease_token = :token;

-- name: outbox_release_leases
-- The rows of the leases Release gives back (:batch, a JSON array of {id,
-- token}) that still hold them (see the PostgreSQL file). lock_key: 0
-- (endpoint_lock takes no lock here).
SELECT o.id, o.endpoint, 0 AS lock_key FROM courier_outbox AS o
JOIN (SELECT value ->> 'id' AS id, value ->> 'token' AS token FROM json_each(:batch)) AS v ON o.id = v.id
WHERE o.status = 'leased' AND o.lease_token = v.token;

-- name: outbox_release_lock
-- The rows of :batch, taken before endpoint_probe_released (see the
-- PostgreSQL file). SQLite: writers are serialized (BEGIN IMMEDIATE): no
-- other transaction holds one, and reading the rows is enough.
SELECT id FROM courier_outbox
WHERE id IN (SELECT value ->> 'id' FROM json_each(:batch))
ORDER BY id;

-- name: outbox_release_wait
-- SQLite: nothing to do; outbox_release_lock passes no row.

-- name: outbox_release
-- Gives back leases whose attempt was never made (a worker stopping with
-- deliveries it claimed ahead): the claim's attempt is not counted, and
-- the row is due again as it was. :batch is a JSON array of {id, token};
-- each is fenced by its token like a settle.
-- SQLite: NOT INDEXED, so each row is found by its id, :batch read once
-- (see outbox_settle).
UPDATE courier_outbox NOT INDEXED SET
    status = CASE WHEN last_error_code IS NULL THEN 'pending' ELSE 'retry_wait' END,
    attempts = attempts - 1,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    -- Behind parked deliveries of its endpoint it is parked too: a claim
    -- leases an endpoint's parked deliveries before its due ones, and this
    -- one keeps its place among them.
    hold = CASE WHEN EXISTS (SELECT 1 FROM courier_outbox AS p WHERE p.hold = 'endpoint' AND p.endpoint = courier_outbox.endpoint)
        THEN 'endpoint' END,
    updated_at = :now
FROM (SELECT value ->> 'id' AS id, value ->> 'token' AS token FROM json_each(:batch)) AS v
WHERE courier_outbox.id = v.id AND courier_outbox.status = 'leased' AND courier_outbox.lease_token = v.token;

-- name: outbox_settle_lock_timeout
-- SQLite: nothing to do; SQLite has no row locks, and a settle's
-- transaction holds the one writer from its BEGIN IMMEDIATE, so none of
-- its statements waits for another transaction.

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
-- SQLite: RETURNING may not name the FROM table, so the row's id says which
-- outcome it was.
-- SQLite: NOT INDEXED, so :batch drives and each row is found by its id.
-- Without statistics (an application's SQLite file seldom has any) the
-- planner would read every lease by courier_outbox_status and parse :batch
-- again for each: a settle costing the leases in flight times its batch.
UPDATE courier_outbox NOT INDEXED SET
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
        WHEN attempts >= max_attempts + v.spare OR attempts >= :max_attempts_bound OR v.next_at >= deadline THEN 'failed'
        ELSE 'retry_wait' END,
    last_error_code = CASE
        WHEN v.result = 'retry' AND attempts < max_attempts + v.spare AND attempts < :max_attempts_bound AND v.next_at >= deadline THEN 'expired'
        ELSE v.code END,
    max_attempts = MIN(max_attempts + v.spare, :max_attempts_bound),
    spared_attempts = spared_attempts + MIN(max_attempts + v.spare, :max_attempts_bound) - max_attempts,
    enqueued_max_attempts = CASE WHEN v.spare > 0 THEN COALESCE(enqueued_max_attempts, max_attempts) ELSE enqueued_max_attempts END,
    next_attempt_at = CASE WHEN v.result = 'retry' THEN v.next_at ELSE next_attempt_at END,
    last_status = v.http,
    last_remote_code = v.remote,
    ack_sha256 = CASE WHEN v.ack IS NOT NULL AND payload_key_id <> v.sealed THEN '' ELSE v.ack END,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    updated_at = :now
FROM (SELECT value ->> 'id' AS id, value ->> 'token' AS token, value ->> 'result' AS result,
             value ->> 'code' AS code, value ->> 'next_at' AS next_at, value ->> 'http' AS http,
             value ->> 'ack' AS ack, value ->> 'remote' AS remote, value ->> 'sealed' AS sealed,
             value ->> 'spare' AS spare
      FROM json_each(:batch)) AS v
WHERE courier_outbox.id = v.id AND courier_outbox.status = 'leased'
    AND courier_outbox.lease_token = v.token AND courier_outbox.lease_expires_at > :now
-- Whether the endpoint has a breaker row: most have none (healthy), and
-- then the settle needs no read of courier_endpoints. lock_key: 0
-- (endpoint_lock takes no lock here).
RETURNING id, status, last_error_code, endpoint, ordering_key, 0 AS lock_key,
    EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = courier_outbox.endpoint) AS tracked;

-- name: outbox_settle_plain
-- SQLite: nothing to do; every settle goes through outbox_settle's
-- transaction. Its round trips cost nothing, and its BEGIN IMMEDIATE
-- takes the one writer a statement of its own would take anyway.

-- name: outbox_get
-- SQLite: the payload from its table (migration 13).
SELECT id, notification_id, endpoint,
    (SELECT p.payload FROM courier_outbox_payload AS p WHERE p.id = courier_outbox.id) AS payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox WHERE id = :id;

-- name: outbox_health_counts
SELECT status, COUNT(*) AS n FROM courier_outbox GROUP BY status;

-- name: outbox_health_unreadable
-- How many quarantined rows could not be opened (payload_unreadable), for
-- Health's code: read only while some row is quarantined, those rows
-- alone, from the status index (SQLite: INDEXED BY, which the planner
-- may not take for so few rows without statistics).
SELECT COUNT(*) FROM courier_outbox INDEXED BY courier_outbox_status
WHERE status = 'quarantined' AND last_error_code = 'payload_unreadable';

-- name: outbox_health_due
-- Health's backlog, read once: how many rows are due, the oldest of their
-- times, and how many rows wait past their deadline. Due: the rows a
-- claim may lease, from the due index, and the parked ones that wait only
-- for room (their endpoint at its limits, or at a worker's share of it),
-- from the parked index. Overdue: the rows a claim ends as it reaches
-- them: due ones (outbox_claim and outbox_expire_due end them), and
-- parked ones whatever their endpoint's state once their deadline is
-- :parked_late or earlier (outbox_expire_parked ends them, looking for
-- them only so often: :parked_late is now less the time a claim takes to
-- find one). Not counted: rows waiting for their key, ended only once they
-- head it, nor, as due, rows of an endpoint that is disabled, open while
-- its cool-down runs, or half open while its probe is in flight, parked
-- or still in the due index (a Disable, or a breaker opening, parks none:
-- the claims park them as they reach them, and the figures do not wait
-- for that); Endpoints says what holds them. Past its open_until an open
-- or half-open endpoint holds nothing back: the next claims probe it (one
-- that found nothing to send stays open until a probe gets through), and
-- its rows are a backlog waiting for a worker. The endpoint of each row
-- of the due index is looked up by its key. The due index is
-- read as a range per priority, (priority = p, next_attempt_at <= now),
-- the priorities found as in outbox_claim_look: rows waiting for a
-- later time (a retry backlog, a NotBefore ahead) are never walked. No
-- index holds the deadline: each due and parked row is read for it, so
-- the read costs what the backlog holds, little while workers keep up.
-- SQLite: INDEXED BY, as in outbox_claim_look; the due index's
-- condition is repeated verbatim. CROSS JOIN keeps the priorities
-- outside, each a range of the due index.
WITH RECURSIVE p(v) AS (
    SELECT MIN(priority) FROM courier_outbox INDEXED BY courier_outbox_due WHERE status IN ('pending', 'retry_wait') AND hold IS NULL
    UNION ALL
    SELECT (SELECT MIN(priority) FROM courier_outbox INDEXED BY courier_outbox_due WHERE status IN ('pending', 'retry_wait') AND hold IS NULL AND priority > p.v)
    FROM p WHERE p.v IS NOT NULL
),
w(due, next_attempt_at, late) AS (
    SELECT NOT EXISTS (SELECT 1 FROM courier_endpoints AS e
                       WHERE e.endpoint = o.endpoint AND (e.state = 'disabled'
                           OR e.state IN ('open', 'half_open') AND e.open_until > :now)),
        o.next_attempt_at, o.deadline <= :now
    FROM p CROSS JOIN courier_outbox AS o INDEXED BY courier_outbox_due
    WHERE o.status IN ('pending', 'retry_wait') AND o.hold IS NULL AND o.priority = p.v AND o.next_attempt_at <= :now
    UNION ALL
    SELECT q.next_attempt_at <= :now
            AND NOT EXISTS (SELECT 1 FROM courier_endpoints AS e
                            WHERE e.endpoint = q.endpoint AND (e.state = 'disabled'
                                OR e.state IN ('open', 'half_open') AND e.open_until > :now)),
        q.next_attempt_at, q.deadline <= :parked_late
    FROM courier_outbox AS q INDEXED BY courier_outbox_parked WHERE q.hold = 'endpoint'
)
SELECT COUNT(CASE WHEN due THEN 1 END), COALESCE(MIN(CASE WHEN due THEN next_attempt_at END), 0),
    COUNT(CASE WHEN late THEN 1 END)
FROM w;

-- name: outbox_health_expired
SELECT COUNT(*) FROM courier_outbox INDEXED BY courier_outbox_leases WHERE status = 'leased' AND lease_expires_at <= :now;

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
SELECT updated_at, id FROM courier_outbox INDEXED BY courier_outbox_status
WHERE status = :status
ORDER BY updated_at DESC, id DESC LIMIT 1;

-- name: outbox_redrive_in_order
-- SQLite: nothing to do; outbox_redrive_batch names its index (INDEXED BY).

-- name: outbox_redrive_batch
-- The next deliveries Redrive moves, at most :limit, of one status, read
-- in courier_outbox_status's order after the last batch's last one and
-- up to the status's last one when Redrive began (outbox_redrive_last),
-- each batch from where the last one stopped: a delivery it redrove that
-- fails again, stamped later, is after the bound, and waits for the next
-- Redrive. Read outside the batch's transaction, which moves what of it
-- is still to be moved (outbox_redrive's conditions).
SELECT updated_at, id FROM courier_outbox INDEXED BY courier_outbox_status
WHERE status = :status AND (updated_at, id) > (:after_updated_at, :after_id) AND (updated_at, id) <= (:last_updated_at, :last_id)
    AND (status = 'failed' OR last_error_code = 'payload_unreadable') AND attempts < :max_attempts_bound AND (:endpoint = '' OR endpoint = :endpoint)
    AND NOT (contract_sha256 IS NOT NULL AND EXISTS (SELECT 1 FROM courier_contracts AS k
        WHERE k.endpoint = courier_outbox.endpoint AND k.capabilities_sha256 <> courier_outbox.contract_sha256))
ORDER BY updated_at, id LIMIT :limit;

-- name: outbox_redrive_keys
-- The ordering keys of the deliveries outbox_redrive is about to move
-- (its conditions, repeated), each with the first of them by id, whose
-- rows Redrive takes before it moves any (see the PostgreSQL file).
-- SQLite: writers are serialized: the order changes nothing here. The
-- batch's ids are read by the primary key (NOT INDEXED), never through
-- courier_outbox_status, which holds every failed delivery.
SELECT endpoint, ordering_key, MIN(id) AS id FROM courier_outbox NOT INDEXED
WHERE ordering_key IS NOT NULL AND id IN (SELECT value FROM json_each(:ids))
    AND status IN ('failed', 'quarantined') AND (status = 'failed' OR last_error_code = 'payload_unreadable')
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
-- enqueued before migration 12 keeps there its max_attempts before this).
-- It moves a batch's deliveries (:ids, a JSON array; see
-- outbox_redrive_batch), read by the primary key (see outbox_redrive_keys).
UPDATE courier_outbox NOT INDEXED SET status = 'pending', next_attempt_at = :now, deadline = :deadline,
    enqueued_max_attempts = COALESCE(enqueued_max_attempts, max_attempts),
    max_attempts = MIN(attempts + :budget, :max_attempts_bound),
    hold = CASE WHEN ordering_key IS NOT NULL THEN 'key' END,
    last_error_code = NULL, last_status = NULL, last_remote_code = NULL, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
    AND status IN ('failed', 'quarantined') AND (status = 'failed' OR last_error_code = 'payload_unreadable')
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
    -- SQLite: an IN of row values, not a correlated EXISTS: the list is
    -- read once, into an index, rather than again for every row, which
    -- made a redrive quadratic in the deliveries it moves.
    AND (ordering_key IS NULL OR (endpoint, ordering_key) IN (SELECT value ->> 'endpoint', value ->> 'ordering_key' FROM json_each(:keys)))
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
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_list_by_status
-- outbox_list for one status, with no window of time (Since, Until: see
-- outbox_list_by_status_window), read from courier_outbox_listed (status,
-- id) in id order from the cursor down (migration 14): a page reads the
-- rows it shows, and those of its status the other filters leave out.
-- SQLite: INDEXED BY, which the planner would otherwise leave, with
-- statistics, for courier_outbox_status and a sort of every row of the
-- status.
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox INDEXED BY courier_outbox_listed
WHERE status = :status AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND id <= :max_id
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_plan_with_values
-- SQLite: nothing to do; it plans each statement with its values.

-- name: outbox_list_by_status_window
-- outbox_list_by_status within a window of time (updated_at in [:since,
-- :until)): a statement of its own, which PostgreSQL plans with its
-- values (see the PostgreSQL file). SQLite reads it as
-- outbox_list_by_status reads a page, from courier_outbox_listed, the
-- rows outside the window left out on the way (INDEXED BY, as there).
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox INDEXED BY courier_outbox_listed
WHERE status = :status AND (:endpoint = '' OR endpoint IN (:endpoint, :endpoint_spelled))
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_list_by_endpoint
-- outbox_list for one endpoint, with no status or a finished one
-- (succeeded, suppressed: see Outbox.List), read from
-- courier_outbox_endpoint (endpoint, id) in id order from the cursor down
-- (migration 15): a page reads the rows it shows, and those of its
-- endpoint the other filters leave out. The endpoint may be stored under
-- two forms (:endpoint, :endpoint_spelled: see Endpoints), each a range
-- of the index of its own: the two are read in id order and merged
-- (MERGE (UNION ALL)), as outbox_prune merges its statuses; one range
-- under both filters (endpoint IN (...)) would be read whole and sorted.
-- The second is read only when the spelling differs, or a delivery under
-- the normalized form would be listed twice.
-- SQLite: INDEXED BY, which the planner would otherwise leave, with
-- statistics, for the primary key or courier_outbox_status and a sort
-- of every row.
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox INDEXED BY courier_outbox_endpoint
WHERE endpoint = :endpoint AND (:status = '' OR status = :status)
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id
UNION ALL
SELECT id, notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, subscription_id, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, last_remote_code, ack_sha256, created_at, updated_at, ordering_key, hold
FROM courier_outbox INDEXED BY courier_outbox_endpoint
WHERE endpoint = :endpoint_spelled AND :endpoint_spelled <> :endpoint AND (:status = '' OR status = :status)
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id
ORDER BY id DESC
LIMIT :limit;

-- name: outbox_cancel
-- An operator withdraws a delivery that has not been sent successfully:
-- a pending or retrying one (held or not), or settles one that will not be
-- sent: a quarantined one (its stored bytes cannot be sent again) or a
-- failed one (dismissed rather than redriven). Either frees the ordering
-- key it may hold (a failed one under OrderingOnFailure OrderingHoldKey).
UPDATE courier_outbox SET status = 'suppressed', last_error_code = 'cancelled', hold = NULL, updated_at = :now
WHERE id = :id AND status IN ('pending', 'retry_wait', 'quarantined', 'failed')
RETURNING id, endpoint, ordering_key, status;

-- fragment: outbox_prunable
-- The finished deliveries past their age, each status read in updated_at
-- order from courier_outbox_status (status, updated_at, id), which
-- INDEXED BY names: what outbox_prune deletes and outbox_prune_count
-- counts.
SELECT id, updated_at FROM courier_outbox INDEXED BY courier_outbox_status
WHERE status = 'succeeded' AND updated_at < :before
UNION ALL
SELECT id, updated_at FROM courier_outbox INDEXED BY courier_outbox_status
WHERE status = 'suppressed' AND updated_at < :before

-- name: outbox_prune
-- Finished deliveries past their age, oldest first, bounded. The two
-- reads of outbox_prunable are merged (MERGE (UNION ALL)) until the batch
-- is full, so a batch reads its own rows: no index gives status IN
-- ('succeeded', 'suppressed') in updated_at order, and sorting every
-- prunable row for each batch made a whole prune quadratic.
DELETE FROM courier_outbox WHERE id IN (
    SELECT id FROM (
        {{outbox_prunable}}
        ORDER BY updated_at LIMIT :limit
    )
);

-- name: outbox_prune_count
-- How many rows outbox_prune would delete, in every batch: a dry run's.
SELECT COUNT(*) FROM ({{outbox_prunable}});

-- name: outbox_enqueue_command
-- outbox_enqueue for the source-delivery profile: the row also records the
-- capabilities digest it was enqueued under (contract_sha256) and the
-- command's operation (event_type). SQLite: its payload is written by
-- outbox_payload_write, as outbox_enqueue's.
INSERT INTO courier_outbox (
    notification_id, endpoint, payload_key_id, payload_sha256, profile, key_id, contract_sha256, event_type, trace_parent, trace_state, status,
    priority, attempts, max_attempts, enqueued_max_attempts, next_attempt_at, deadline, created_at, updated_at
) VALUES (
    :notification_id, :endpoint, :payload_key_id, :payload_sha256, :profile, :key_id, :contract_sha256, :event_type, :trace_parent, :trace_state, 'pending',
    :priority, 0, :max_attempts, :enqueued_max_attempts, :next_attempt_at, :deadline, :now, :now
)
ON CONFLICT (notification_id, endpoint) DO NOTHING;

-- name: outbox_check_rows
-- Outbox.Check's slice of the outbox: every column of the rows after
-- :after, in id order, from the primary key. The payload only of a
-- delivery that may still be sent: Check holds only those to their digest
-- (rowProblem in store/check.go), and leaves other payloads unread.
-- key_unjoined: the delivery waits for its ordering key (hold 'key') but
-- no key row has another head to be promoted after: no settle ever
-- promotes it (an enqueue that failed between its insert and its join,
-- committed anyway). Looked up by the key's primary key, for those rows only.
-- SQLite: the payload from its table (migration 13); a delivery without
-- one there reads NULL, which no digest matches.
SELECT id, notification_id, endpoint,
    CASE WHEN status IN ('pending', 'retry_wait', 'leased', 'failed')
        THEN (SELECT p.payload FROM courier_outbox_payload AS p WHERE p.id = courier_outbox.id) END AS payload,
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
-- SQLite: the payload from its table (migration 13).
SELECT id, notification_id, endpoint,
    (SELECT p.payload FROM courier_outbox_payload AS p WHERE p.id = courier_outbox.id) AS payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
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
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id
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
    AND updated_at >= :since AND updated_at < :until AND id <= :max_id
LIMIT :limit;

-- name: outbox_health_operations
-- Command deliveries by operation (event_type, migration 5) and status,
-- from their partial index: the index's condition is repeated verbatim.
SELECT COALESCE(event_type, '') AS operation, status, COUNT(*) AS n FROM courier_outbox
WHERE profile = 'command'
GROUP BY event_type, status;

-- name: outbox_promote
-- The next delivery waiting for an ordering key, in enqueue order, becomes
-- its head: due as it was scheduled.
UPDATE courier_outbox SET hold = NULL, updated_at = :now
WHERE id = (SELECT id FROM courier_outbox
            WHERE hold = 'key' AND endpoint = :endpoint AND ordering_key = :ordering_key
            ORDER BY id LIMIT 1)
RETURNING id;

-- name: outbox_hold
-- Whether a delivery waits for its ordering key: :hold 'key' or NULL (its
-- head). Only an unfinished delivery is held.
UPDATE courier_outbox SET hold = :hold
WHERE id = :id AND status IN ('pending', 'retry_wait');

-- courier's queries for PostgreSQL: endpoint health: the per-endpoint circuit breaker.
-- store/sqlite/sql/queries/endpoints.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: endpoint_lock
-- Held until the transaction ends: settles of one endpoint's attempts by
-- concurrent workers read, change and write its breaker one after the
-- other, and none overwrites another's count. An advisory lock, not a row
-- lock, since the first failure finds no row to lock. The two-key form,
-- whose keys never meet a one-key lock's (schema_lock). Two endpoints may
-- share a key, and so one lock: a transaction that takes several takes
-- them by key, then by endpoint (the lock_key the statements before it
-- return), or one needing x and y and another needing y and z, x's key
-- z's, would each hold one while waiting for the other.
SELECT pg_advisory_xact_lock(721234500, hashtext(:endpoint));

-- name: endpoint_get
SELECT endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at
FROM courier_endpoints WHERE endpoint = :endpoint;

-- name: endpoint_list
-- The endpoints with something to show, at most :limit, by URL: a breaker
-- record, limits, a delivery in flight or a blocked ordering key; with
-- :every false (a metrics scrape's), of the breaker records only those
-- open or half open, not the disabled endpoints or those failing below the
-- threshold with none of the rest (endpoint_states counts them). Each set
-- is read from a small table or a partial index (in flight:
-- courier_outbox_in_flight, read as a loose scan would be, distinct
-- endpoints of the leased rows only), and the loads are counted for the
-- endpoints kept only. COLLATE "C": byte order, as on SQLite, whatever
-- the database's collation, so that both keep the same endpoints.
WITH named AS (
    SELECT endpoint FROM courier_endpoints WHERE :every::boolean OR state IN ('open', 'half_open')
    UNION SELECT endpoint FROM courier_endpoint_limits
    UNION SELECT endpoint FROM courier_outbox WHERE status = 'leased'
    UNION SELECT endpoint FROM courier_ordering_keys WHERE blocked_at IS NOT NULL
),
kept AS (
    SELECT endpoint FROM named ORDER BY endpoint COLLATE "C" LIMIT :limit
),
-- The kept endpoints' leases, counted once, grouped: counted per endpoint
-- in a subquery, the planner priced the count as many times as it guessed
-- endpoints kept (:limit), and with a fleet's leases in the statistics
-- (20,000 to one endpoint) the statement passed jit_above_cost many times
-- over: PostgreSQL compiled and optimized it at every call, some 200 ms
-- of a metrics scrape's or the ops page's.
in_flight AS (
    SELECT f.endpoint, COUNT(*) AS n FROM courier_outbox AS f
    WHERE f.status = 'leased' AND f.endpoint IN (SELECT endpoint FROM kept)
    GROUP BY f.endpoint
)
SELECT n.endpoint, COALESCE(e.state, 'closed') AS state, COALESCE(e.consecutive_failures, 0) AS consecutive_failures,
    e.failing_since, e.open_until, e.reason, COALESCE(e.updated_at, 0) AS updated_at,
    COALESCE(l.max_in_flight, 0) AS max_in_flight, COALESCE(l.rate, 0) AS rate, COALESCE(l.burst, 0) AS burst,
    COALESCE(c.n, 0) AS in_flight,
    (SELECT COUNT(*) FROM courier_ordering_keys AS k WHERE k.endpoint = n.endpoint AND k.blocked_at IS NOT NULL) AS blocked_keys
FROM kept AS n
LEFT JOIN courier_endpoints AS e ON e.endpoint = n.endpoint
LEFT JOIN courier_endpoint_limits AS l ON l.endpoint = n.endpoint
LEFT JOIN in_flight AS c ON c.endpoint = n.endpoint
ORDER BY n.endpoint COLLATE "C";

-- name: endpoint_page
-- A page of what endpoint_list lists with :every true: at most :limit
-- endpoints after :after ("" for the first page), by URL. Each set is
-- read from its own index from :after on, at most :limit of each (the
-- primary keys of courier_endpoints and courier_endpoint_limits, the
-- partial indexes of the leased deliveries, courier_outbox_in_flight, and
-- of the blocked keys), and the loads are counted for the endpoints kept
-- only: a page reads what it shows, however many endpoints the store
-- keeps.
-- PostgreSQL: by the database's collation, not byte order as SQLite's
-- (endpoint_list's COLLATE "C"): the indexes are in it, and in another
-- order each page would read and sort every endpoint. A page is read
-- after one of the same database, in the same order.
WITH named AS (
    (SELECT endpoint FROM courier_endpoints WHERE endpoint > :after ORDER BY endpoint LIMIT :limit)
    UNION (SELECT endpoint FROM courier_endpoint_limits WHERE endpoint > :after ORDER BY endpoint LIMIT :limit)
    UNION (SELECT DISTINCT endpoint FROM courier_outbox WHERE status = 'leased' AND endpoint > :after ORDER BY endpoint LIMIT :limit)
    UNION (SELECT DISTINCT endpoint FROM courier_ordering_keys WHERE blocked_at IS NOT NULL AND endpoint > :after ORDER BY endpoint LIMIT :limit)
),
kept AS (
    SELECT endpoint FROM named ORDER BY endpoint LIMIT :limit
)
SELECT n.endpoint, COALESCE(e.state, 'closed') AS state, COALESCE(e.consecutive_failures, 0) AS consecutive_failures,
    e.failing_since, e.open_until, e.reason, COALESCE(e.updated_at, 0) AS updated_at,
    COALESCE(l.max_in_flight, 0) AS max_in_flight, COALESCE(l.rate, 0) AS rate, COALESCE(l.burst, 0) AS burst,
    (SELECT COUNT(*) FROM courier_outbox AS f WHERE f.endpoint = n.endpoint AND f.status = 'leased') AS in_flight,
    (SELECT COUNT(*) FROM courier_ordering_keys AS k WHERE k.endpoint = n.endpoint AND k.blocked_at IS NOT NULL) AS blocked_keys
FROM kept AS n
LEFT JOIN courier_endpoints AS e ON e.endpoint = n.endpoint
LEFT JOIN courier_endpoint_limits AS l ON l.endpoint = n.endpoint
ORDER BY n.endpoint;

-- name: endpoint_count
-- How many endpoints endpoint_list lists with :every true, counted in the
-- database: the breaker records, then those of the small sets (limits,
-- deliveries in flight, blocked keys) without one, each looked up by the
-- primary key.
SELECT (SELECT COUNT(*) FROM courier_endpoints) + (SELECT COUNT(*) FROM (
    SELECT endpoint FROM courier_endpoint_limits
    UNION SELECT endpoint FROM courier_outbox WHERE status = 'leased'
    UNION SELECT endpoint FROM courier_ordering_keys WHERE blocked_at IS NOT NULL
) AS o WHERE NOT EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = o.endpoint));

-- name: endpoint_top
-- The :limit endpoints of endpoint_list (:every true) that most need an
-- operator, the ops page's order: failing now (open or half open), then
-- holding ordering keys, then disabled, then failing but still closed,
-- then those only limited or busy; within each, the breaker's latest
-- change first, then the busiest, then by URL. No index holds that order:
-- the database ranks every endpoint by a narrow key (ranked, kept) and
-- sends the page, read whole for the kept only. The loads are counted
-- once for all from the leased deliveries and the blocked keys (few,
-- from their partial indexes), not once per endpoint. COLLATE "C": byte
-- order, as on SQLite, whatever the database's collation.
WITH in_flight AS MATERIALIZED (
    SELECT endpoint, COUNT(*) AS n FROM courier_outbox WHERE status = 'leased' GROUP BY endpoint
),
blocked AS MATERIALIZED (
    SELECT endpoint, COUNT(*) AS n FROM courier_ordering_keys WHERE blocked_at IS NOT NULL GROUP BY endpoint
),
ranked AS (
    SELECT e.endpoint, e.updated_at,
        CASE WHEN e.state IN ('open', 'half_open') THEN 0 WHEN e.endpoint IN (SELECT endpoint FROM blocked) THEN 1
            WHEN e.state = 'disabled' THEN 2 WHEN e.consecutive_failures > 0 THEN 3 ELSE 4 END AS pressing
    FROM courier_endpoints AS e
    UNION ALL
    SELECT o.endpoint, 0, CASE WHEN o.endpoint IN (SELECT endpoint FROM blocked) THEN 1 ELSE 4 END FROM (
        SELECT endpoint FROM courier_endpoint_limits UNION SELECT endpoint FROM in_flight UNION SELECT endpoint FROM blocked
    ) AS o WHERE NOT EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = o.endpoint)
),
kept AS (
    SELECT r.endpoint, r.updated_at, r.pressing, COALESCE((SELECT f.n FROM in_flight AS f WHERE f.endpoint = r.endpoint), 0) AS in_flight
    FROM ranked AS r
    ORDER BY r.pressing, r.updated_at DESC, in_flight DESC, r.endpoint COLLATE "C"
    LIMIT :limit
)
SELECT k.endpoint, COALESCE(e.state, 'closed') AS state, COALESCE(e.consecutive_failures, 0) AS consecutive_failures,
    e.failing_since, e.open_until, e.reason, k.updated_at,
    COALESCE(l.max_in_flight, 0) AS max_in_flight, COALESCE(l.rate, 0) AS rate, COALESCE(l.burst, 0) AS burst,
    k.in_flight, COALESCE(b.n, 0) AS blocked_keys
FROM kept AS k
LEFT JOIN courier_endpoints AS e ON e.endpoint = k.endpoint
LEFT JOIN courier_endpoint_limits AS l ON l.endpoint = k.endpoint
LEFT JOIN blocked AS b ON b.endpoint = k.endpoint
ORDER BY k.pressing, k.updated_at DESC, k.in_flight DESC, k.endpoint COLLATE "C";

-- name: endpoint_states
-- How many endpoints are in each breaker state but closed, counted in the
-- database: one pass over courier_endpoints, no row of it sent.
SELECT state, COUNT(*) AS n FROM courier_endpoints WHERE state <> 'closed' GROUP BY state;

-- name: endpoint_blocked_keys
-- How many ordering keys a failed head holds, from their partial index.
SELECT COUNT(*) FROM courier_ordering_keys WHERE blocked_at IS NOT NULL;

-- name: endpoint_load
-- One endpoint's limits, deliveries in flight and blocked ordering keys.
SELECT COALESCE((SELECT max_in_flight FROM courier_endpoint_limits WHERE endpoint = :endpoint), 0) AS max_in_flight,
    COALESCE((SELECT rate FROM courier_endpoint_limits WHERE endpoint = :endpoint), 0) AS rate,
    COALESCE((SELECT burst FROM courier_endpoint_limits WHERE endpoint = :endpoint), 0) AS burst,
    (SELECT COUNT(*) FROM courier_outbox WHERE endpoint = :endpoint AND status = 'leased') AS in_flight,
    (SELECT COUNT(*) FROM courier_ordering_keys WHERE endpoint = :endpoint AND blocked_at IS NOT NULL) AS blocked_keys;

-- name: endpoint_limits_put
-- An endpoint's limits. A bucket is filled when a rate is set where none
-- was; set again, it keeps its tokens, refilled for the time since
-- tokens_at at the rate it had (as endpoint_limits_take reckons it), up to
-- the new burst, so that limits applied again (each instance of an
-- application setting them as it starts) never give a second burst.
INSERT INTO courier_endpoint_limits (endpoint, max_in_flight, rate, burst, tokens, tokens_at, updated_at)
VALUES (:endpoint, :max_in_flight, :rate, :burst, :tokens, :now, :now)
ON CONFLICT (endpoint) DO UPDATE SET max_in_flight = excluded.max_in_flight, rate = excluded.rate,
    burst = excluded.burst,
    tokens = CASE WHEN courier_endpoint_limits.rate > 0 AND excluded.rate > 0
        THEN LEAST(excluded.burst, CASE WHEN courier_endpoint_limits.tokens_at - :now > 60000000 THEN courier_endpoint_limits.burst
            ELSE courier_endpoint_limits.tokens + GREATEST(0, :now - courier_endpoint_limits.tokens_at) * courier_endpoint_limits.rate / 1e6 END)
        ELSE excluded.tokens END,
    tokens_at = CASE WHEN courier_endpoint_limits.rate > 0 AND excluded.rate > 0 AND courier_endpoint_limits.tokens_at - :now <= 60000000
        THEN GREATEST(courier_endpoint_limits.tokens_at, :now) ELSE excluded.tokens_at END,
    updated_at = excluded.updated_at;

-- name: endpoint_limits_delete
DELETE FROM courier_endpoint_limits WHERE endpoint = :endpoint;

-- name: endpoint_limits_take
-- A claim leased :batch's n deliveries of each endpoint ({endpoint, n},
-- JSON): each rate-limited bucket refills for the time since tokens_at, up
-- to burst, and gives n tokens. tokens_at never moves back: processes
-- whose clocks differ by a little (PostgreSQL's: each keeps its own
-- reading of the server's) refill nothing for a stamp a little ahead. A
-- stamp more than a minute ahead is a clock that stepped back: the time
-- since is unknown, and the bucket refills whole, here and in the claim's
-- reckoning of the room, rather than owe the step.
UPDATE courier_endpoint_limits AS l SET
    tokens = LEAST(l.burst, CASE WHEN l.tokens_at - :now > 60000000 THEN l.burst ELSE l.tokens + GREATEST(0, :now - l.tokens_at) * l.rate / 1e6 END) - v.n,
    tokens_at = CASE WHEN l.tokens_at - :now > 60000000 THEN :now ELSE GREATEST(l.tokens_at, :now) END
FROM jsonb_to_recordset(:batch::jsonb) AS v(endpoint text, n integer)
WHERE l.endpoint = v.endpoint AND l.rate > 0;

-- name: endpoint_put
INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at)
VALUES (:endpoint, :state, :consecutive_failures, :failing_since, :open_until, :reason, :now)
ON CONFLICT (endpoint) DO UPDATE SET state = excluded.state, consecutive_failures = excluded.consecutive_failures,
    failing_since = excluded.failing_since, open_until = excluded.open_until, reason = excluded.reason,
    updated_at = excluded.updated_at;

-- name: endpoint_delete
DELETE FROM courier_endpoints WHERE endpoint = :endpoint;

-- name: endpoint_probes
-- Endpoints whose cool-down (or whose probe's lease) ended, and the state
-- each is in: each gets one probe (endpoint_probe_take). An open endpoint
-- whose last probe found nothing to send (endpoint_probe_idle leaves
-- open_until = updated_at, which a cool-down never does) is left out
-- until a claim has parked a delivery of its own: each probe walks the due
-- rows for one, and would at every claim, for nothing. lapsed tells a
-- half-open endpoint whose probe's lease ran out (endpoint_probe_take set
-- open_until to the lease's end) from one whose probe was given back or
-- settled without an answer (endpoint_probe_released, endpoint_probe_again
-- leave open_until = updated_at). lock_key: endpoint_lock's.
SELECT endpoint, state, open_until <> updated_at AS lapsed, hashtext(endpoint) AS lock_key FROM courier_endpoints AS e
WHERE state IN ('open', 'half_open') AND open_until <= :now
    AND (state = 'half_open' OR open_until <> updated_at
        OR EXISTS (SELECT 1 FROM courier_outbox AS p WHERE p.hold = 'endpoint' AND p.endpoint = e.endpoint));

-- name: endpoint_disabled_waiting
-- How many disabled endpoints have deliveries waiting for them, for
-- Health: parked (the claims park a disabled endpoint's deliveries as they
-- reach them) or not yet (a retry not due, a NotBefore ahead). The
-- waiting rows are read once, from the status index: no index leads with
-- the endpoint and holds only those (courier_outbox_endpoint, migration
-- 15, holds every delivery, finished ones too), and a look per disabled
-- endpoint read them all each time.
-- OFFSET 0 keeps the planner from making it a join that looks again for
-- each endpoint; the set is built only when an endpoint is disabled.
SELECT COUNT(*) FROM courier_endpoints
WHERE state = 'disabled'
    AND endpoint IN (SELECT DISTINCT endpoint FROM courier_outbox WHERE status IN ('pending', 'retry_wait') OFFSET 0);

-- name: endpoint_probe_lock
-- First for an endpoint to probe: its limits row, if it has one, is
-- locked until the claim commits, as outbox_claim_pick locks those of the
-- rows it picks, so endpoint_probe_take, a statement of its own with a
-- snapshot taken after the lock, counts every lease and token the other
-- claimers committed, and the probe's token is taken
-- (endpoint_limits_take) before another claimer reckons the bucket.
-- SKIP LOCKED, as there: busy says another claimer holds the row, and the
-- endpoint is probed by a later claim.
WITH locked AS MATERIALIZED (
    SELECT endpoint FROM courier_endpoint_limits WHERE endpoint = :endpoint
    FOR UPDATE SKIP LOCKED
)
SELECT EXISTS (SELECT 1 FROM locked) AS limited,
    (NOT EXISTS (SELECT 1 FROM locked) AND EXISTS (SELECT 1 FROM courier_endpoint_limits WHERE endpoint = :endpoint)) AS busy;

-- name: endpoint_probe_take
-- As in SQLite: the endpoint is half open, its probe held for the lease,
-- when it has room for the probe; without room it is (or stays) open, its
-- cool-down over, and a later claim tries again. Nothing is returned when
-- another claim took the probe first. PostgreSQL: LEAST is the scalar
-- least; floor takes the whole tokens.
WITH room AS MATERIALIZED (
    SELECT LEAST(
        CASE WHEN :cap::bigint > 0 THEN :cap::bigint - (SELECT COUNT(*) FROM courier_outbox AS f
                                        WHERE f.endpoint = :endpoint AND f.status = 'leased' AND f.lease_owner = :owner)
             ELSE 1000000 END,
        COALESCE((SELECT CASE WHEN l.max_in_flight > 0 THEN l.max_in_flight - (SELECT COUNT(*) FROM courier_outbox AS f
                                                                              WHERE f.endpoint = :endpoint AND f.status = 'leased')
                              ELSE 1000000 END
                  FROM courier_endpoint_limits AS l WHERE l.endpoint = :endpoint), 1000000),
        COALESCE((SELECT CASE WHEN l.rate > 0 THEN floor(LEAST(l.burst, CASE WHEN l.tokens_at - :now > 60000000 THEN l.burst ELSE l.tokens + GREATEST(0, :now - l.tokens_at) * l.rate / 1e6 END))::bigint
                              ELSE 1000000 END
                  FROM courier_endpoint_limits AS l WHERE l.endpoint = :endpoint), 1000000)) AS room
)
UPDATE courier_endpoints AS e SET
    state = CASE WHEN m.room > 0 THEN 'half_open' ELSE 'open' END,
    open_until = CASE WHEN m.room > 0 THEN :probe_until ELSE e.open_until END,
    updated_at = CASE WHEN m.room > 0 OR e.state = 'half_open' THEN :now ELSE e.updated_at END
FROM room AS m
WHERE e.endpoint = :endpoint AND e.state IN ('open', 'half_open') AND e.open_until <= :now
RETURNING e.state;

-- name: endpoint_probe_idle
-- A probed endpoint had nothing due: it stays open, probed again once a
-- delivery of its own is parked (see endpoint_probes).
UPDATE courier_endpoints SET state = 'open', open_until = :now, updated_at = :now
WHERE endpoint = :endpoint AND state = 'half_open';

-- name: endpoint_probe_again
-- As in SQLite: a half-open endpoint's probe was settled without an
-- answer (never sent, or cut short): the next claim probes again.
UPDATE courier_endpoints SET open_until = :now, updated_at = :now
WHERE endpoint = :endpoint AND state = 'half_open' AND open_until = :probe_until AND open_until > :now;

-- name: endpoint_probe_released
-- As in SQLite: of the leases outbox_release is about to give back
-- (:batch, {id, token}), those that are a half-open endpoint's probe are
-- probed again at the next claim.
-- PostgreSQL: the rows are locked first, in endpoint order (byte order,
-- COLLATE "C"), under their breakers' locks (endpoint_lock), which the
-- release took before, in the order a settle and a claim take them: no
-- other transaction writes one of these rows meanwhile.
WITH probed AS MATERIALIZED (
    SELECT e.endpoint FROM courier_endpoints AS e
    WHERE e.state = 'half_open' AND e.open_until > :now
        AND EXISTS (SELECT 1 FROM jsonb_to_recordset(:batch::jsonb) AS v(id bigint, token text)
                    JOIN courier_outbox AS o ON o.id = v.id
                    WHERE o.endpoint = e.endpoint AND o.status = 'leased' AND o.lease_token = v.token
                        AND o.lease_expires_at = e.open_until)
    ORDER BY e.endpoint COLLATE "C"
    FOR UPDATE
)
UPDATE courier_endpoints AS e SET open_until = :now, updated_at = :now
FROM probed WHERE e.endpoint = probed.endpoint;

-- name: endpoint_ref_known
-- Endpoints named in the small tables, where an operator's endpoint
-- reference is looked up first (Endpoints.Resolve).
SELECT endpoint FROM courier_endpoints
UNION SELECT endpoint FROM courier_endpoint_limits
UNION SELECT endpoint FROM courier_subscriptions
UNION SELECT endpoint FROM courier_contracts;

-- name: endpoint_ref_deliveries
-- Every endpoint with deliveries, for a reference the small tables do not
-- know: a scan of the outbox, run only for an operator's action.
SELECT DISTINCT endpoint FROM courier_outbox;

-- fragment: endpoint_prunable
-- A breaker record endpoint_prune deletes, and endpoint_prune_count
-- counts, by its state and age (see endpoint_prune).
updated_at < :before
    AND (state IN ('closed', 'open')
        OR state = 'disabled' AND (reason = 'endpoint_gone' OR updated_at - failing_since >= :disable_after))

-- fragment: endpoint_idle
-- An endpoint with no unfinished delivery, read once from the status
-- index.
endpoint NOT IN (SELECT endpoint FROM courier_outbox WHERE status IN ('pending', 'retry_wait', 'leased'))

-- name: endpoint_prune
-- Breaker records past their age of endpoints with no unfinished delivery
-- (the unfinished rows are read once, from the status index), bounded:
-- closed or open ones, and disabled ones the breaker disabled, a 410
-- Gone's (endpoint_gone) or one failing for :disable_after when it was
-- disabled (at updated_at: a disabled record is not written again until
-- Enable). An operator's Disable of an endpoint failing for less, or not
-- at all, stays until Enable: it holds back deliveries to come. A
-- half-open one has a probe in flight or due. The state and age are
-- tested again on the row deleted: a row another transaction wrote
-- meanwhile (a Disable, a failure) is tested as it now is, not as the
-- subquery found it.
DELETE FROM courier_endpoints WHERE endpoint IN (
    SELECT endpoint FROM courier_endpoints
    WHERE {{endpoint_prunable}}
        AND {{endpoint_idle}}
    LIMIT :limit
) AND {{endpoint_prunable}};

-- name: endpoint_prune_count
-- How many rows endpoint_prune would delete, in every batch: a dry run's.
SELECT COUNT(*) FROM courier_endpoints WHERE {{endpoint_prunable}} AND {{endpoint_idle}};

-- name: endpoint_spelled
-- Whether a breaker record, limits or an unfinished delivery is stored
-- under exactly :endpoint, a spelling other than its normalized form that
-- an operator named (a database written before endpoints were normalized
-- may hold one). courier_outbox_endpoint (migration 15) leads with the
-- endpoint: the deliveries stored under the spelling can be read from it
-- until an unfinished one, none for a spelling nothing is stored under;
-- the planner weighs it against the unfinished deliveries of every
-- endpoint (courier_outbox_listed). It runs only for an operator's action.
SELECT EXISTS (SELECT 1 FROM courier_endpoints WHERE endpoint = :endpoint)
    OR EXISTS (SELECT 1 FROM courier_endpoint_limits WHERE endpoint = :endpoint)
    OR EXISTS (SELECT 1 FROM courier_outbox WHERE endpoint = :endpoint AND status IN ('pending', 'retry_wait', 'leased'));

-- name: endpoint_spelled_enqueue
-- Whether a delivery enqueued to :endpoint, a spelling other than its
-- normalized form, is stored under it (see storedAs): a database written
-- before endpoints were normalized holds, under exactly :endpoint, this
-- delivery (:notification_id), its ordering key's row, a breaker record
-- or limits. Each is a lookup by a key that leads with the endpoint or
-- the notification id.
SELECT EXISTS (SELECT 1 FROM courier_outbox WHERE notification_id = :notification_id AND endpoint = :endpoint)
    OR EXISTS (SELECT 1 FROM courier_ordering_keys WHERE endpoint = :endpoint AND ordering_key = :ordering_key)
    OR EXISTS (SELECT 1 FROM courier_endpoints WHERE endpoint = :endpoint)
    OR EXISTS (SELECT 1 FROM courier_endpoint_limits WHERE endpoint = :endpoint);

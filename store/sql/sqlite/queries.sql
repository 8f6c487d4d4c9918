-- courier's queries for SQLite. postgres/queries.sql has the same names;
-- where the SQL differs, both files say why. Parameters are :name; the
-- store binds them by name.

-- name: schema_version
SELECT COALESCE(MAX(version), 0) FROM courier_schema;

-- name: schema_create
-- The version table itself; every migration records its number here.
CREATE TABLE IF NOT EXISTS courier_schema (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
);

-- name: schema_record
INSERT INTO courier_schema (version, applied_at) VALUES (:version, :now);

-- name: schema_columns
-- SQLite: pragma_table_info in place of information_schema.
SELECT m.name AS table_name, p.name AS column_name
FROM sqlite_master AS m, pragma_table_info(m.name) AS p
WHERE m.type = 'table' AND m.name LIKE 'courier\_%' ESCAPE '\'
ORDER BY m.name, p.cid;

-- name: enqueue
-- The notification's identity is (notification_id, endpoint): a second
-- enqueue of it inserts nothing; the store then reads the existing row and
-- compares. SQLite: no RETURNING; the store takes the id from
-- last_insert_rowid, which costs a third of a RETURNING row here.
INSERT INTO courier_outbox (
    notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at
) VALUES (
    :notification_id, :endpoint, :payload, :payload_key_id, :payload_sha256, :profile, :key_id, :subscription_id, :subscription_fingerprint, 'pending',
    :priority, 0, :max_attempts, :next_attempt_at, :deadline, :now, :now
)
ON CONFLICT (notification_id, endpoint) DO NOTHING;

-- name: enqueue_existing
SELECT id, payload_sha256, profile, key_id, max_attempts, priority
FROM courier_outbox WHERE notification_id = :notification_id AND endpoint = :endpoint;

-- name: log_expired_leases
-- Before a lease is reclaimed, the attempt it stood for is logged.
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, error_code)
SELECT id, attempts, lease_owner, leased_at, lease_expires_at, :now, lease_expires_at - leased_at, 'lease_expired', 'lease_expired'
FROM courier_outbox
WHERE status = 'leased' AND lease_expires_at <= :now;

-- name: reclaim_expired_leases
UPDATE courier_outbox SET
    status = CASE WHEN attempts >= max_attempts OR :now >= deadline THEN 'failed' ELSE 'retry_wait' END,
    next_attempt_at = :now,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = CASE WHEN attempts < max_attempts AND :now >= deadline THEN 'expired' ELSE 'lease_expired' END,
    updated_at = :now
WHERE status = 'leased' AND lease_expires_at <= :now;

-- name: claim
-- Claims within one priority (see due_priorities): the due index is then
-- read as a range, (priority = p, next_attempt_at <= now), so rows waiting
-- for a later time are never walked.
-- One statement claims the batch. SQLite: writers are serialized (BEGIN
-- IMMEDIATE), so the subquery's rows cannot be taken by anyone else before
-- the UPDATE; PostgreSQL needs FOR UPDATE SKIP LOCKED for that. The token is
-- random per row: randomblob is evaluated once per updated row.
UPDATE courier_outbox SET
    status = 'leased',
    attempts = attempts + 1,
    lease_owner = :owner,
    lease_token = lower(hex(randomblob(16))),
    leased_at = :now,
    lease_expires_at = :lease_expires_at,
    updated_at = :now
WHERE id IN (
    SELECT id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND priority = :priority AND next_attempt_at <= :now
        -- Endpoints paused by their breaker or disabled are skipped; their
        -- probes are claimed by claim_probe.
        AND NOT EXISTS (SELECT 1 FROM courier_endpoints AS e
                        WHERE e.endpoint = courier_outbox.endpoint AND e.state <> 'closed')
        -- Contract pinning (migration 4): an endpoint with an unfinished
        -- delivery enqueued under another digest than its pinned one is
        -- held back whole, until an operator acts (contract_changed).
        AND NOT EXISTS (SELECT 1 FROM courier_contracts AS k
                        JOIN courier_outbox AS m ON m.endpoint = k.endpoint
                        WHERE k.endpoint = courier_outbox.endpoint
                            AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
                            AND (m.contract_sha256 < k.capabilities_sha256 OR m.contract_sha256 > k.capabilities_sha256))
    ORDER BY next_attempt_at, created_at, id
    LIMIT :limit
)
RETURNING id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint;

-- name: claim_probe
-- One due delivery of an endpoint whose cool-down ended: its probe.
-- One statement claims the batch. SQLite: writers are serialized (BEGIN
-- IMMEDIATE), so the subquery's rows cannot be taken by anyone else before
-- the UPDATE; PostgreSQL needs FOR UPDATE SKIP LOCKED for that. The token is
-- random per row: randomblob is evaluated once per updated row.
UPDATE courier_outbox SET
    status = 'leased',
    attempts = attempts + 1,
    lease_owner = :owner,
    lease_token = lower(hex(randomblob(16))),
    leased_at = :now,
    lease_expires_at = :lease_expires_at,
    updated_at = :now
WHERE id IN (
    SELECT id FROM courier_outbox
    WHERE status IN ('pending', 'retry_wait') AND next_attempt_at <= :now
        AND endpoint = :endpoint
        -- Contract pinning (migration 4): an endpoint with an unfinished
        -- delivery enqueued under another digest than its pinned one is
        -- held back whole, until an operator acts (contract_changed).
        AND NOT EXISTS (SELECT 1 FROM courier_contracts AS k
                        JOIN courier_outbox AS m ON m.endpoint = k.endpoint
                        WHERE k.endpoint = courier_outbox.endpoint
                            AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
                            AND (m.contract_sha256 < k.capabilities_sha256 OR m.contract_sha256 > k.capabilities_sha256))
    ORDER BY priority, next_attempt_at, created_at, id
    LIMIT 1
)
RETURNING id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint;

-- name: quarantine
-- A claimed row whose payload no longer matches its digest, or cannot be
-- decrypted.
UPDATE courier_outbox SET
    status = 'quarantined',
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = :code, updated_at = :now
WHERE id = :id AND status = 'leased' AND lease_token = :token;

-- name: release
-- Gives back leases whose attempt was never made (a worker stopping with
-- deliveries it claimed ahead): the claim's attempt is not counted, and
-- the row is due again as it was. :batch is a JSON array of {id, token};
-- each is fenced by its token like a settle.
UPDATE courier_outbox SET
    status = CASE WHEN last_error_code IS NULL THEN 'pending' ELSE 'retry_wait' END,
    attempts = attempts - 1,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    updated_at = :now
FROM (SELECT value ->> 'id' AS id, value ->> 'token' AS token FROM json_each(:batch)) AS v
WHERE courier_outbox.id = v.id AND courier_outbox.status = 'leased' AND courier_outbox.lease_token = v.token;

-- name: settle
-- Settles a batch of outcomes in one statement. :batch is a JSON array of
-- {id, token, result, code, next_at, http, ack}, one per delivery. Every
-- outcome is fenced: it applies only while the caller's lease is the row's
-- lease and has not expired; the caller reads the rows returned to know
-- which did. The status is decided here, against the row's own budget and
-- deadline: a retry past either ends the delivery.
-- SQLite: RETURNING may not name the FROM table, so the row's id says which
-- outcome it was.
UPDATE courier_outbox SET
    status = CASE
        WHEN v.result <> 'retry' THEN v.result
        WHEN attempts >= max_attempts OR v.next_at > deadline THEN 'failed'
        ELSE 'retry_wait' END,
    last_error_code = CASE
        WHEN v.result = 'retry' AND attempts < max_attempts AND v.next_at > deadline THEN 'expired'
        ELSE v.code END,
    next_attempt_at = CASE WHEN v.result = 'retry' THEN v.next_at ELSE next_attempt_at END,
    last_status = v.http,
    ack_sha256 = v.ack,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    updated_at = :now
FROM (SELECT value ->> 'id' AS id, value ->> 'token' AS token, value ->> 'result' AS result,
             value ->> 'code' AS code, value ->> 'next_at' AS next_at, value ->> 'http' AS http,
             value ->> 'ack' AS ack
      FROM json_each(:batch)) AS v
WHERE courier_outbox.id = v.id AND courier_outbox.status = 'leased'
    AND courier_outbox.lease_token = v.token AND courier_outbox.lease_expires_at > :now
-- Whether the endpoint has a breaker row: most have none (healthy), and
-- then the settle needs no read of courier_endpoints.
RETURNING id, status, last_error_code, endpoint,
    EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = courier_outbox.endpoint);

-- name: log_attempts
-- Appends a batch of attempts: :batch is a JSON array of rows.
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, http_status, error_code)
SELECT value ->> 'delivery_id', value ->> 'attempt', value ->> 'owner', value ->> 'leased_at',
    value ->> 'lease_expires_at', :now, value ->> 'duration_us', value ->> 'outcome',
    value ->> 'http_status', value ->> 'error_code'
FROM json_each(:batch);

-- name: get_delivery
SELECT id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, lease_owner, leased_at,
    lease_expires_at, last_error_code, last_status, ack_sha256, created_at, updated_at
FROM courier_outbox WHERE id = :id;

-- name: list_attempts
SELECT id, delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us,
    outcome, http_status, error_code
FROM courier_attempts WHERE delivery_id = :delivery_id ORDER BY id;

-- name: health_counts
SELECT status, COUNT(*) FROM courier_outbox GROUP BY status;

-- name: health_due
-- Reads the due index: the partial index's condition is repeated verbatim.
SELECT COUNT(*), COALESCE(MIN(next_attempt_at), 0) FROM courier_outbox
WHERE status IN ('pending', 'retry_wait') AND next_attempt_at <= :now;

-- name: health_expired
SELECT COUNT(*) FROM courier_outbox WHERE status = 'leased' AND lease_expires_at <= :now;

-- name: inbox_insert
-- :status is 'processing' (Record, Claim) or 'completed' with its :ack
-- (RecordCompleted).
INSERT INTO courier_inbox (sender, dedupe_key, payload_sha256, status, ack, created_at, updated_at)
VALUES (:sender, :dedupe_key, :payload_sha256, :status, :ack, :now, :now)
ON CONFLICT (sender, dedupe_key) DO NOTHING;

-- name: inbox_get
SELECT payload_sha256, status, ack, created_at, updated_at
FROM courier_inbox WHERE sender = :sender AND dedupe_key = :dedupe_key;

-- name: inbox_complete
UPDATE courier_inbox SET status = 'completed', ack = :ack, updated_at = :now
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing';

-- name: inbox_release
-- Two-phase receivers whose handler failed give the key back.
DELETE FROM courier_inbox WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing';

-- name: inbox_prune
-- Bounded: at most :limit rows per statement, oldest first.
DELETE FROM courier_inbox WHERE rowid IN (
    SELECT rowid FROM courier_inbox WHERE updated_at < :before AND status = 'completed' ORDER BY updated_at LIMIT :limit
);

-- name: replay_remember
-- A pair still unexpired is a replay; an expired one is taken over.
INSERT INTO courier_replay (key_id, nonce, expires_at) VALUES (:key_id, :nonce, :expires_at)
ON CONFLICT (key_id, nonce) DO UPDATE SET expires_at = excluded.expires_at
WHERE courier_replay.expires_at <= :now
RETURNING key_id;

-- name: replay_prune
DELETE FROM courier_replay WHERE rowid IN (
    SELECT rowid FROM courier_replay WHERE expires_at <= :now ORDER BY expires_at LIMIT :limit
);

-- name: inbox_take_over
-- A two-phase record left processing longer than the staleness window (its
-- receiver died between the phases) is taken over; its updated_at is the
-- claim's fencing token.
UPDATE courier_inbox SET updated_at = :now
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing'
    AND payload_sha256 = :payload_sha256 AND updated_at <= :stale_before
RETURNING updated_at;

-- name: inbox_complete_claimed
-- Fenced: only the claim whose token is still the record's completes it.
UPDATE courier_inbox SET status = 'completed', ack = :ack, updated_at = :now
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing' AND updated_at = :token;

-- name: inbox_release_claimed
DELETE FROM courier_inbox
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing' AND updated_at = :token;

-- name: subscription_insert
INSERT INTO courier_subscriptions (tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at)
VALUES (:tenant, :endpoint, :event_types, :auth_mode, :key_id, :profile, :fingerprint, :active, :now, :now)
RETURNING id;

-- name: subscription_update
UPDATE courier_subscriptions SET endpoint = :endpoint, event_types = :event_types, auth_mode = :auth_mode,
    key_id = :key_id, profile = :profile, fingerprint = :fingerprint, active = :active, updated_at = :now
WHERE id = :id;

-- name: subscription_get
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE id = :id;

-- name: subscription_list
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE tenant = :tenant ORDER BY id;

-- name: subscription_matching
-- SQLite stores booleans as 0/1; the event-type filter is applied in Go.
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE tenant = :tenant AND active = 1 ORDER BY id;

-- name: subscription_state
SELECT fingerprint, active FROM courier_subscriptions WHERE id = :id;

-- name: suppress
-- A claimed delivery whose subscription changed or was disabled.
UPDATE courier_outbox SET
    status = 'suppressed',
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = :code, updated_at = :now
WHERE id = :id AND status = 'leased' AND lease_token = :token;

-- name: endpoint_get
SELECT endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at
FROM courier_endpoints WHERE endpoint = :endpoint;

-- name: endpoint_list
SELECT endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at
FROM courier_endpoints ORDER BY endpoint;

-- name: endpoint_put
INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at)
VALUES (:endpoint, :state, :consecutive_failures, :failing_since, :open_until, :reason, :now)
ON CONFLICT (endpoint) DO UPDATE SET state = excluded.state, consecutive_failures = excluded.consecutive_failures,
    failing_since = excluded.failing_since, open_until = excluded.open_until, reason = excluded.reason,
    updated_at = excluded.updated_at;

-- name: endpoint_delete
DELETE FROM courier_endpoints WHERE endpoint = :endpoint;

-- name: endpoint_probes
-- Endpoints whose cool-down (or whose probe's lease) ended: each gets one
-- probe, held for the lease.
UPDATE courier_endpoints SET state = 'half_open', open_until = :probe_until, updated_at = :now
WHERE state IN ('open', 'half_open') AND open_until <= :now
RETURNING endpoint;

-- name: endpoint_probe_idle
-- A probed endpoint had nothing due: it stays open, probed again at the next claim.
UPDATE courier_endpoints SET state = 'open', open_until = :now, updated_at = :now
WHERE endpoint = :endpoint AND state = 'half_open';

-- name: redrive
-- Failed deliveries go back to pending with a fresh budget and horizon;
-- attempt numbers keep counting.
UPDATE courier_outbox SET status = 'pending', next_attempt_at = :now, deadline = :deadline,
    max_attempts = CASE WHEN attempts + :budget > 1000 THEN 1000 ELSE attempts + :budget END,
    last_error_code = NULL, last_status = NULL, updated_at = :now
WHERE status = 'failed' AND (:endpoint = '' OR endpoint = :endpoint) AND (:id = 0 OR id = :id);

-- name: list_deliveries
-- Keyset pagination on id, newest first; empty filters match everything.
SELECT id, notification_id, endpoint, profile, key_id, status, priority, attempts, max_attempts,
    next_attempt_at, deadline, last_error_code, last_status, created_at, updated_at
FROM courier_outbox
WHERE (:status = '' OR status = :status) AND (:endpoint = '' OR endpoint = :endpoint)
    AND updated_at >= :since AND updated_at < :until AND (:before_id = 0 OR id < :before_id)
ORDER BY id DESC
LIMIT :limit;

-- name: cancel
-- An operator withdraws a delivery that has not been sent successfully.
UPDATE courier_outbox SET status = 'suppressed', last_error_code = 'cancelled', updated_at = :now
WHERE id = :id AND status IN ('pending', 'retry_wait');

-- name: outbox_prune
-- Finished deliveries past their age, oldest first, bounded.
DELETE FROM courier_outbox WHERE id IN (
    SELECT id FROM courier_outbox
    WHERE status IN ('succeeded', 'suppressed') AND updated_at < :before
    ORDER BY updated_at LIMIT :limit
);

-- name: attempts_prune
DELETE FROM courier_attempts WHERE id IN (
    SELECT id FROM courier_attempts WHERE finished_at < :before ORDER BY finished_at LIMIT :limit
);

-- name: enqueue_command
-- enqueue for the source-delivery profile: the row also records the
-- capabilities digest it was enqueued under (contract_sha256).
INSERT INTO courier_outbox (
    notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, contract_sha256, status,
    priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at
) VALUES (
    :notification_id, :endpoint, :payload, :payload_key_id, :payload_sha256, :profile, :key_id, :contract_sha256, 'pending',
    :priority, 0, :max_attempts, :next_attempt_at, :deadline, :now, :now
)
ON CONFLICT (notification_id, endpoint) DO NOTHING
RETURNING id;

-- name: contract_get
SELECT capabilities_sha256, pinned_at FROM courier_contracts WHERE endpoint = :endpoint;

-- name: contract_pin
INSERT INTO courier_contracts (endpoint, capabilities_sha256, pinned_at) VALUES (:endpoint, :capabilities_sha256, :now)
ON CONFLICT (endpoint) DO UPDATE SET capabilities_sha256 = excluded.capabilities_sha256, pinned_at = excluded.pinned_at;

-- name: contract_pin_absent
-- The first command enqueued for an endpoint pins its digest.
INSERT INTO courier_contracts (endpoint, capabilities_sha256, pinned_at) VALUES (:endpoint, :capabilities_sha256, :now)
ON CONFLICT (endpoint) DO NOTHING;

-- name: contract_fail_mismatched
-- The operator gives up the waiting deliveries enqueued under another digest
-- than the endpoint's pin; leased ones are in flight and settle as usual.
UPDATE courier_outbox SET status = 'failed', last_error_code = 'contract_changed', updated_at = :now
WHERE endpoint = :endpoint AND contract_sha256 IS NOT NULL AND status IN ('pending', 'retry_wait')
    AND contract_sha256 <> (SELECT k.capabilities_sha256 FROM courier_contracts AS k WHERE k.endpoint = :endpoint);

-- name: contract_mismatched
-- Unfinished deliveries enqueued under another digest than their endpoint's
-- pin: each holds its endpoint back (health: contract_changed).
SELECT COUNT(*) FROM courier_outbox AS m JOIN courier_contracts AS k ON k.endpoint = m.endpoint
WHERE m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
    AND m.contract_sha256 <> k.capabilities_sha256;

-- name: due_priorities
-- The priorities that have waiting rows, lowest first, read from the due
-- index by a loose index scan: one O(log n) step per distinct priority.
WITH RECURSIVE p(v) AS (
    SELECT MIN(priority) FROM courier_outbox WHERE status IN ('pending', 'retry_wait')
    UNION ALL
    SELECT (SELECT MIN(priority) FROM courier_outbox WHERE status IN ('pending', 'retry_wait') AND priority > p.v)
    FROM p WHERE p.v IS NOT NULL
)
SELECT v FROM p WHERE v IS NOT NULL;

-- name: endpoint_ref_known
-- Endpoints named in the small tables, where an operator's endpoint
-- reference is looked up first (Endpoints.Resolve).
SELECT endpoint FROM courier_endpoints
UNION SELECT endpoint FROM courier_subscriptions
UNION SELECT endpoint FROM courier_contracts;

-- name: endpoint_ref_deliveries
-- Every endpoint with deliveries, for a reference the small tables do not
-- know: a scan of the outbox, run only for an operator's action.
SELECT DISTINCT endpoint FROM courier_outbox;

-- courier's queries for PostgreSQL. sqlite/queries.sql has the same names;
-- where the SQL differs, both files say why. Parameters are :name; the
-- store binds them as $1, $2, ... in order of appearance.

-- name: schema_version
SELECT COALESCE(MAX(version), 0) FROM courier_schema;

-- name: schema_create
CREATE TABLE IF NOT EXISTS courier_schema (
    version    INTEGER PRIMARY KEY,
    applied_at BIGINT NOT NULL
);

-- name: schema_record
INSERT INTO courier_schema (version, applied_at) VALUES (:version, :now);

-- name: schema_columns
-- PostgreSQL: information_schema in place of pragma_table_info.
SELECT table_name::text, column_name::text
FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name LIKE 'courier\_%'
ORDER BY table_name, ordinal_position;

-- name: enqueue
-- As in SQLite, plus pg_notify: it is queued with the transaction and
-- delivered to listening workers only when the caller commits. Identical
-- notifications in one transaction are folded into one.
WITH inserted AS (
    INSERT INTO courier_outbox (
        notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, subscription_id, subscription_fingerprint, status,
        priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at
    ) VALUES (
        :notification_id, :endpoint, :payload, :payload_key_id, :payload_sha256, :profile, :key_id, :subscription_id, :subscription_fingerprint, 'pending',
        :priority, 0, :max_attempts, :next_attempt_at, :deadline, :now, :now
    )
    ON CONFLICT (notification_id, endpoint) DO NOTHING
    RETURNING id
)
SELECT id FROM inserted, pg_notify('courier_outbox', '');

-- name: enqueue_existing
SELECT id, payload_sha256, profile, key_id, max_attempts, priority
FROM courier_outbox WHERE notification_id = :notification_id AND endpoint = :endpoint;

-- name: log_expired_leases
-- PostgreSQL: FOR UPDATE SKIP LOCKED so that two claimers do not both log
-- and reclaim the same expired lease; the reclaim below takes the same rows
-- (the locks are held to the end of the transaction).
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, error_code)
SELECT id, attempts, lease_owner, leased_at, lease_expires_at, :now, lease_expires_at - leased_at, 'lease_expired', 'lease_expired'
FROM (
    SELECT * FROM courier_outbox
    WHERE status = 'leased' AND lease_expires_at <= :now
    FOR UPDATE SKIP LOCKED
) AS expired;

-- name: reclaim_expired_leases
-- PostgreSQL: only the rows the statement above logged. A row it skipped
-- (locked by another transaction then) may be free by now; it waits for the
-- next claim rather than being reclaimed without its attempt logged.
UPDATE courier_outbox SET
    status = CASE WHEN attempts >= max_attempts OR :now >= deadline THEN 'failed' ELSE 'retry_wait' END,
    next_attempt_at = :now,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    last_error_code = CASE WHEN attempts < max_attempts AND :now >= deadline THEN 'expired' ELSE 'lease_expired' END,
    updated_at = :now
WHERE id IN (
    SELECT id FROM courier_outbox
    WHERE status = 'leased' AND lease_expires_at <= :now
    FOR UPDATE SKIP LOCKED
) AND EXISTS (
    SELECT 1 FROM courier_attempts AS a
    WHERE a.delivery_id = courier_outbox.id AND a.attempt = courier_outbox.attempts
        AND a.outcome = 'lease_expired' AND a.finished_at = :now
);

-- name: claim
-- Claims within one priority (see due_priorities): the due index is then
-- read as a range, (priority = p, next_attempt_at <= now), so rows waiting
-- for a later time are never walked.
-- PostgreSQL: FOR UPDATE SKIP LOCKED lets many workers claim at once, each
-- taking rows no other claimer holds; SQLite serializes writers instead.
-- gen_random_uuid is evaluated per row.
UPDATE courier_outbox SET
    status = 'leased',
    attempts = attempts + 1,
    lease_owner = :owner,
    lease_token = replace(gen_random_uuid()::text, '-', ''),
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
    FOR UPDATE SKIP LOCKED
)
RETURNING id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint;

-- name: claim_probe
-- One due delivery of an endpoint whose cool-down ended: its probe.
-- PostgreSQL: FOR UPDATE SKIP LOCKED lets many workers claim at once, each
-- taking rows no other claimer holds; SQLite serializes writers instead.
-- gen_random_uuid is evaluated per row.
UPDATE courier_outbox SET
    status = 'leased',
    attempts = attempts + 1,
    lease_owner = :owner,
    lease_token = replace(gen_random_uuid()::text, '-', ''),
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
    FOR UPDATE SKIP LOCKED
)
RETURNING id, notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id,
    priority, attempts, max_attempts, deadline, lease_owner, lease_token, leased_at,
    lease_expires_at, created_at, subscription_id, subscription_fingerprint;

-- name: quarantine
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
UPDATE courier_outbox AS o SET
    status = CASE WHEN o.last_error_code IS NULL THEN 'pending' ELSE 'retry_wait' END,
    attempts = o.attempts - 1,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    updated_at = :now
FROM jsonb_to_recordset(:batch::jsonb) AS v(id bigint, token text)
WHERE o.id = v.id AND o.status = 'leased' AND o.lease_token = v.token;

-- name: settle
-- Settles a batch of outcomes in one statement. :batch is a JSON array of
-- {id, token, result, code, next_at, http, ack}, one per delivery. Every
-- outcome is fenced: it applies only while the caller's lease is the row's
-- lease and has not expired; the caller reads the rows returned to know
-- which did. The status is decided here, against the row's own budget and
-- deadline: a retry past either ends the delivery.
UPDATE courier_outbox AS o SET
    status = CASE
        WHEN v.result <> 'retry' THEN v.result
        WHEN o.attempts >= o.max_attempts OR v.next_at > o.deadline THEN 'failed'
        ELSE 'retry_wait' END,
    last_error_code = CASE
        WHEN v.result = 'retry' AND o.attempts < o.max_attempts AND v.next_at > o.deadline THEN 'expired'
        ELSE v.code END,
    next_attempt_at = CASE WHEN v.result = 'retry' THEN v.next_at ELSE o.next_attempt_at END,
    last_status = v.http,
    ack_sha256 = v.ack,
    lease_owner = NULL, lease_token = NULL, leased_at = NULL, lease_expires_at = NULL,
    updated_at = :now
FROM jsonb_to_recordset(:batch::jsonb)
    AS v(id bigint, token text, result text, code text, next_at bigint, http integer, ack text)
WHERE o.id = v.id AND o.status = 'leased' AND o.lease_token = v.token AND o.lease_expires_at > :now
-- Whether the endpoint has a breaker row: most have none (healthy), and
-- then the settle needs no read of courier_endpoints.
RETURNING o.id, o.status, o.last_error_code, o.endpoint,
    EXISTS (SELECT 1 FROM courier_endpoints AS e WHERE e.endpoint = o.endpoint);

-- name: log_attempts
-- Appends a batch of attempts: :batch is a JSON array of rows.
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, http_status, error_code)
SELECT v.delivery_id, v.attempt, v.owner, v.leased_at, v.lease_expires_at, :now, v.duration_us, v.outcome, v.http_status, v.error_code
FROM jsonb_to_recordset(:batch::jsonb) AS v(delivery_id bigint, attempt integer, owner text, leased_at bigint,
    lease_expires_at bigint, duration_us bigint, outcome text, http_status integer, error_code text);

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
SELECT COUNT(*), COALESCE(MIN(next_attempt_at), 0) FROM courier_outbox
WHERE status IN ('pending', 'retry_wait') AND next_attempt_at <= :now;

-- name: health_expired
SELECT COUNT(*) FROM courier_outbox WHERE status = 'leased' AND lease_expires_at <= :now;

-- name: inbox_insert
-- A concurrent insert of the same key waits for the first transaction and
-- then inserts nothing (READ COMMITTED); the store then reads the row.
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
DELETE FROM courier_inbox WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing';

-- name: inbox_prune
-- PostgreSQL: ctid in place of rowid; SKIP LOCKED so instances pruning at
-- once take different rows.
DELETE FROM courier_inbox WHERE ctid IN (
    SELECT ctid FROM courier_inbox WHERE updated_at < :before AND status = 'completed'
    ORDER BY updated_at LIMIT :limit FOR UPDATE SKIP LOCKED
);

-- name: replay_remember
INSERT INTO courier_replay (key_id, nonce, expires_at) VALUES (:key_id, :nonce, :expires_at)
ON CONFLICT (key_id, nonce) DO UPDATE SET expires_at = excluded.expires_at
WHERE courier_replay.expires_at <= :now
RETURNING key_id;

-- name: replay_prune
DELETE FROM courier_replay WHERE ctid IN (
    SELECT ctid FROM courier_replay WHERE expires_at <= :now
    ORDER BY expires_at LIMIT :limit FOR UPDATE SKIP LOCKED
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
-- PostgreSQL: a real BOOLEAN; the event-type filter is applied in Go.
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE tenant = :tenant AND active = TRUE ORDER BY id;

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
    ORDER BY updated_at LIMIT :limit FOR UPDATE SKIP LOCKED -- many instances prune at once
);

-- name: attempts_prune
DELETE FROM courier_attempts WHERE id IN (
    SELECT id FROM courier_attempts WHERE finished_at < :before ORDER BY finished_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
);

-- name: enqueue_command
-- enqueue for the source-delivery profile: the row also records the
-- capabilities digest it was enqueued under (contract_sha256). As enqueue,
-- pg_notify wakes listening workers when the caller commits.
WITH inserted AS (
    INSERT INTO courier_outbox (
        notification_id, endpoint, payload, payload_key_id, payload_sha256, profile, key_id, contract_sha256, status,
        priority, attempts, max_attempts, next_attempt_at, deadline, created_at, updated_at
    ) VALUES (
        :notification_id, :endpoint, :payload, :payload_key_id, :payload_sha256, :profile, :key_id, :contract_sha256, 'pending',
        :priority, 0, :max_attempts, :next_attempt_at, :deadline, :now, :now
    )
    ON CONFLICT (notification_id, endpoint) DO NOTHING
    RETURNING id
)
SELECT id FROM inserted, pg_notify('courier_outbox', '');

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

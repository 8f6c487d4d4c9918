-- courier's queries for SQLite: the attempts log: one row per attempt, no content.
-- store/postgres/sql/queries/attempts.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: attempts_log_expired_leases
-- Before a lease is reclaimed, the attempt it stood for is logged: up to
-- :limit of the expired leases, the first to expire first; the claims
-- after it take the rest. It returns the deliveries it logged, which the
-- reclaim takes back (outbox_reclaim_expired_leases).
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, error_code)
SELECT id, attempts, lease_owner, leased_at, lease_expires_at, :now, lease_expires_at - leased_at, 'lease_expired', 'lease_expired'
-- SQLite: INDEXED BY, so a claim reads only the expired leases, not every
-- lease (by courier_outbox_status, the planner's pick without statistics),
-- in the index's order (lease_expires_at, then the rowid, id), which the
-- ORDER BY asks for: the walk ends at the LIMIT.
FROM courier_outbox INDEXED BY courier_outbox_leases
WHERE status = 'leased' AND lease_expires_at <= :now
ORDER BY lease_expires_at, id
LIMIT :limit
RETURNING delivery_id;

-- name: attempts_log
-- Appends a batch of attempts: :batch is a JSON array of rows.
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, http_status, error_code, remote_code)
SELECT value ->> 'delivery_id', value ->> 'attempt', value ->> 'owner', value ->> 'leased_at',
    value ->> 'lease_expires_at', :now, value ->> 'duration_us', value ->> 'outcome',
    value ->> 'http_status', value ->> 'error_code', value ->> 'remote_code'
FROM json_each(:batch);

-- name: attempts_list
SELECT id, delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us,
    outcome, http_status, error_code, remote_code
FROM courier_attempts WHERE delivery_id = :delivery_id ORDER BY id;

-- fragment: attempts_prunable
-- The attempts past their age: what attempts_prune deletes and
-- attempts_prune_count counts.
finished_at < :before

-- name: attempts_prune
DELETE FROM courier_attempts WHERE id IN (
    SELECT id FROM courier_attempts WHERE {{attempts_prunable}} ORDER BY finished_at LIMIT :limit
);

-- name: attempts_prune_count
-- How many rows attempts_prune would delete, in every batch: a dry run's.
SELECT COUNT(*) FROM courier_attempts WHERE {{attempts_prunable}};

-- courier's queries for PostgreSQL: the attempts log: one row per attempt, no content.
-- store/sqlite/sql/queries/attempts.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: attempts_log_expired_leases
-- As in SQLite, up to :limit of the expired leases, the first to expire
-- first; it returns the deliveries it logged, which the reclaim takes
-- back (outbox_reclaim_expired_leases). PostgreSQL: FOR UPDATE SKIP
-- LOCKED so that two claimers do not both log and reclaim the same
-- expired lease (the locks are held to the end of the transaction, so
-- the rows it returns are still the leases it logged when the reclaim
-- takes them back). In the order of courier_outbox_leases alone
-- (lease_expires_at; ties in any order), which the index gives as it is
-- walked: so the walk ends at the LIMIT whatever the statistics say.
-- Ordered by (lease_expires_at, id) too, which the index gives only in
-- part, a plan made with statistics from before a fleet of workers
-- leased its rows read every expired lease and sorted them all.
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, error_code)
SELECT id, attempts, lease_owner, leased_at, lease_expires_at, :now, lease_expires_at - leased_at, 'lease_expired', 'lease_expired'
FROM (
    SELECT * FROM courier_outbox
    WHERE status = 'leased' AND lease_expires_at <= :now
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
) AS expired
RETURNING delivery_id;

-- name: attempts_log
-- Appends a batch of attempts: :batch is a JSON array of rows.
INSERT INTO courier_attempts (delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us, outcome, http_status, error_code, remote_code)
SELECT v.delivery_id, v.attempt, v.owner, v.leased_at, v.lease_expires_at, :now, v.duration_us, v.outcome, v.http_status, v.error_code, v.remote_code
FROM jsonb_to_recordset(:batch::jsonb) AS v(delivery_id bigint, attempt integer, owner text, leased_at bigint,
    lease_expires_at bigint, duration_us bigint, outcome text, http_status integer, error_code text, remote_code text);

-- name: attempts_list
SELECT id, delivery_id, attempt, owner, leased_at, lease_expires_at, finished_at, duration_us,
    outcome, http_status, error_code, remote_code
FROM courier_attempts WHERE delivery_id = :delivery_id ORDER BY id;

-- fragment: attempts_prunable
-- The attempts past their age: what attempts_prune deletes and
-- attempts_prune_count counts.
finished_at < :before

-- name: attempts_prune
-- The rows are picked once, in a MATERIALIZED CTE: as an IN subquery the
-- planner may rescan the LIMIT, deleting past it. The batch is deleted by
-- its ids as an array, read by the primary key: joined to the CTE, a
-- generic plan (plan_cache_mode), which takes a LIMIT it cannot see for a
-- tenth of the table, hashed the whole attempts log to delete a batch.
WITH picked AS MATERIALIZED (
    SELECT id FROM courier_attempts WHERE {{attempts_prunable}} ORDER BY finished_at LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
DELETE FROM courier_attempts WHERE id = ANY (ARRAY(SELECT id FROM picked));

-- name: attempts_prune_count
-- How many rows attempts_prune would delete, in every batch: a dry run's.
SELECT COUNT(*) FROM courier_attempts WHERE {{attempts_prunable}};

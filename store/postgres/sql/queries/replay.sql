-- courier's queries for PostgreSQL: the replay cache of signature (key id, nonce) pairs.
-- store/sqlite/sql/queries/replay.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: replay_remember
INSERT INTO courier_replay (key_id, nonce, expires_at) VALUES (:key_id, :nonce, :expires_at)
ON CONFLICT (key_id, nonce) DO UPDATE SET expires_at = excluded.expires_at
WHERE courier_replay.expires_at <= :now
RETURNING key_id;

-- name: replay_prune
-- The rows are picked once, in a MATERIALIZED CTE: as an IN subquery the
-- planner may rescan the LIMIT, deleting past it.
WITH picked AS MATERIALIZED (
    SELECT ctid AS row_ctid FROM courier_replay WHERE expires_at <= :now
    ORDER BY expires_at LIMIT :limit FOR UPDATE SKIP LOCKED
)
DELETE FROM courier_replay AS r USING picked WHERE r.ctid = picked.row_ctid;

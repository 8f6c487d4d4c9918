-- courier's queries for SQLite: the replay cache of signature (key id, nonce) pairs.
-- store/postgres/sql/queries/replay.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

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

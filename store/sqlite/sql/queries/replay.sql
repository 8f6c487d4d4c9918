-- courier's queries for SQLite: the replay cache of signature (key id, nonce) pairs.
-- store/postgres/sql/queries/replay.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: replay_remember
-- A pair still unexpired is a replay; an expired one is taken over. Either
-- is recorded only while the key holds fewer than :cap live pairs (those
-- counted to expire in :live_bucket's minute or later; a trigger counts
-- what this records), so a key at its cap records nothing:
-- replay_refused then tells a replay from a refusal.
-- SQLite: the parameters need no casts (PostgreSQL's do).
INSERT INTO courier_replay (key_id, nonce, expires_at)
SELECT :key_id, :nonce, :expires_at
WHERE (SELECT COALESCE(sum(n), 0) FROM courier_replay_counts WHERE key_id = :key_id AND bucket >= :live_bucket) < :cap
ON CONFLICT (key_id, nonce) DO UPDATE SET expires_at = excluded.expires_at
WHERE courier_replay.expires_at <= :now;

-- name: replay_refused
-- Why replay_remember recorded nothing: 1 if the pair is unexpired (a
-- replay), else 0 (the key is at its cap).
SELECT COUNT(*) FROM courier_replay WHERE key_id = :key_id AND nonce = :nonce AND expires_at > :now;

-- fragment: replay_prunable
-- The expired pairs: what replay_prune deletes and replay_prune_count
-- counts.
expires_at <= :now

-- fragment: replay_prunable_counts
-- The counts of minutes whose pairs have all expired: what
-- replay_prune_counts deletes and replay_prune_counts_count counts.
bucket < :live_bucket

-- name: replay_prune
DELETE FROM courier_replay WHERE rowid IN (
    SELECT rowid FROM courier_replay WHERE {{replay_prunable}} ORDER BY expires_at LIMIT :limit
);

-- name: replay_prune_counts
-- The counts of minutes whose pairs have all expired, oldest first,
-- bounded, read from courier_replay_counts_bucket.
DELETE FROM courier_replay_counts WHERE rowid IN (
    SELECT rowid FROM courier_replay_counts WHERE {{replay_prunable_counts}} ORDER BY bucket LIMIT :limit
);

-- name: replay_prune_count
-- How many rows replay_prune would delete, in every batch: a dry run's.
SELECT COUNT(*) FROM courier_replay WHERE {{replay_prunable}};

-- name: replay_prune_counts_count
-- How many rows replay_prune_counts would delete, in every batch: a dry
-- run's.
SELECT COUNT(*) FROM courier_replay_counts WHERE {{replay_prunable_counts}};

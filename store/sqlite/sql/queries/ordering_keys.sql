-- courier's queries for SQLite: ordering keys: one row per (endpoint, key) with an unfinished delivery.
-- store/postgres/sql/queries/ordering_keys.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: ordering_key_join
-- An enqueued delivery (:id, inserted waiting for its key) joins its key:
-- when the key has no row it becomes the key's head, and head_id says so;
-- otherwise head_id is the delivery ahead of it, and it waits. The upsert
-- takes the key's row lock: enqueues of one key, and the settle that
-- advances it, are serialized on it until they commit.
INSERT INTO courier_ordering_keys (endpoint, ordering_key, head_id, blocked_at, updated_at)
VALUES (:endpoint, :ordering_key, :id, NULL, :now)
ON CONFLICT (endpoint, ordering_key) DO UPDATE SET updated_at = excluded.updated_at
RETURNING head_id;

-- name: ordering_key_lock
-- The key's row, for the settle of a delivery that may head it.
-- SQLite: writers are serialized (BEGIN IMMEDIATE): reading the row is enough.
SELECT head_id FROM courier_ordering_keys
WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_lock_of
-- The row of delivery :id's ordering key, before a statement that changes
-- the delivery (see the PostgreSQL file).
-- SQLite: writers are serialized (BEGIN IMMEDIATE): reading the row is enough.
SELECT k.head_id FROM courier_ordering_keys AS k
JOIN courier_outbox AS o ON o.endpoint = k.endpoint AND o.ordering_key = k.ordering_key
WHERE o.id = :id;

-- name: ordering_key_try_lock
-- ordering_key_lock for the worker's transactions (see the PostgreSQL
-- file). SQLite: writers are serialized: the row is never held by another.
SELECT head_id FROM courier_ordering_keys
WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_get
SELECT head_id FROM courier_ordering_keys
WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_stale
-- The keys whose head finished without the key moving on (see the
-- PostgreSQL file): with one writer, only a database an older courier
-- left so has any.
SELECT k.endpoint, k.ordering_key, k.head_id AS id, COALESCE(o.status, 'succeeded') AS status
FROM courier_ordering_keys AS k
LEFT JOIN courier_outbox AS o ON o.id = k.head_id
WHERE k.blocked_at IS NULL AND (o.id IS NULL OR o.status NOT IN ('pending', 'retry_wait', 'leased'))
ORDER BY k.endpoint, k.ordering_key
LIMIT :limit;

-- name: ordering_key_head_status
-- The status of the key's head (:head_id) as it stands now, for the
-- transaction that locked the key's row and may move it on; a head pruned
-- since counts as finished. SQLite: writers are serialized, so the status
-- the transaction read or wrote earlier is still current; the statement
-- is the same as PostgreSQL's, which needs it (see the PostgreSQL file).
SELECT COALESCE((SELECT status FROM courier_outbox WHERE id = :head_id), 'succeeded') AS status;

-- name: ordering_key_stale_count
-- How many keys are stale (see ordering_key_stale), locked or not.
SELECT COUNT(*) FROM courier_ordering_keys AS k
LEFT JOIN courier_outbox AS o ON o.id = k.head_id
WHERE k.blocked_at IS NULL AND (o.id IS NULL OR o.status NOT IN ('pending', 'retry_wait', 'leased'));

-- name: ordering_key_advance
-- The key's next head is :head_id (promoted by outbox_promote), or the
-- head itself again (redriven): the key is no longer blocked.
UPDATE courier_ordering_keys SET head_id = :head_id, blocked_at = NULL, updated_at = :now
WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_block
-- The key's head failed and holds the key (OrderingOnFailure OrderingHoldKey).
UPDATE courier_ordering_keys SET blocked_at = :now, updated_at = :now
WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_delete
-- The key's last delivery finished.
DELETE FROM courier_ordering_keys WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_blocked
-- The keys a failed head holds, by endpoint, from their partial index.
SELECT k.endpoint, k.ordering_key, k.head_id, k.blocked_at
FROM courier_ordering_keys AS k
WHERE k.blocked_at IS NOT NULL AND (:endpoint = '' OR k.endpoint IN (:endpoint, :endpoint_spelled))
ORDER BY k.endpoint, k.ordering_key
LIMIT :limit;

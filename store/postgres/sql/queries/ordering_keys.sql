-- courier's queries for PostgreSQL: ordering keys: one row per (endpoint, key) with an unfinished delivery.
-- store/sqlite/sql/queries/ordering_keys.sql has the same names and parameters; where the
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
-- PostgreSQL: FOR UPDATE waits for an enqueue of the same key to commit
-- (its ordering_key_join holds the row), and the statements after this one
-- take their snapshot after it, so they see that enqueue's delivery.
SELECT head_id FROM courier_ordering_keys
WHERE endpoint = :endpoint AND ordering_key = :ordering_key
FOR UPDATE;

-- name: ordering_key_lock_of
-- The row of delivery :id's ordering key (none when it has no key, or the
-- key has no unfinished delivery), taken before a statement that changes
-- the delivery: a settle's advance takes a key's row, then promotes (and
-- so locks) the delivery behind the head; Cancel, which locks the
-- delivery, must take the key's row first too, or the two would wait for
-- each other in a circle; and so must Redrive, which a Cancel of a failed
-- head would meet the same way (outbox_redrive_keys). So must a publish
-- that brings a delivery up to date or sends it again
-- (outbox_publish_refresh, outbox_publish_revive): an application's
-- transaction holds it until it ends, and a worker's
-- settle or claim, which never waits for a key's row
-- (ordering_key_try_lock), would wait for it in outbox_promote instead.
SELECT k.head_id FROM courier_ordering_keys AS k
JOIN courier_outbox AS o ON o.endpoint = k.endpoint AND o.ordering_key = k.ordering_key
WHERE o.id = :id
FOR UPDATE OF k;

-- name: ordering_key_try_lock
-- ordering_key_lock for the worker's transactions (settle, claim):
-- SKIP LOCKED, so that an application's transaction that joined the key
-- (and holds its row until it ends) never holds them up, nor every other
-- outcome of their batch. No row: the key has none, or another
-- transaction holds it (ordering_key_get tells which).
SELECT head_id FROM courier_ordering_keys
WHERE endpoint = :endpoint AND ordering_key = :ordering_key
FOR UPDATE SKIP LOCKED;

-- name: ordering_key_get
SELECT head_id FROM courier_ordering_keys
WHERE endpoint = :endpoint AND ordering_key = :ordering_key;

-- name: ordering_key_stale
-- The keys whose head finished without the key moving on, because the
-- transaction that finished it found the key's row held (see
-- ordering_key_try_lock), or it was lost with its process before a
-- later claim moved the key on: each with its head (a head pruned since
-- counts as finished). A blocked key is not stale. The rows are locked
-- SKIP LOCKED, by key: no claim waits for another's.
-- PostgreSQL: a key's status here is only a lead. A key row another
-- transaction changed and committed after this statement's snapshot is
-- locked in its newest version and checked again against the outbox row
-- already joined, the old head's: moved on since, its new head does not
-- match, the outer join makes the row NULL, and the key is reported with
-- its new, unfinished head as finished; redriven since, its head is
-- reported failed. advanceKeys reads the head's status again
-- (ordering_key_head_status) once the key's row is locked.
SELECT k.endpoint, k.ordering_key, k.head_id AS id, COALESCE(o.status, 'succeeded') AS status
FROM courier_ordering_keys AS k
LEFT JOIN courier_outbox AS o ON o.id = k.head_id
WHERE k.blocked_at IS NULL AND (o.id IS NULL OR o.status NOT IN ('pending', 'retry_wait', 'leased'))
ORDER BY k.endpoint, k.ordering_key
LIMIT :limit
FOR UPDATE OF k SKIP LOCKED;

-- name: ordering_key_head_status
-- The status of the key's head (:head_id) as it stands now, for the
-- transaction that locked the key's row and may move it on; a head pruned
-- since counts as finished. PostgreSQL: a statement of its own, so that
-- its snapshot is taken once the row is locked. Read in the statement that
-- locks the row, a status would be as of that statement's snapshot, which
-- may predate the row's newest version (see ordering_key_stale).
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
-- COLLATE "C": byte order, as on SQLite, whatever the database's collation.
ORDER BY k.endpoint COLLATE "C", k.ordering_key COLLATE "C"
LIMIT :limit;

-- courier's queries for SQLite: the inbox: the receiver side's dedupe records.
-- store/postgres/sql/queries/inbox.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: inbox_insert
-- :status is 'processing' (Record, Claim) or 'completed' with its :ack
-- (RecordCompleted). :payload_key_id names the payload key the digest is keyed
-- and the answer sealed under, '' for none (Config.Encryption).
INSERT INTO courier_inbox (sender, dedupe_key, payload_sha256, payload_key_id, status, ack, created_at, updated_at)
VALUES (:sender, :dedupe_key, :payload_sha256, :payload_key_id, :status, :ack, :now, :now)
ON CONFLICT (sender, dedupe_key) DO NOTHING;

-- name: inbox_get
SELECT payload_sha256, payload_key_id, status, ack, created_at, updated_at
FROM courier_inbox WHERE sender = :sender AND dedupe_key = :dedupe_key;

-- name: inbox_complete
-- The record is stored again whole, digest and answer under one key: the
-- completing Store's Current one.
UPDATE courier_inbox SET status = 'completed', payload_sha256 = :payload_sha256, payload_key_id = :payload_key_id, ack = :ack, updated_at = :now
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing';

-- fragment: inbox_prunable
-- The records past their age: what inbox_prune deletes and
-- inbox_prune_count counts.
updated_at < :before

-- name: inbox_prune
-- Bounded: at most :limit rows per statement, oldest first. A two-phase
-- claim left processing that long (its receiver died between the phases,
-- and no retry came to take it over) goes too.
DELETE FROM courier_inbox WHERE rowid IN (
    SELECT rowid FROM courier_inbox WHERE {{inbox_prunable}} ORDER BY updated_at LIMIT :limit
);

-- name: inbox_prune_count
-- How many rows inbox_prune would delete, in every batch: a dry run's.
SELECT COUNT(*) FROM courier_inbox WHERE {{inbox_prunable}};

-- name: inbox_take_over
-- A two-phase record left processing longer than the staleness window (its
-- receiver died between the phases) is taken over; its updated_at is the
-- claim's fencing token. :payload_sha256 is the digest the record stores,
-- which the store has compared with the request's.
UPDATE courier_inbox SET updated_at = :now
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing'
    AND payload_sha256 = :payload_sha256 AND updated_at <= :stale_before
RETURNING updated_at;

-- name: inbox_complete_claimed
-- Fenced: only the claim whose token is still the record's completes it.
-- As inbox_complete, the record is stored again whole.
UPDATE courier_inbox SET status = 'completed', payload_sha256 = :payload_sha256, payload_key_id = :payload_key_id, ack = :ack, updated_at = :now
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing' AND updated_at = :token;

-- name: inbox_release_claimed
DELETE FROM courier_inbox
WHERE sender = :sender AND dedupe_key = :dedupe_key AND status = 'processing' AND updated_at = :token;

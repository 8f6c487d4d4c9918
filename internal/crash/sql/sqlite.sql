-- The crash harness's application tables and the queries its checks run,
-- for SQLite. postgres.sql has the same query names; where the SQL differs,
-- both files say why. Times are unix microseconds, like courier's.

-- name: create_orders
-- The sender's business table: one row per committed business transaction,
-- written in the same transaction as the notification's enqueue. An order
-- whose transaction rolled back has no row here, and must have no outbox
-- row and no effect either.
-- SQLite: INTEGER for the unix-microsecond time.
CREATE TABLE IF NOT EXISTS crash_orders (
    seq             INTEGER PRIMARY KEY,
    notification_id TEXT    NOT NULL UNIQUE,
    created_at      INTEGER NOT NULL
);

-- name: insert_order
-- Idempotent: a restarted sender writes the same orders again as no-ops.
-- On any conflict, not seq's alone: the killed sender's transaction may
-- still be alive on the server with the same row, and once it commits,
-- a conflict on notification_id would otherwise be an error.
-- SQLite: ? placeholders.
INSERT INTO crash_orders (seq, notification_id, created_at) VALUES (?, ?, ?)
ON CONFLICT DO NOTHING;

-- name: committed_orders
SELECT notification_id FROM crash_orders;

-- name: count_orders
SELECT COUNT(*) FROM crash_orders;

-- name: create_effects
-- The receiver's business effect: one row per run of the application
-- function that committed. Deliberately no unique constraint, so a
-- notification processed twice shows as two rows.
-- SQLite: INTEGER PRIMARY KEY AUTOINCREMENT for the row id.
CREATE TABLE IF NOT EXISTS crash_effects (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id TEXT    NOT NULL,
    processed_at    INTEGER NOT NULL
);

-- name: insert_effect
-- SQLite: ? placeholders.
INSERT INTO crash_effects (notification_id, processed_at) VALUES (?, ?);

-- name: count_effects
SELECT notification_id, COUNT(*) FROM crash_effects GROUP BY notification_id;

-- name: outbox_rows
-- The evidence read after the run: every delivery's final status.
SELECT notification_id, status FROM courier_outbox;

-- name: leases_held
-- Deliveries a (killed) worker still holds, read right after the kill.
-- SQLite: ? placeholders.
SELECT COUNT(*) FROM courier_outbox WHERE status = 'leased' AND lease_owner = ?;

-- name: leases_frozen
-- The leases a frozen worker holds, read right after it was stopped: its
-- requests of them may reach the receiver after they expired.
-- SQLite: ? placeholders.
SELECT notification_id, endpoint, attempts, lease_expires_at FROM courier_outbox WHERE status = 'leased' AND lease_owner = ?;

-- name: succeeded_attempts
-- Per delivery, how many attempts the attempts log records as succeeded:
-- a settle is fenced by its lease, so exactly one each.
SELECT o.notification_id, COUNT(a.id)
FROM courier_outbox AS o
LEFT JOIN courier_attempts AS a ON a.delivery_id = o.id AND a.outcome = 'succeeded'
GROUP BY o.notification_id;

-- name: attempt_numbers
-- Per delivery, its attempts counter and what the attempts log holds of
-- it: how many rows, how many distinct attempt numbers, the least and the
-- greatest. Every lease a delivery was given ends in exactly one row,
-- whether its worker settled it or it expired and a claim reclaimed it
-- (a lease given back unused uncounts its attempt), so the numbers are
-- 1..attempts, each once.
SELECT o.notification_id, o.endpoint, o.attempts, COUNT(a.id), COUNT(DISTINCT a.attempt),
    COALESCE(MIN(a.attempt), 0), COALESCE(MAX(a.attempt), 0)
FROM courier_outbox AS o
LEFT JOIN courier_attempts AS a ON a.delivery_id = o.id
GROUP BY o.id, o.notification_id, o.endpoint, o.attempts;

-- name: count_attempts
SELECT COUNT(*) FROM courier_attempts;

-- name: attempt_outcomes
SELECT outcome, COALESCE(error_code, ''), COUNT(*) FROM courier_attempts GROUP BY outcome, error_code;

-- The delivery control run (TestCrashControl).

-- name: create_control_effects
-- The receiver's effect in the control run: one row per run of an
-- application function that committed, with the endpoint it came in on
-- (terminal, events-a, events-b, source), its ordering key ('' for none)
-- and its position in the sender's enqueue order. The row id is the order
-- the effects were applied in: per (endpoint, key) seq must rise with it.
-- SQLite: INTEGER PRIMARY KEY AUTOINCREMENT for the row id.
CREATE TABLE IF NOT EXISTS crash_control_effects (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id TEXT    NOT NULL,
    endpoint        TEXT    NOT NULL,
    ordering_key    TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    processed_at    INTEGER NOT NULL
);

-- name: insert_control_effect
-- SQLite: ? placeholders.
INSERT INTO crash_control_effects (notification_id, endpoint, ordering_key, seq, processed_at) VALUES (?, ?, ?, ?, ?);

-- name: control_effects
SELECT notification_id, endpoint, ordering_key, seq FROM crash_control_effects ORDER BY id;

-- name: outbox_deliveries
-- Every delivery with its endpoint, status and stored payload (sealed
-- when the run encrypts).
-- SQLite keeps payloads in a table of their own (migration 13).
SELECT o.notification_id, o.endpoint, o.status, p.payload
FROM courier_outbox AS o LEFT JOIN courier_outbox_payload AS p ON p.id = o.id;

-- name: ordering_keys_left
-- Keys that still have a head: none once every delivery finished.
SELECT endpoint, ordering_key, head_id FROM courier_ordering_keys;

-- name: inbox_records
-- The receiver's inbox records: the payload key each is kept under ('' for
-- none) and its stored answer (sealed when the run encrypts; NULL while
-- processing).
SELECT sender, dedupe_key, payload_key_id, ack FROM courier_inbox;

-- name: held_without_key
-- Deliveries waiting for their ordering key that no settle will promote:
-- the key has no row, or its row names a head that is finished. A drain
-- that stops moving with such deliveries left is a key that was not moved
-- on.
SELECT o.id, o.notification_id, o.endpoint, o.ordering_key, COALESCE(k.head_id, 0)
FROM courier_outbox AS o
LEFT JOIN courier_ordering_keys AS k ON k.endpoint = o.endpoint AND k.ordering_key = o.ordering_key
WHERE o.hold = 'key' AND o.status IN ('pending', 'retry_wait')
    AND (k.head_id IS NULL OR NOT EXISTS (SELECT 1 FROM courier_outbox AS h
                                         WHERE h.id = k.head_id AND h.status IN ('pending', 'retry_wait', 'leased')))
ORDER BY o.id;

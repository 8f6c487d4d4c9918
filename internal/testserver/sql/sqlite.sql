-- The test server's application table for SQLite. postgres.sql has the same
-- query names; where the SQL differs, both files say why.
--
-- testserver_effects is the receiver's "business" effect: one row per run of
-- the application function that committed. There is deliberately no unique
-- constraint, so a notification processed twice shows as two rows.
-- processed_at is unix microseconds, like every time in courier's tables.

-- name: create_effects
-- SQLite: INTEGER PRIMARY KEY AUTOINCREMENT for the row id.
CREATE TABLE IF NOT EXISTS testserver_effects (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    notification_id TEXT    NOT NULL,
    processed_at    INTEGER NOT NULL
);

-- name: insert_effect
-- SQLite: ? placeholders.
INSERT INTO testserver_effects (notification_id, processed_at) VALUES (?, ?);

-- name: count_effects
SELECT notification_id, COUNT(*) FROM testserver_effects GROUP BY notification_id;

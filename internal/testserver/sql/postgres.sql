-- The test server's application table for PostgreSQL. sqlite.sql has the
-- same query names; where the SQL differs, both files say why.
--
-- testserver_effects is the receiver's "business" effect: one row per run of
-- the application function that committed. There is deliberately no unique
-- constraint, so a notification processed twice shows as two rows.
-- processed_at is unix microseconds, like every time in courier's tables.

-- name: create_effects
-- PostgreSQL: an identity column in place of AUTOINCREMENT; BIGINT for the
-- unix-microsecond time.
CREATE TABLE IF NOT EXISTS testserver_effects (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id TEXT   NOT NULL,
    processed_at    BIGINT NOT NULL
);

-- name: insert_effect
-- PostgreSQL: $n placeholders.
INSERT INTO testserver_effects (notification_id, processed_at) VALUES ($1, $2);

-- name: count_effects
SELECT notification_id, COUNT(*) FROM testserver_effects GROUP BY notification_id;

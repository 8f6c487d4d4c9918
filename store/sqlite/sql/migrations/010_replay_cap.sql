-- Migration 10: a cap on the live nonces of one signing key in the replay
-- cache, as the in-memory cache has (AdCP's rate-abuse rule): a signer
-- that mints nonces faster than they expire is refused rather than let
-- grow the table without bound. Counting a key's pairs on every request
-- would cost a range scan, so each key keeps a count per minute of
-- expiry, which triggers keep in the statement that records a pair. It
-- adds a table and triggers only, so it applies after whatever migration
-- 9 did; pairs recorded before it are not counted, and expire within
-- minutes.

-- bucket is the minute (unix microseconds / 60,000,000) in which the
-- counted pairs expire; n how many pairs of key_id were recorded to
-- expire in it.
CREATE TABLE courier_replay_counts (
    key_id TEXT    NOT NULL,
    bucket INTEGER NOT NULL,
    n      INTEGER NOT NULL CHECK (n > 0),
    PRIMARY KEY (key_id, bucket)
);

CREATE TRIGGER courier_replay_counted AFTER INSERT ON courier_replay
BEGIN
    INSERT INTO courier_replay_counts (key_id, bucket, n) VALUES (NEW.key_id, NEW.expires_at / 60000000, 1)
    ON CONFLICT (key_id, bucket) DO UPDATE SET n = n + 1;
END;

-- An expired pair taken over by a new signature counts again.
CREATE TRIGGER courier_replay_recounted AFTER UPDATE OF expires_at ON courier_replay
BEGIN
    INSERT INTO courier_replay_counts (key_id, bucket, n) VALUES (NEW.key_id, NEW.expires_at / 60000000, 1)
    ON CONFLICT (key_id, bucket) DO UPDATE SET n = n + 1;
END;

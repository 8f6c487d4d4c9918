-- Migration 10: a cap on the live nonces of one signing key in the replay
-- cache, as the in-memory cache has (AdCP's rate-abuse rule): a signer
-- that mints nonces faster than they expire is refused rather than let
-- grow the table without bound. Counting a key's pairs on every request
-- would cost a range scan, so each key keeps a count per minute of
-- expiry, which a trigger keeps in the statement that records a pair. It
-- adds a table, a function and a trigger only, so it applies after
-- whatever migration 9 did; pairs recorded before it are not counted, and
-- expire within minutes.

-- bucket is the minute (unix microseconds / 60,000,000) in which the
-- counted pairs expire; n how many pairs of key_id were recorded to
-- expire in it.
CREATE TABLE courier_replay_counts (
    key_id TEXT   NOT NULL,
    bucket BIGINT NOT NULL,
    n      BIGINT NOT NULL CHECK (n > 0),
    PRIMARY KEY (key_id, bucket)
);

-- Counts a recorded pair, and an expired pair taken over by a new
-- signature again. The function is created beside courier's tables and
-- runs with the search_path they were created under, so it counts into
-- the table beside them whatever the caller's search_path.
CREATE FUNCTION courier_replay_count() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO courier_replay_counts (key_id, bucket, n) VALUES (NEW.key_id, NEW.expires_at / 60000000, 1)
    ON CONFLICT (key_id, bucket) DO UPDATE SET n = courier_replay_counts.n + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER courier_replay_counted AFTER INSERT OR UPDATE OF expires_at ON courier_replay
    FOR EACH ROW EXECUTE FUNCTION courier_replay_count();

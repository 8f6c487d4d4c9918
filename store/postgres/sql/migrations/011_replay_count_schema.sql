-- Migration 11: the replay cache's counting trigger finds its table in
-- the schema courier's tables are in, whichever role runs it. Migration
-- 10 created the function with SET search_path FROM CURRENT, which keeps
-- the search_path as written, "$user", public by default: where a role
-- that owns a schema of its name migrated, and a role of another name
-- uses the tables (search_path set in its URL), "$user" found no table,
-- and every replay check failed. The function is created again with the
-- search_path made of the one schema the tables are in.
SELECT set_config('search_path', quote_ident(current_schema()), true);

CREATE OR REPLACE FUNCTION courier_replay_count() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO courier_replay_counts (key_id, bucket, n) VALUES (NEW.key_id, NEW.expires_at / 60000000, 1)
    ON CONFLICT (key_id, bucket) DO UPDATE SET n = courier_replay_counts.n + 1;
    RETURN NULL;
END
$$;

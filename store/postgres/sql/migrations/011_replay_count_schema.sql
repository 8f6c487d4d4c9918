-- Migration 11: the replay cache's counting trigger finds its table in
-- the schema courier's tables are in, whichever role runs it. Migration
-- 10 created the function with SET search_path FROM CURRENT, which keeps
-- the search_path as written, "$user", public by default: where a role
-- that owns a schema of its name migrated, and a role of another name
-- uses the tables (search_path set in its URL), "$user" found no table,
-- and every replay check failed. The function's own search_path becomes
-- the one schema the tables are in; the session's is left as it is (a
-- team's tool may run this in a transaction of its own migrations).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION courier_replay_count() SET search_path = %I', current_schema());
END
$$;

-- Migration 12: the replay cache's counts by minute, so a prune deletes
-- the counts of the minutes that have expired in bounded batches read
-- from this index, oldest first, rather than reading and locking the
-- whole table in one statement. Building it holds off the replay checks'
-- counting until the migration commits; the table holds a row per key
-- and minute of expiry, few beside the pairs.
CREATE INDEX courier_replay_counts_bucket ON courier_replay_counts (bucket);

-- Migration 11: the replay cache's counts by minute, so a prune deletes
-- the counts of the minutes that have expired in bounded batches read
-- from this index, oldest first, rather than reading the whole table in
-- one statement that holds the write lock while it does.
CREATE INDEX courier_replay_counts_bucket ON courier_replay_counts (bucket);

-- Migration 12: the attempt budget a delivery was enqueued with. Redrive,
-- and a publish that sends a suppressed delivery again, raise max_attempts
-- past what the enqueue asked for; an enqueue made again compares its own
-- budget with this one, so it still finds its delivery once an operator
-- has redriven it. NULL for a delivery enqueued before this migration: it
-- is compared by max_attempts, as before, and a redrive or a revival keeps
-- its max_attempts here before raising it (one redriven before this
-- migration keeps the budget that redrive gave). It adds a column only, so
-- it applies after whatever migration 11 did.
ALTER TABLE courier_outbox ADD COLUMN enqueued_max_attempts INTEGER CHECK (enqueued_max_attempts IS NULL OR enqueued_max_attempts BETWEEN 1 AND 1000);

-- Migration 6: the receiver's own code. When a receiver refuses an attempt
-- with an application/problem+json body carrying a valid code
-- (validation_failed, plan_unknown, ...), the worker keeps that code beside
-- courier's own: on the attempt, and on the delivery as its latest. Only
-- the code is kept, never other body content. It adds columns only, so it
-- applies after whatever migration 5 did.

ALTER TABLE courier_attempts ADD COLUMN remote_code TEXT CHECK (remote_code IS NULL OR length(remote_code) BETWEEN 1 AND 128);

ALTER TABLE courier_outbox ADD COLUMN last_remote_code TEXT CHECK (last_remote_code IS NULL OR length(last_remote_code) BETWEEN 1 AND 128);

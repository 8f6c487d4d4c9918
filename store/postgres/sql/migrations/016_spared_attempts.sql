-- Migration 16: how many of a delivery's attempts were cut short as their
-- worker stopped (worker_stopped, a settle that spares the budget). Such an
-- attempt is counted in attempts and its budget grows by one; the
-- Courier-Attempt header a worker sends is the attempt's place in the
-- budget, attempts less these, so that a command's source, which refuses
-- an attempt beyond the command's source_max_attempts, is not led to
-- refuse one a deploy spared. It adds a column with a constant default, so
-- no row is rewritten, and its CHECK NOT VALID, so no row is read under
-- the lock: the check holds for every row written from now on, and every
-- row already there has the default. It applies after whatever migration
-- 15 did; an earlier courier runs on it and leaves the count as it is.
ALTER TABLE courier_outbox ADD COLUMN spared_attempts INTEGER NOT NULL DEFAULT 0,
    ADD CONSTRAINT courier_outbox_spared_attempts_check CHECK (spared_attempts >= 0) NOT VALID;

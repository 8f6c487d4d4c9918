-- Migration 7 is another change's (trace context on courier_outbox). This
-- stand-in keeps the numbers contiguous on this branch only: drop it when
-- the two merge, keeping migration 7's own file.
SELECT 1;

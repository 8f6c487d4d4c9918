-- Migration 11: parked deliveries by deadline. A claim parks a due
-- delivery whose endpoint has no room, and unparks it when the endpoint
-- has room again; an endpoint with none for good (disabled) kept its
-- parked deliveries past their deadline, never ended and never pruned.
-- Claims now end them from this index (outbox_expire_parked), which holds
-- parked rows only. It adds an index only, so it applies after whatever
-- migration 10 did.
CREATE INDEX courier_outbox_parked_deadline ON courier_outbox (deadline) WHERE hold = 'endpoint';

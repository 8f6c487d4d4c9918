-- Migration 8: delivery control: per-endpoint limits, fair share and
-- ordering keys. It adds columns, tables and indexes only, and rebuilds
-- the due index, so it applies after whatever migration 7 did.

-- ordering_key: deliveries of one endpoint with the same key are sent one
-- at a time, in enqueue order (EnqueueParams.OrderingKey). NULL for none.
ALTER TABLE courier_outbox ADD COLUMN ordering_key TEXT CHECK (ordering_key IS NULL OR length(ordering_key) BETWEEN 1 AND 256);

-- hold: why a pending or retrying delivery is out of the due index:
-- 'key' while an earlier delivery of its ordering key is unfinished (the
-- settle that finishes that one promotes the next), 'endpoint' while its
-- endpoint has no room (parked by a claim; a later claim unparks it when
-- the endpoint has room again). NULL for every other delivery.
-- SQLite: a column constraint may name another column; PostgreSQL adds the
-- status rule as a table constraint.
ALTER TABLE courier_outbox ADD COLUMN hold TEXT CHECK (hold IS NULL OR (hold IN ('key', 'endpoint') AND status IN ('pending', 'retry_wait')));

-- The due index holds only deliveries a claim may lease: a held delivery
-- never costs a claim a step, however many wait behind a slow endpoint or
-- a blocked key.
DROP INDEX courier_outbox_due;
CREATE INDEX courier_outbox_due ON courier_outbox (priority, next_attempt_at, created_at, id)
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL;

-- Parked deliveries by endpoint in claim order: what a claim unparks when
-- the endpoint has room.
CREATE INDEX courier_outbox_parked ON courier_outbox (endpoint, priority, next_attempt_at, created_at, id)
    WHERE hold = 'endpoint';

-- Deliveries waiting for their key, in enqueue order: what a settle
-- promotes.
CREATE INDEX courier_outbox_waiting ON courier_outbox (endpoint, ordering_key, id)
    WHERE hold = 'key';

-- Leases by endpoint and owner: a claim counts an endpoint's deliveries
-- in flight (all of them, and its own) from here, in O(in flight).
CREATE INDEX courier_outbox_in_flight ON courier_outbox (endpoint, lease_owner)
    WHERE status = 'leased';

-- An endpoint's limits (Endpoints.SetLimits) and its token bucket. A row
-- exists only for an endpoint an operator limited. max_in_flight 0 and
-- rate 0 mean no such limit.
CREATE TABLE courier_endpoint_limits (
    endpoint      TEXT    PRIMARY KEY CHECK (length(endpoint) BETWEEN 1 AND 2048),
    max_in_flight INTEGER NOT NULL CHECK (max_in_flight >= 0),
    rate          REAL    NOT NULL CHECK (rate >= 0), -- requests per second
    burst         INTEGER NOT NULL CHECK (burst >= 0),
    tokens        REAL    NOT NULL,                   -- the bucket at tokens_at
    tokens_at     INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

-- One row per (endpoint, ordering key) with an unfinished delivery, or a
-- failed one holding the key: head_id is the delivery sent next (or
-- being sent); blocked_at is set while a failed head holds the key
-- (OrderingOnFailure HoldKey), until an operator redrives or cancels it.
CREATE TABLE courier_ordering_keys (
    endpoint     TEXT    NOT NULL,
    ordering_key TEXT    NOT NULL,
    head_id      INTEGER NOT NULL,
    blocked_at   INTEGER,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (endpoint, ordering_key)
);

CREATE INDEX courier_ordering_keys_blocked ON courier_ordering_keys (endpoint) WHERE blocked_at IS NOT NULL;

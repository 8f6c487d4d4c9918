-- courier's queries for PostgreSQL: endpoint health: the per-endpoint circuit breaker.
-- store/sqlite/sql/queries/endpoints.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: endpoint_get
SELECT endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at
FROM courier_endpoints WHERE endpoint = :endpoint;

-- name: endpoint_list
SELECT endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at
FROM courier_endpoints ORDER BY endpoint;

-- name: endpoint_put
INSERT INTO courier_endpoints (endpoint, state, consecutive_failures, failing_since, open_until, reason, updated_at)
VALUES (:endpoint, :state, :consecutive_failures, :failing_since, :open_until, :reason, :now)
ON CONFLICT (endpoint) DO UPDATE SET state = excluded.state, consecutive_failures = excluded.consecutive_failures,
    failing_since = excluded.failing_since, open_until = excluded.open_until, reason = excluded.reason,
    updated_at = excluded.updated_at;

-- name: endpoint_delete
DELETE FROM courier_endpoints WHERE endpoint = :endpoint;

-- name: endpoint_probes
-- Endpoints whose cool-down (or whose probe's lease) ended: each gets one
-- probe, held for the lease.
UPDATE courier_endpoints SET state = 'half_open', open_until = :probe_until, updated_at = :now
WHERE state IN ('open', 'half_open') AND open_until <= :now
RETURNING endpoint;

-- name: endpoint_probe_idle
-- A probed endpoint had nothing due: it stays open, probed again at the next claim.
UPDATE courier_endpoints SET state = 'open', open_until = :now, updated_at = :now
WHERE endpoint = :endpoint AND state = 'half_open';

-- name: endpoint_ref_known
-- Endpoints named in the small tables, where an operator's endpoint
-- reference is looked up first (Endpoints.Resolve).
SELECT endpoint FROM courier_endpoints
UNION SELECT endpoint FROM courier_subscriptions
UNION SELECT endpoint FROM courier_contracts;

-- name: endpoint_ref_deliveries
-- Every endpoint with deliveries, for a reference the small tables do not
-- know: a scan of the outbox, run only for an operator's action.
SELECT DISTINCT endpoint FROM courier_outbox;

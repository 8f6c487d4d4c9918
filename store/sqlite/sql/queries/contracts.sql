-- courier's queries for SQLite: contract pins of the source-delivery profile.
-- store/postgres/sql/queries/contracts.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: contract_get
SELECT capabilities_sha256, pinned_at FROM courier_contracts WHERE endpoint = :endpoint;

-- name: contract_pin
INSERT INTO courier_contracts (endpoint, capabilities_sha256, pinned_at) VALUES (:endpoint, :capabilities_sha256, :now)
ON CONFLICT (endpoint) DO UPDATE SET capabilities_sha256 = excluded.capabilities_sha256, pinned_at = excluded.pinned_at;

-- name: contract_pin_absent
-- The first command enqueued for an endpoint pins its digest.
INSERT INTO courier_contracts (endpoint, capabilities_sha256, pinned_at) VALUES (:endpoint, :capabilities_sha256, :now)
ON CONFLICT (endpoint) DO NOTHING;

-- name: contract_fail_mismatched
-- The operator gives up the waiting deliveries enqueued under another digest
-- than the endpoint's pin, parked ones too (a finished row holds nothing);
-- leased ones are in flight and settle as usual.
-- SQLite: read from the contract index, the endpoint's unfinished
-- commands only (its condition repeated verbatim, which INDEXED BY
-- names): left to itself, the planner read every waiting delivery of the
-- outbox by courier_outbox_listed, then every delivery of the endpoint by
-- courier_outbox_endpoint (migration 15), or, with statistics, the whole
-- outbox.
UPDATE courier_outbox INDEXED BY courier_outbox_contract
SET status = 'failed', last_error_code = 'contract_changed', hold = NULL, updated_at = :now
WHERE endpoint = :endpoint AND contract_sha256 IS NOT NULL AND status IN ('pending', 'retry_wait', 'leased')
    AND status IN ('pending', 'retry_wait')
    AND contract_sha256 <> (SELECT k.capabilities_sha256 FROM courier_contracts AS k WHERE k.endpoint = :endpoint);

-- name: contract_unpin
-- The operator removes the endpoint's pin, unless it holds deliveries
-- back: one of the endpoint's unfinished deliveries was enqueued under
-- another digest (contract_mismatched's condition). Without the pin
-- nothing would hold them back (see Contracts.Unpin).
-- SQLite: the endpoint's unfinished commands read from the contract
-- index (its condition repeated verbatim), which INDEXED BY names, as in
-- contract_fail_mismatched.
DELETE FROM courier_contracts AS k
WHERE k.endpoint = :endpoint AND NOT EXISTS (
    SELECT 1 FROM courier_outbox AS m INDEXED BY courier_outbox_contract
    WHERE m.endpoint = k.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
        AND m.contract_sha256 <> k.capabilities_sha256);

-- name: contract_mismatched
-- Unfinished deliveries enqueued under another digest than their endpoint's
-- pin: each holds its endpoint back (health: contract_changed).
-- SQLite: CROSS JOIN keeps the pins outside, each probing the outbox's
-- contract index (its condition repeated verbatim), which INDEXED BY
-- names: left to itself, without statistics, the planner read every
-- unfinished delivery by courier_outbox_status, even with no pin at all.
SELECT COUNT(*) FROM courier_contracts AS k CROSS JOIN courier_outbox AS m INDEXED BY courier_outbox_contract
WHERE m.endpoint = k.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
    AND m.contract_sha256 <> k.capabilities_sha256;

-- name: contract_list
-- Every pin (or one, by :endpoint) with its count of unfinished
-- deliveries enqueued under another digest, each count read from the
-- outbox's contract index (its condition repeated verbatim).
SELECT k.endpoint, k.capabilities_sha256, k.pinned_at,
    (SELECT COUNT(*) FROM courier_outbox AS m
     WHERE m.endpoint = k.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
         AND m.contract_sha256 <> k.capabilities_sha256) AS mismatched
FROM courier_contracts AS k
WHERE :endpoint = '' OR k.endpoint = :endpoint
ORDER BY k.endpoint;

-- name: contract_page
-- A page of the pins: at most :limit after :after ("" for the first
-- page), by endpoint, read from the primary key from :after on, each with
-- its count as contract_list's.
SELECT k.endpoint, k.capabilities_sha256, k.pinned_at,
    (SELECT COUNT(*) FROM courier_outbox AS m
     WHERE m.endpoint = k.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
         AND m.contract_sha256 <> k.capabilities_sha256) AS mismatched
FROM courier_contracts AS k
WHERE k.endpoint > :after
ORDER BY k.endpoint
LIMIT :limit;

-- name: contract_top
-- The :limit pins that most need an operator, the ops page's order: those
-- holding the most deliveries back first, then the latest pins, then by
-- endpoint. The deliveries held back are counted once for all, from the
-- unfinished deliveries of the contract index (held), not once per pin;
-- no index holds the order, so the database ranks every pin by a narrow
-- key (kept) and sends the page.
-- SQLite: CROSS JOIN and INDEXED BY keep the unfinished deliveries outside,
-- read from the contract index (its condition repeated verbatim), each
-- looking its pin up by the primary key: driven from the pins, the
-- planner probes the outbox once per pin.
WITH held AS MATERIALIZED (
    SELECT m.endpoint, COUNT(*) AS n FROM courier_outbox AS m INDEXED BY courier_outbox_contract CROSS JOIN courier_contracts AS k
    WHERE k.endpoint = m.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
        AND m.contract_sha256 <> k.capabilities_sha256
    GROUP BY m.endpoint
),
kept AS (
    SELECT k.endpoint, k.pinned_at, COALESCE((SELECT h.n FROM held AS h WHERE h.endpoint = k.endpoint), 0) AS mismatched
    FROM courier_contracts AS k
    ORDER BY mismatched DESC, k.pinned_at DESC, k.endpoint
    LIMIT :limit
)
SELECT t.endpoint, k.capabilities_sha256, t.pinned_at, t.mismatched
FROM kept AS t JOIN courier_contracts AS k ON k.endpoint = t.endpoint
ORDER BY t.mismatched DESC, t.pinned_at DESC, t.endpoint;

-- name: contract_count
-- How many pins there are, and how many hold deliveries back (see
-- contract_top's held), counted in the database.
-- SQLite: CROSS JOIN and INDEXED BY as in contract_top.
SELECT (SELECT COUNT(*) FROM courier_contracts) AS pinned,
    (SELECT COUNT(DISTINCT m.endpoint) FROM courier_outbox AS m INDEXED BY courier_outbox_contract CROSS JOIN courier_contracts AS k
     WHERE k.endpoint = m.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
         AND m.contract_sha256 <> k.capabilities_sha256) AS holding;

-- courier's queries for PostgreSQL: contract pins of the source-delivery profile.
-- store/sqlite/sql/queries/contracts.sql has the same names and parameters; where the
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
UPDATE courier_outbox SET status = 'failed', last_error_code = 'contract_changed', hold = NULL, updated_at = :now
WHERE endpoint = :endpoint AND contract_sha256 IS NOT NULL AND status IN ('pending', 'retry_wait')
    AND contract_sha256 <> (SELECT k.capabilities_sha256 FROM courier_contracts AS k WHERE k.endpoint = :endpoint);

-- name: contract_unpin
-- The operator removes the endpoint's pin, unless it holds deliveries
-- back: one of the endpoint's unfinished deliveries was enqueued under
-- another digest (contract_mismatched's condition). Without the pin
-- nothing would hold them back (see Contracts.Unpin).
DELETE FROM courier_contracts AS k
WHERE k.endpoint = :endpoint AND NOT EXISTS (
    SELECT 1 FROM courier_outbox AS m
    WHERE m.endpoint = k.endpoint AND m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
        AND m.contract_sha256 <> k.capabilities_sha256);

-- name: contract_mismatched
-- Unfinished deliveries enqueued under another digest than their endpoint's
-- pin: each holds its endpoint back (health: contract_changed).
SELECT COUNT(*) FROM courier_outbox AS m JOIN courier_contracts AS k ON k.endpoint = m.endpoint
WHERE m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
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
-- COLLATE "C": byte order, as on SQLite, whatever the database's collation.
ORDER BY k.endpoint COLLATE "C";

-- name: contract_page
-- A page of the pins: at most :limit after :after ("" for the first
-- page), by endpoint, read from the primary key from :after on, each with
-- its count as contract_list's.
-- PostgreSQL: by the database's collation, not byte order as SQLite's
-- (contract_list's COLLATE "C"): the primary key is in it, and in another
-- order each page would read and sort every pin. A page is read after one
-- of the same database, in the same order.
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
-- key (kept) and sends the page. COLLATE "C": byte order, as on SQLite, whatever the
-- database's collation.
WITH held AS MATERIALIZED (
    SELECT m.endpoint, COUNT(*) AS n FROM courier_outbox AS m JOIN courier_contracts AS k ON k.endpoint = m.endpoint
    WHERE m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
        AND m.contract_sha256 <> k.capabilities_sha256
    GROUP BY m.endpoint
),
kept AS (
    SELECT k.endpoint, k.pinned_at, COALESCE((SELECT h.n FROM held AS h WHERE h.endpoint = k.endpoint), 0) AS mismatched
    FROM courier_contracts AS k
    ORDER BY mismatched DESC, k.pinned_at DESC, k.endpoint COLLATE "C"
    LIMIT :limit
)
SELECT t.endpoint, k.capabilities_sha256, t.pinned_at, t.mismatched
FROM kept AS t JOIN courier_contracts AS k ON k.endpoint = t.endpoint
ORDER BY t.mismatched DESC, t.pinned_at DESC, t.endpoint COLLATE "C";

-- name: contract_count
-- How many pins there are, and how many hold deliveries back (see
-- contract_top's held), counted in the database.
SELECT (SELECT COUNT(*) FROM courier_contracts) AS pinned,
    (SELECT COUNT(DISTINCT m.endpoint) FROM courier_outbox AS m JOIN courier_contracts AS k ON k.endpoint = m.endpoint
     WHERE m.contract_sha256 IS NOT NULL AND m.status IN ('pending', 'retry_wait', 'leased')
         AND m.contract_sha256 <> k.capabilities_sha256) AS holding;

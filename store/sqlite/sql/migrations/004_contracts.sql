-- Migration 4: contract pinning for the source-delivery profile. Each
-- endpoint may pin the capabilities digest of the contract its commands are
-- built for; each delivery records the digest it was enqueued under (NULL
-- for deliveries outside the profile). A delivery whose digest differs
-- from its endpoint's pin holds back every claim for that endpoint.

CREATE TABLE courier_contracts (
    endpoint            TEXT    PRIMARY KEY CHECK (length(endpoint) BETWEEN 1 AND 2048),
    capabilities_sha256 TEXT    NOT NULL CHECK (length(capabilities_sha256) = 64),
    pinned_at           INTEGER NOT NULL
);

ALTER TABLE courier_outbox ADD COLUMN contract_sha256 TEXT CHECK (contract_sha256 IS NULL OR length(contract_sha256) = 64);

-- Unfinished deliveries of an endpoint by contract: the claim's contract
-- check and Health probe it per endpoint without scanning the outbox.
CREATE INDEX courier_outbox_contract ON courier_outbox (endpoint, contract_sha256)
    WHERE contract_sha256 IS NOT NULL AND status IN ('pending', 'retry_wait', 'leased');

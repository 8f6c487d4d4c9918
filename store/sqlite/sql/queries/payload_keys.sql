-- courier's queries for SQLite: the payload keys stored rows are kept under.
-- store/postgres/sql/queries/payload_keys.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: payload_keys_in_use
-- The rows of each payload key id: deliveries whose payload is sealed
-- (and digest keyed) under it, and inbox records whose digest is keyed
-- and answer sealed under it, whatever their status. Rows kept as sent
-- or received ('') are not counted. No index leads with the key id: both
-- tables are read whole.
SELECT k.payload_key_id AS key_id, COUNT(*) AS n FROM (
    SELECT payload_key_id FROM courier_outbox WHERE payload_key_id <> ''
    UNION ALL
    SELECT payload_key_id FROM courier_inbox WHERE payload_key_id <> ''
) AS k
GROUP BY k.payload_key_id;

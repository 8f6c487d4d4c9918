-- Migration 9: inbox records under encryption at rest. With
-- store.Config.Encryption on, a record's digest is keyed and its answer
-- sealed, both under the payload key this column names; '' means the
-- record is kept as received. It adds a column only, so it applies after
-- whatever migration 8 did.
ALTER TABLE courier_inbox ADD COLUMN payload_key_id TEXT NOT NULL DEFAULT '';

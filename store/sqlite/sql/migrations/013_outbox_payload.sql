-- Migration 13: a delivery's payload in a table of its own, keyed by the
-- delivery's id. SQLite writes a row whole when an UPDATE changes its
-- size, overflow pages and all, and every claim and settle changes a
-- delivery's size (its status, lease token and times): with the payload
-- in the delivery's row, each claim and each settle wrote the payload
-- again, up to 4 MiB, holding the one writer while it did. Apart, it is
-- written by the enqueue, and again only by a publish that seals it anew
-- (outbox_payload_write); it goes with its delivery (the trigger below),
-- which a prune deletes. PostgreSQL keeps it in the row: TOAST stores a
-- large value out of line, and an UPDATE that leaves it as it is does not
-- copy it.
--
-- It removes a column an earlier courier reads and writes, so an earlier
-- courier must not run on it, and it says so (the row -13, see
-- schema_required): that courier's Open, Migrate and claims refuse the
-- schema with schema_too_new, and its enqueues, which name the column,
-- fail. Deploy it with every process of the earlier release stopped. It
-- copies every payload and rewrites the outbox without them inside the
-- write lock, so its transaction grows with the outbox: prune first.
CREATE TABLE courier_outbox_payload (
    id      INTEGER PRIMARY KEY, -- the delivery's: courier_outbox.id
    payload BLOB    NOT NULL
);

INSERT INTO courier_outbox_payload (id, payload) SELECT id, payload FROM courier_outbox;

ALTER TABLE courier_outbox DROP COLUMN payload;

CREATE TRIGGER courier_outbox_payload_deleted AFTER DELETE ON courier_outbox
BEGIN
    DELETE FROM courier_outbox_payload WHERE id = OLD.id;
END;

INSERT INTO courier_schema (version, applied_at) VALUES (-13, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));

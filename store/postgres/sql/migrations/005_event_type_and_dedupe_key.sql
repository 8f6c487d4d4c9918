-- Migration 5: what a delivery is about, for promises the outbox keeps
-- beyond its identity.

-- event_type: the type of the event a published delivery carries (its
-- claim checks that the subscription still wants that type, or suppresses
-- it), or a command's operation (change, cancellation, tombstone; Health
-- counts commands by it). NULL for other deliveries, and for published
-- ones enqueued before this migration, which are sent without the check.
ALTER TABLE courier_outbox ADD COLUMN event_type TEXT;
UPDATE courier_outbox SET event_type = split_part(notification_id, ':', 1)
WHERE profile = 'command';

-- dedupe_key: a second identity within the endpoint, for a profile whose
-- reference keys notifications by something other than their id: a
-- terminal notification's event_id. Another notification for the same
-- event and endpoint is an idempotency collision. NULL for other
-- profiles; terminal notifications enqueued before this migration have
-- none (filling it in could meet the very duplicates it forbids).
ALTER TABLE courier_outbox ADD COLUMN dedupe_key TEXT CHECK (dedupe_key IS NULL OR length(dedupe_key) BETWEEN 1 AND 256);
CREATE UNIQUE INDEX courier_outbox_dedupe ON courier_outbox (endpoint, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- Command deliveries by operation and status, for Health. Partial: no
-- other delivery pays for it.
CREATE INDEX courier_outbox_operations ON courier_outbox (event_type, status) WHERE profile = 'command';

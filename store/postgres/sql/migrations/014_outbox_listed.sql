-- Migration 14: an operator's listing by status (Outbox.List with a
-- Status, outbox_list_by_status), newest first, reads the deliveries of
-- that status from an index in id order: a page costs what it shows. By
-- courier_outbox_status (status, updated_at, id) it read and sorted every
-- delivery of the status for each page (a million succeeded ones), and
-- by the primary key it would walk every delivery newer than the page's
-- last for the few of a rare status. It adds an index only, so it applies
-- after whatever migration 13 did, and earlier couriers run on it.
CREATE INDEX courier_outbox_listed ON courier_outbox (status, id);

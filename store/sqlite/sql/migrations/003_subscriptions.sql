-- Migration 3: subscriptions, endpoint health, and the subscription each
-- delivery was fanned out to.

CREATE TABLE courier_subscriptions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant      TEXT    NOT NULL CHECK (length(tenant) BETWEEN 1 AND 256),
    endpoint    TEXT    NOT NULL CHECK (length(endpoint) BETWEEN 1 AND 2048),
    event_types TEXT    NOT NULL, -- space-separated; '*' matches every type
    auth_mode   TEXT    NOT NULL,
    key_id      TEXT    NOT NULL, -- a reference to the key, never key material
    profile     TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL CHECK (length(fingerprint) = 64),
    active      INTEGER NOT NULL CHECK (active IN (0, 1)), -- SQLite: no BOOLEAN type
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE INDEX courier_subscriptions_tenant ON courier_subscriptions (tenant, active);

-- One row per endpoint that has had a failure: absent means healthy.
CREATE TABLE courier_endpoints (
    endpoint             TEXT    PRIMARY KEY,
    state                TEXT    NOT NULL CHECK (state IN ('closed', 'open', 'half_open', 'disabled')),
    consecutive_failures INTEGER NOT NULL CHECK (consecutive_failures >= 0),
    failing_since        INTEGER,
    open_until           INTEGER, -- open: end of the cool-down; half_open: end of the probe's lease
    reason               TEXT,    -- why it is open or disabled: a stable code
    updated_at           INTEGER NOT NULL,
    CHECK (state = 'closed' OR reason IS NOT NULL),
    CHECK (state NOT IN ('open', 'half_open') OR open_until IS NOT NULL)
);

ALTER TABLE courier_outbox ADD COLUMN subscription_id INTEGER;
ALTER TABLE courier_outbox ADD COLUMN subscription_fingerprint TEXT;

-- Migration 1: the outbox, its attempts log, the inbox and the replay cache.
-- Times are unix microseconds (BIGINT) in both engines, so Go code never
-- depends on an engine's time zone handling.

CREATE TABLE courier_outbox (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    notification_id  TEXT    NOT NULL CHECK (length(notification_id) BETWEEN 1 AND 256),
    endpoint         TEXT    NOT NULL CHECK (length(endpoint) BETWEEN 1 AND 2048),
    payload          BYTEA   NOT NULL,
    payload_sha256   TEXT    NOT NULL CHECK (length(payload_sha256) = 64),
    profile          TEXT    NOT NULL,
    key_id           TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'leased', 'retry_wait', 'succeeded', 'failed', 'suppressed', 'quarantined')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    next_attempt_at  BIGINT  NOT NULL,
    deadline         BIGINT  NOT NULL,
    lease_owner      TEXT,
    lease_token      TEXT,
    leased_at        BIGINT,
    lease_expires_at BIGINT,
    last_error_code  TEXT,
    last_status      INTEGER,
    ack_sha256       TEXT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    UNIQUE (notification_id, endpoint),
    -- A leased row holds every lease column; no other row holds any.
    CHECK ((status = 'leased') = (lease_owner IS NOT NULL AND lease_token IS NOT NULL AND leased_at IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (status = 'leased' OR (lease_owner IS NULL AND lease_token IS NULL AND leased_at IS NULL AND lease_expires_at IS NULL)),
    CHECK (attempts <= max_attempts),
    CHECK (status NOT IN ('retry_wait', 'failed', 'quarantined', 'suppressed') OR last_error_code IS NOT NULL),
    CHECK ((status = 'succeeded') = (ack_sha256 IS NOT NULL))
);

-- Due rows in claim order, partial as in SQLite.
CREATE INDEX courier_outbox_due ON courier_outbox (priority, next_attempt_at, created_at, id)
    WHERE status IN ('pending', 'retry_wait');

CREATE INDEX courier_outbox_leases ON courier_outbox (lease_expires_at) WHERE status = 'leased';

CREATE INDEX courier_outbox_status ON courier_outbox (status, updated_at, id);

CREATE TABLE courier_attempts (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      BIGINT  NOT NULL,
    attempt          INTEGER NOT NULL CHECK (attempt >= 1),
    owner            TEXT    NOT NULL,
    leased_at        BIGINT  NOT NULL,
    lease_expires_at BIGINT  NOT NULL,
    finished_at      BIGINT  NOT NULL,
    duration_us      BIGINT  NOT NULL CHECK (duration_us >= 0),
    outcome          TEXT    NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'failed', 'suppressed', 'quarantined', 'lease_expired')),
    http_status      INTEGER,
    error_code       TEXT
);

CREATE INDEX courier_attempts_delivery ON courier_attempts (delivery_id, attempt);
CREATE INDEX courier_attempts_finished ON courier_attempts (finished_at);

CREATE TABLE courier_inbox (
    sender         TEXT   NOT NULL,
    dedupe_key     TEXT   NOT NULL,
    payload_sha256 TEXT   NOT NULL CHECK (length(payload_sha256) = 64),
    status         TEXT   NOT NULL CHECK (status IN ('processing', 'completed')),
    ack            BYTEA,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (sender, dedupe_key),
    CHECK ((status = 'completed') = (ack IS NOT NULL))
);

CREATE INDEX courier_inbox_updated ON courier_inbox (updated_at);

CREATE TABLE courier_replay (
    key_id     TEXT   NOT NULL,
    nonce      TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (key_id, nonce)
);

CREATE INDEX courier_replay_expires ON courier_replay (expires_at);

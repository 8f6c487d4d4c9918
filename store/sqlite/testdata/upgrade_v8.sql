-- A database courier 9ae8305 (migration 8) migrated and filled with rows in every
-- state, dumped; TestUpgradeFromMigration8 loads it.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE courier_schema (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
);
INSERT INTO courier_schema VALUES(1,1796353985068000);
INSERT INTO courier_schema VALUES(2,1796353985068000);
INSERT INTO courier_schema VALUES(3,1796353985068000);
INSERT INTO courier_schema VALUES(4,1796353985069006);
INSERT INTO courier_schema VALUES(5,1796353985070012);
INSERT INTO courier_schema VALUES(6,1796353985070012);
INSERT INTO courier_schema VALUES(7,1796353985071018);
INSERT INTO courier_schema VALUES(8,1796353985071984);
CREATE TABLE courier_outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- AUTOINCREMENT: ids never reused, so keyset pages stay stable
    notification_id  TEXT    NOT NULL CHECK (length(notification_id) BETWEEN 1 AND 256),
    endpoint         TEXT    NOT NULL CHECK (length(endpoint) BETWEEN 1 AND 2048),
    payload          BLOB    NOT NULL,
    payload_sha256   TEXT    NOT NULL CHECK (length(payload_sha256) = 64),
    profile          TEXT    NOT NULL,
    key_id           TEXT    NOT NULL DEFAULT '',
    status           TEXT    NOT NULL CHECK (status IN ('pending', 'leased', 'retry_wait', 'succeeded', 'failed', 'suppressed', 'quarantined')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    next_attempt_at  INTEGER NOT NULL,
    deadline         INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_token      TEXT,
    leased_at        INTEGER,
    lease_expires_at INTEGER,
    last_error_code  TEXT,
    last_status      INTEGER,
    ack_sha256       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL, payload_key_id TEXT NOT NULL DEFAULT '', subscription_id INTEGER, subscription_fingerprint TEXT, contract_sha256 TEXT CHECK (contract_sha256 IS NULL OR length(contract_sha256) = 64), event_type TEXT, dedupe_key TEXT CHECK (dedupe_key IS NULL OR length(dedupe_key) BETWEEN 1 AND 256), last_remote_code TEXT CHECK (last_remote_code IS NULL OR length(last_remote_code) BETWEEN 1 AND 128), trace_parent TEXT CHECK (trace_parent IS NULL OR length(trace_parent) BETWEEN 55 AND 512), trace_state TEXT CHECK (trace_state IS NULL OR (trace_parent IS NOT NULL AND length(trace_state) BETWEEN 1 AND 512)), ordering_key TEXT CHECK (ordering_key IS NULL OR length(ordering_key) BETWEEN 1 AND 256), hold TEXT CHECK (hold IS NULL OR (hold IN ('key', 'endpoint') AND status IN ('pending', 'retry_wait'))),
    UNIQUE (notification_id, endpoint),
    -- A leased row holds every lease column; no other row holds any.
    CHECK ((status = 'leased') = (lease_owner IS NOT NULL AND lease_token IS NOT NULL AND leased_at IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CHECK (status = 'leased' OR (lease_owner IS NULL AND lease_token IS NULL AND leased_at IS NULL AND lease_expires_at IS NULL)),
    -- Only a leased row counts an attempt it has not settled; no row exceeds its budget.
    CHECK (attempts <= max_attempts),
    -- Retrying and failed rows say why; succeeded rows carry the Ack digest (empty for profile none).
    CHECK (status NOT IN ('retry_wait', 'failed', 'quarantined', 'suppressed') OR last_error_code IS NOT NULL),
    CHECK ((status = 'succeeded') = (ack_sha256 IS NOT NULL))
);
INSERT INTO courier_outbox VALUES(1,'n-ok','https://a.example/hook',X'7b226964223a226e2d6f6b227d','c65c4daaaa2ee00ccdca7cdc820489719a7abf1f90c5b705805c9b92071ed771','courier','','succeeded',0,1,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,NULL,500,'',1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(2,'n-failed','https://a.example/hook',X'7b226964223a226e2d6661696c6564227d','a3f2fc15eecb3527998f7aeb88287eef1adc3bf292ff8c5f69a35a5a9fa2268a','courier','','failed',0,1,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,'receiver_rejected',500,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(3,'n-retry','https://a.example/hook',X'7b226964223a226e2d7265747279227d','fb27b3eca9d197764d9a9aa7038ca808151dd5365e71aadbd9574f3dc59c62c2','courier','','retry_wait',0,1,8,1796126460000000,1796385600000000,NULL,NULL,NULL,NULL,'receiver_unavailable',500,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(4,'n-cancel','https://a.example/hook',X'7b226964223a226e2d63616e63656c227d','48dddaa1920a469f0d8642662d8fc4978a03c1994bb9ba18a4aab6f1e3a806da','courier','','suppressed',0,0,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,'cancelled',NULL,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(5,'k1-1','https://b.example/hook',X'7b226964223a226b312d31227d','3f0afb6b8c41f38619380243c6e57983cff2ec22ac8c65461dce3cfa94a08f8b','courier','','failed',0,1,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,'receiver_rejected',500,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k1',NULL);
INSERT INTO courier_outbox VALUES(6,'k1-2','https://b.example/hook',X'7b226964223a226b312d32227d','f0f48b749267d35da111bee0626b9d6e116990dde235866c3bc95a2f28e36b4e','courier','','pending',0,0,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k1','key');
INSERT INTO courier_outbox VALUES(7,'k2-1','https://c.example/hook',X'7b226964223a226b322d31227d','ac4e3014022b8eca61781809bcf4304029f2480c5ec5af9cb927192e21f29875','courier','','leased',0,1,8,1796126400000000,1796385600000000,'w-gone','aeb58984d1ae9327cf1f4d25539bd4cb',1796126400000000,1796130000000000,NULL,NULL,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k2',NULL);
INSERT INTO courier_outbox VALUES(8,'k2-2','https://c.example/hook',X'7b226964223a226b322d32227d','37f43e826f1726b2fdd42c418af274afc43eb1e85a4891b54233fd98d8355b8c','courier','','pending',0,0,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k2','key');
INSERT INTO courier_outbox VALUES(9,'d-1','https://d.example/hook',X'7b226964223a22642d31227d','9a1bc9310f5cf3a6fb69dc0e07cd860e4648ed6846782912ef4900aa8197d790','courier','','leased',0,1,8,1796126400000000,1796385600000000,'w-d','0996fdccb20fd82c559f67b97d93f732',1796126400000000,1796130000000000,NULL,NULL,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(10,'d-2','https://d.example/hook',X'7b226964223a22642d32227d','8023af1a6308643ee8b48056eaa3187bb763798971add2dadee4d5ce7bf0083c','courier','','pending',0,0,8,1796126400000000,1796385600000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'endpoint');
INSERT INTO courier_outbox VALUES(11,'e-1','https://e.example/hook',X'7b226964223a22652d31227d','91efc6eb5ac3f6e06b6e76cf4776e2e57ad8a979111c7f2ecd2b52837957ac75','courier','','retry_wait',0,1,8,1796126460000000,1796385600000000,NULL,NULL,NULL,NULL,'receiver_unavailable',500,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(12,'e-2','https://e.example/hook',X'7b226964223a22652d32227d','a1e5763fe8f1f7587470c694109fffeda4f21285e3bc41b4dfb5e6fb09b31643','courier','','retry_wait',0,1,8,1796126460000000,1796385600000000,NULL,NULL,NULL,NULL,'receiver_unavailable',500,NULL,1796126400000000,1796126400000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(13,'f-1','https://f.example/hook',X'7b226964223a22662d31227d','1d083f030bce24b7ca50b2d8c0a959d10a48311a14fa8f1acbe41de3080d219e','courier','','pending',0,0,8,1796126520000000,1796385720000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126520000000,1796126520000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(14,'n-pending','https://a.example/hook',X'7b226964223a226e2d70656e64696e67227d','84ca0746796e756f112935343aa3e31759953137610eea8a767d0e0b92bfc51a','courier','','pending',0,0,8,1796126520000000,1796385720000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126520000000,1796126520000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
INSERT INTO courier_outbox VALUES(15,'k3-1','https://a.example/hook',X'7b226964223a226b332d31227d','214e4b610809e86ba594a008814ddf0b4119f96cc92ca81150376fc454420142','courier','','pending',0,0,8,1796126520000000,1796385720000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126520000000,1796126520000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k3',NULL);
INSERT INTO courier_outbox VALUES(16,'k3-2','https://a.example/hook',X'7b226964223a226b332d32227d','d61d0ddc6e40d93fcc819e9bdd81729baf1713a57ab7d849b296fe2a54ea64c9','courier','','pending',0,0,8,1796126520000000,1796385720000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126520000000,1796126520000000,'',NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,'k3','key');
INSERT INTO courier_outbox VALUES(17,'ev1:1','https://g.example/hook',X'7b2278223a317d','5041bf1f713df204784353e82f6a4a535931cb64f1f4b4a5aeaffcb720918b22','courier','k','pending',0,0,8,1796126520000000,1796385720000000,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1796126520000000,1796126520000000,'',1,'e359a0b2c263d127d9aa3201dd9de437a153a073f44163dfefa0cdfb6e4c1433',NULL,'order.created',NULL,NULL,NULL,NULL,NULL,NULL);
CREATE TABLE courier_attempts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id      INTEGER NOT NULL,
    attempt          INTEGER NOT NULL CHECK (attempt >= 1),
    owner            TEXT    NOT NULL,
    leased_at        INTEGER NOT NULL,
    lease_expires_at INTEGER NOT NULL,
    finished_at      INTEGER NOT NULL,
    duration_us      INTEGER NOT NULL CHECK (duration_us >= 0),
    outcome          TEXT    NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'failed', 'suppressed', 'quarantined', 'lease_expired')),
    http_status      INTEGER,
    error_code       TEXT
, remote_code TEXT CHECK (remote_code IS NULL OR length(remote_code) BETWEEN 1 AND 128));
INSERT INTO courier_attempts VALUES(1,1,1,'w1',1796126400000000,1796130000000000,1796126400000000,1000,'succeeded',500,NULL,NULL);
INSERT INTO courier_attempts VALUES(2,2,1,'w1',1796126400000000,1796130000000000,1796126400000000,1000,'failed',500,'receiver_rejected',NULL);
INSERT INTO courier_attempts VALUES(3,3,1,'w1',1796126400000000,1796130000000000,1796126400000000,1000,'retry',500,'receiver_unavailable',NULL);
INSERT INTO courier_attempts VALUES(4,5,1,'w1',1796126400000000,1796130000000000,1796126400000000,1000,'failed',500,'receiver_rejected',NULL);
INSERT INTO courier_attempts VALUES(5,11,1,'w-e',1796126400000000,1796130000000000,1796126400000000,1000,'retry',500,'receiver_unavailable',NULL);
INSERT INTO courier_attempts VALUES(6,12,1,'w-e',1796126400000000,1796130000000000,1796126400000000,1000,'retry',500,'receiver_unavailable',NULL);
CREATE TABLE courier_inbox (
    sender         TEXT    NOT NULL,
    dedupe_key     TEXT    NOT NULL,
    payload_sha256 TEXT    NOT NULL CHECK (length(payload_sha256) = 64),
    status         TEXT    NOT NULL CHECK (status IN ('processing', 'completed')),
    ack            BLOB,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    PRIMARY KEY (sender, dedupe_key),
    CHECK ((status = 'completed') = (ack IS NOT NULL))
);
INSERT INTO courier_inbox VALUES('sender-a','msg-1','2bfd14f43d17fc7cea24e0917a8879b4b2f880b8baeec1b9d90fbaad655e71bd','completed',X'7b22737461747573223a226f6b227d',1796126520000000,1796126520000000);
INSERT INTO courier_inbox VALUES('sender-a','msg-2','363379742f80b51bdb9206579af7754911543079b9399cb3fc315fb199f476e8','processing',NULL,1796126520000000,1796126520000000);
CREATE TABLE courier_replay (
    key_id     TEXT    NOT NULL,
    nonce      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (key_id, nonce)
);
INSERT INTO courier_replay VALUES('key-1','nonce-1',1796130120000000);
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
INSERT INTO courier_subscriptions VALUES(1,'t1','https://g.example/hook','order.created','hmac-sha256','k','courier','e359a0b2c263d127d9aa3201dd9de437a153a073f44163dfefa0cdfb6e4c1433',1,1796126520000000,1796126520000000);
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
INSERT INTO courier_endpoints VALUES('https://a.example/hook','closed',1,1796126400000000,NULL,'receiver_unavailable',1796126400000000);
INSERT INTO courier_endpoints VALUES('https://e.example/hook','open',2,1796126400000000,1796126430000000,'receiver_unavailable',1796126400000000);
INSERT INTO courier_endpoints VALUES('https://f.example/hook','disabled',0,NULL,NULL,'endpoint_disabled',1796126520000000);
CREATE TABLE courier_contracts (
    endpoint            TEXT    PRIMARY KEY CHECK (length(endpoint) BETWEEN 1 AND 2048),
    capabilities_sha256 TEXT    NOT NULL CHECK (length(capabilities_sha256) = 64),
    pinned_at           INTEGER NOT NULL
);
CREATE TABLE courier_endpoint_limits (
    endpoint      TEXT    PRIMARY KEY CHECK (length(endpoint) BETWEEN 1 AND 2048),
    max_in_flight INTEGER NOT NULL CHECK (max_in_flight >= 0),
    rate          REAL    NOT NULL CHECK (rate >= 0), -- requests per second
    burst         INTEGER NOT NULL CHECK (burst >= 0),
    tokens        REAL    NOT NULL,                   -- the bucket at tokens_at
    tokens_at     INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
INSERT INTO courier_endpoint_limits VALUES('https://d.example/hook',1,5.0,2,1.0,1796126400000000,1796126400000000);
CREATE TABLE courier_ordering_keys (
    endpoint     TEXT    NOT NULL,
    ordering_key TEXT    NOT NULL,
    head_id      INTEGER NOT NULL,
    blocked_at   INTEGER,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (endpoint, ordering_key)
);
INSERT INTO courier_ordering_keys VALUES('https://b.example/hook','k1',5,1796126400000000,1796126400000000);
INSERT INTO courier_ordering_keys VALUES('https://c.example/hook','k2',7,NULL,1796126400000000);
INSERT INTO courier_ordering_keys VALUES('https://a.example/hook','k3',15,NULL,1796126520000000);
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence VALUES('courier_outbox',17);
INSERT INTO sqlite_sequence VALUES('courier_attempts',6);
INSERT INTO sqlite_sequence VALUES('courier_subscriptions',1);
CREATE INDEX courier_outbox_leases ON courier_outbox (lease_expires_at) WHERE status = 'leased';
CREATE INDEX courier_outbox_status ON courier_outbox (status, updated_at, id);
CREATE INDEX courier_attempts_delivery ON courier_attempts (delivery_id, attempt);
CREATE INDEX courier_attempts_finished ON courier_attempts (finished_at);
CREATE INDEX courier_inbox_updated ON courier_inbox (updated_at);
CREATE INDEX courier_replay_expires ON courier_replay (expires_at);
CREATE INDEX courier_subscriptions_tenant ON courier_subscriptions (tenant, active);
CREATE INDEX courier_outbox_contract ON courier_outbox (endpoint, contract_sha256)
    WHERE contract_sha256 IS NOT NULL AND status IN ('pending', 'retry_wait', 'leased');
CREATE UNIQUE INDEX courier_outbox_dedupe ON courier_outbox (endpoint, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE INDEX courier_outbox_operations ON courier_outbox (event_type, status) WHERE profile = 'command';
CREATE INDEX courier_outbox_due ON courier_outbox (priority, next_attempt_at, created_at, id)
    WHERE status IN ('pending', 'retry_wait') AND hold IS NULL;
CREATE INDEX courier_outbox_parked ON courier_outbox (endpoint, priority, next_attempt_at, created_at, id)
    WHERE hold = 'endpoint';
CREATE INDEX courier_outbox_waiting ON courier_outbox (endpoint, ordering_key, id)
    WHERE hold = 'key';
CREATE INDEX courier_outbox_in_flight ON courier_outbox (endpoint, lease_owner)
    WHERE status = 'leased';
CREATE INDEX courier_ordering_keys_blocked ON courier_ordering_keys (endpoint) WHERE blocked_at IS NOT NULL;
COMMIT;

-- courier's queries for SQLite: the subscriptions registry.
-- store/postgres/sql/queries/subscriptions.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: subscription_insert
-- auth_mode is a signing scheme's name subscriptions once carried, kept
-- only for the fingerprints computed with it: a new one has none.
INSERT INTO courier_subscriptions (tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at)
VALUES (:tenant, :endpoint, :event_types, '', :key_id, :profile, :fingerprint, :active, :now, :now)
RETURNING id;

-- name: subscription_update
-- The tenant never changes: a subscription of another tenant is not
-- updated (the store refuses that before). Nor does auth_mode, which the
-- store read to compute the fingerprint.
UPDATE courier_subscriptions SET endpoint = :endpoint, event_types = :event_types,
    key_id = :key_id, profile = :profile, fingerprint = :fingerprint, active = :active, updated_at = :now
WHERE id = :id AND tenant = :tenant;

-- name: subscription_delete
-- Of its tenant only: when none is deleted, the store reads whether it
-- was missing or another tenant's. Its deliveries keep its id: the claim
-- of one finds no subscription and suppresses it. The id is not given
-- again (AUTOINCREMENT in SQLite, an identity column in PostgreSQL).
DELETE FROM courier_subscriptions WHERE id = :id AND tenant = :tenant;

-- name: subscription_get
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE id = :id;

-- name: subscription_list
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE tenant = :tenant ORDER BY id;

-- name: subscription_matching
-- SQLite stores booleans as 0/1; the event-type filter is applied in Go.
SELECT id, tenant, endpoint, event_types, auth_mode, key_id, profile, fingerprint, active, created_at, updated_at
FROM courier_subscriptions WHERE tenant = :tenant AND active = 1 ORDER BY id;

-- name: subscription_state
-- What sending a published delivery depends on, read at its claim.
SELECT fingerprint, active, event_types FROM courier_subscriptions WHERE id = :id;

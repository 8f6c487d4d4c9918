-- Migration 2: payloads may be stored encrypted (AES-256-GCM). The column
-- names the key that sealed the row; '' means the payload is plaintext.
ALTER TABLE courier_outbox ADD COLUMN payload_key_id TEXT NOT NULL DEFAULT '';

-- A database courier 9ae8305 (migration 8) migrated and filled with rows in every
-- state, dumped; TestUpgradeFromMigration8 loads it.

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

CREATE TABLE public.courier_attempts (
    id bigint NOT NULL,
    delivery_id bigint NOT NULL,
    attempt integer NOT NULL,
    owner text NOT NULL,
    leased_at bigint NOT NULL,
    lease_expires_at bigint NOT NULL,
    finished_at bigint NOT NULL,
    duration_us bigint NOT NULL,
    outcome text NOT NULL,
    http_status integer,
    error_code text,
    remote_code text,
    CONSTRAINT courier_attempts_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT courier_attempts_duration_us_check CHECK ((duration_us >= 0)),
    CONSTRAINT courier_attempts_outcome_check CHECK ((outcome = ANY (ARRAY['succeeded'::text, 'retry'::text, 'failed'::text, 'suppressed'::text, 'quarantined'::text, 'lease_expired'::text]))),
    CONSTRAINT courier_attempts_remote_code_check CHECK (((remote_code IS NULL) OR ((length(remote_code) >= 1) AND (length(remote_code) <= 128))))
);

ALTER TABLE public.courier_attempts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.courier_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.courier_contracts (
    endpoint text NOT NULL,
    capabilities_sha256 text NOT NULL,
    pinned_at bigint NOT NULL,
    CONSTRAINT courier_contracts_capabilities_sha256_check CHECK ((length(capabilities_sha256) = 64)),
    CONSTRAINT courier_contracts_endpoint_check CHECK (((length(endpoint) >= 1) AND (length(endpoint) <= 2048)))
);

CREATE TABLE public.courier_endpoint_limits (
    endpoint text NOT NULL,
    max_in_flight integer NOT NULL,
    rate double precision NOT NULL,
    burst integer NOT NULL,
    tokens double precision NOT NULL,
    tokens_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    CONSTRAINT courier_endpoint_limits_burst_check CHECK ((burst >= 0)),
    CONSTRAINT courier_endpoint_limits_endpoint_check CHECK (((length(endpoint) >= 1) AND (length(endpoint) <= 2048))),
    CONSTRAINT courier_endpoint_limits_max_in_flight_check CHECK ((max_in_flight >= 0)),
    CONSTRAINT courier_endpoint_limits_rate_check CHECK ((rate >= (0)::double precision))
);

CREATE TABLE public.courier_endpoints (
    endpoint text NOT NULL,
    state text NOT NULL,
    consecutive_failures integer NOT NULL,
    failing_since bigint,
    open_until bigint,
    reason text,
    updated_at bigint NOT NULL,
    CONSTRAINT courier_endpoints_check CHECK (((state = 'closed'::text) OR (reason IS NOT NULL))),
    CONSTRAINT courier_endpoints_check1 CHECK (((state <> ALL (ARRAY['open'::text, 'half_open'::text])) OR (open_until IS NOT NULL))),
    CONSTRAINT courier_endpoints_consecutive_failures_check CHECK ((consecutive_failures >= 0)),
    CONSTRAINT courier_endpoints_state_check CHECK ((state = ANY (ARRAY['closed'::text, 'open'::text, 'half_open'::text, 'disabled'::text])))
);

CREATE TABLE public.courier_inbox (
    sender text NOT NULL,
    dedupe_key text NOT NULL,
    payload_sha256 text NOT NULL,
    status text NOT NULL,
    ack bytea,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    CONSTRAINT courier_inbox_check CHECK (((status = 'completed'::text) = (ack IS NOT NULL))),
    CONSTRAINT courier_inbox_payload_sha256_check CHECK ((length(payload_sha256) = 64)),
    CONSTRAINT courier_inbox_status_check CHECK ((status = ANY (ARRAY['processing'::text, 'completed'::text])))
);

CREATE TABLE public.courier_ordering_keys (
    endpoint text NOT NULL,
    ordering_key text NOT NULL,
    head_id bigint NOT NULL,
    blocked_at bigint,
    updated_at bigint NOT NULL
);

CREATE TABLE public.courier_outbox (
    id bigint NOT NULL,
    notification_id text NOT NULL,
    endpoint text NOT NULL,
    payload bytea NOT NULL,
    payload_sha256 text NOT NULL,
    profile text NOT NULL,
    key_id text DEFAULT ''::text NOT NULL,
    status text NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    max_attempts integer NOT NULL,
    next_attempt_at bigint NOT NULL,
    deadline bigint NOT NULL,
    lease_owner text,
    lease_token text,
    leased_at bigint,
    lease_expires_at bigint,
    last_error_code text,
    last_status integer,
    ack_sha256 text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    payload_key_id text DEFAULT ''::text NOT NULL,
    subscription_id bigint,
    subscription_fingerprint text,
    contract_sha256 text,
    event_type text,
    dedupe_key text,
    last_remote_code text,
    trace_parent text,
    trace_state text,
    ordering_key text,
    hold text,
    CONSTRAINT courier_outbox_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT courier_outbox_check CHECK (((status = 'leased'::text) = ((lease_owner IS NOT NULL) AND (lease_token IS NOT NULL) AND (leased_at IS NOT NULL) AND (lease_expires_at IS NOT NULL)))),
    CONSTRAINT courier_outbox_check1 CHECK (((status = 'leased'::text) OR ((lease_owner IS NULL) AND (lease_token IS NULL) AND (leased_at IS NULL) AND (lease_expires_at IS NULL)))),
    CONSTRAINT courier_outbox_check2 CHECK ((attempts <= max_attempts)),
    CONSTRAINT courier_outbox_check3 CHECK (((status <> ALL (ARRAY['retry_wait'::text, 'failed'::text, 'quarantined'::text, 'suppressed'::text])) OR (last_error_code IS NOT NULL))),
    CONSTRAINT courier_outbox_check4 CHECK (((status = 'succeeded'::text) = (ack_sha256 IS NOT NULL))),
    CONSTRAINT courier_outbox_check5 CHECK (((trace_state IS NULL) OR ((trace_parent IS NOT NULL) AND ((length(trace_state) >= 1) AND (length(trace_state) <= 512))))),
    CONSTRAINT courier_outbox_contract_sha256_check CHECK (((contract_sha256 IS NULL) OR (length(contract_sha256) = 64))),
    CONSTRAINT courier_outbox_dedupe_key_check CHECK (((dedupe_key IS NULL) OR ((length(dedupe_key) >= 1) AND (length(dedupe_key) <= 256)))),
    CONSTRAINT courier_outbox_endpoint_check CHECK (((length(endpoint) >= 1) AND (length(endpoint) <= 2048))),
    CONSTRAINT courier_outbox_hold_check CHECK (((hold IS NULL) OR (hold = ANY (ARRAY['key'::text, 'endpoint'::text])))),
    CONSTRAINT courier_outbox_hold_unfinished CHECK (((hold IS NULL) OR (status = ANY (ARRAY['pending'::text, 'retry_wait'::text])))),
    CONSTRAINT courier_outbox_last_remote_code_check CHECK (((last_remote_code IS NULL) OR ((length(last_remote_code) >= 1) AND (length(last_remote_code) <= 128)))),
    CONSTRAINT courier_outbox_max_attempts_check CHECK (((max_attempts >= 1) AND (max_attempts <= 1000))),
    CONSTRAINT courier_outbox_notification_id_check CHECK (((length(notification_id) >= 1) AND (length(notification_id) <= 256))),
    CONSTRAINT courier_outbox_ordering_key_check CHECK (((ordering_key IS NULL) OR ((length(ordering_key) >= 1) AND (length(ordering_key) <= 256)))),
    CONSTRAINT courier_outbox_payload_sha256_check CHECK ((length(payload_sha256) = 64)),
    CONSTRAINT courier_outbox_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'leased'::text, 'retry_wait'::text, 'succeeded'::text, 'failed'::text, 'suppressed'::text, 'quarantined'::text]))),
    CONSTRAINT courier_outbox_trace_parent_check CHECK (((trace_parent IS NULL) OR ((length(trace_parent) >= 55) AND (length(trace_parent) <= 512))))
);

ALTER TABLE public.courier_outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.courier_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.courier_replay (
    key_id text NOT NULL,
    nonce text NOT NULL,
    expires_at bigint NOT NULL
);

CREATE TABLE public.courier_schema (
    version integer NOT NULL,
    applied_at bigint NOT NULL
);

CREATE TABLE public.courier_subscriptions (
    id bigint NOT NULL,
    tenant text NOT NULL,
    endpoint text NOT NULL,
    event_types text NOT NULL,
    auth_mode text NOT NULL,
    key_id text NOT NULL,
    profile text NOT NULL,
    fingerprint text NOT NULL,
    active boolean NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    CONSTRAINT courier_subscriptions_endpoint_check CHECK (((length(endpoint) >= 1) AND (length(endpoint) <= 2048))),
    CONSTRAINT courier_subscriptions_fingerprint_check CHECK ((length(fingerprint) = 64)),
    CONSTRAINT courier_subscriptions_tenant_check CHECK (((length(tenant) >= 1) AND (length(tenant) <= 256)))
);

ALTER TABLE public.courier_subscriptions ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.courier_subscriptions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

INSERT INTO public.courier_attempts OVERRIDING SYSTEM VALUE VALUES (1, 1, 1, 'w1', 1796126400000000, 1796130000000000, 1796126400000000, 1000, 'succeeded', 500, NULL, NULL);
INSERT INTO public.courier_attempts OVERRIDING SYSTEM VALUE VALUES (2, 2, 1, 'w1', 1796126400000000, 1796130000000000, 1796126400000000, 1000, 'failed', 500, 'receiver_rejected', NULL);
INSERT INTO public.courier_attempts OVERRIDING SYSTEM VALUE VALUES (3, 3, 1, 'w1', 1796126400000000, 1796130000000000, 1796126400000000, 1000, 'retry', 500, 'receiver_unavailable', NULL);
INSERT INTO public.courier_attempts OVERRIDING SYSTEM VALUE VALUES (4, 5, 1, 'w1', 1796126400000000, 1796130000000000, 1796126400000000, 1000, 'failed', 500, 'receiver_rejected', NULL);
INSERT INTO public.courier_attempts OVERRIDING SYSTEM VALUE VALUES (5, 11, 1, 'w-e', 1796126400000000, 1796130000000000, 1796126400000000, 1000, 'retry', 500, 'receiver_unavailable', NULL);
INSERT INTO public.courier_attempts OVERRIDING SYSTEM VALUE VALUES (6, 12, 1, 'w-e', 1796126400000000, 1796130000000000, 1796126400000000, 1000, 'retry', 500, 'receiver_unavailable', NULL);

INSERT INTO public.courier_endpoint_limits VALUES ('https://d.example/hook', 1, 5, 2, 1, 1796126400000000, 1796126400000000);

INSERT INTO public.courier_endpoints VALUES ('https://a.example/hook', 'closed', 1, 1796126400000000, NULL, 'receiver_unavailable', 1796126400000000);
INSERT INTO public.courier_endpoints VALUES ('https://e.example/hook', 'open', 2, 1796126400000000, 1796126430000000, 'receiver_unavailable', 1796126400000000);
INSERT INTO public.courier_endpoints VALUES ('https://f.example/hook', 'disabled', 0, NULL, NULL, 'endpoint_disabled', 1796126520000000);

INSERT INTO public.courier_inbox VALUES ('sender-a', 'msg-1', '2bfd14f43d17fc7cea24e0917a8879b4b2f880b8baeec1b9d90fbaad655e71bd', 'completed', '\x7b22737461747573223a226f6b227d', 1796126520000000, 1796126520000000);
INSERT INTO public.courier_inbox VALUES ('sender-a', 'msg-2', '363379742f80b51bdb9206579af7754911543079b9399cb3fc315fb199f476e8', 'processing', NULL, 1796126520000000, 1796126520000000);

INSERT INTO public.courier_ordering_keys VALUES ('https://b.example/hook', 'k1', 5, 1796126400000000, 1796126400000000);
INSERT INTO public.courier_ordering_keys VALUES ('https://c.example/hook', 'k2', 7, NULL, 1796126400000000);
INSERT INTO public.courier_ordering_keys VALUES ('https://a.example/hook', 'k3', 15, NULL, 1796126520000000);

INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (1, 'n-ok', 'https://a.example/hook', '\x7b226964223a226e2d6f6b227d', 'c65c4daaaa2ee00ccdca7cdc820489719a7abf1f90c5b705805c9b92071ed771', 'courier', '', 'succeeded', 0, 1, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, NULL, 500, '', 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (2, 'n-failed', 'https://a.example/hook', '\x7b226964223a226e2d6661696c6564227d', 'a3f2fc15eecb3527998f7aeb88287eef1adc3bf292ff8c5f69a35a5a9fa2268a', 'courier', '', 'failed', 0, 1, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, 'receiver_rejected', 500, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (3, 'n-retry', 'https://a.example/hook', '\x7b226964223a226e2d7265747279227d', 'fb27b3eca9d197764d9a9aa7038ca808151dd5365e71aadbd9574f3dc59c62c2', 'courier', '', 'retry_wait', 0, 1, 8, 1796126460000000, 1796385600000000, NULL, NULL, NULL, NULL, 'receiver_unavailable', 500, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (4, 'n-cancel', 'https://a.example/hook', '\x7b226964223a226e2d63616e63656c227d', '48dddaa1920a469f0d8642662d8fc4978a03c1994bb9ba18a4aab6f1e3a806da', 'courier', '', 'suppressed', 0, 0, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, 'cancelled', NULL, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (6, 'k1-2', 'https://b.example/hook', '\x7b226964223a226b312d32227d', 'f0f48b749267d35da111bee0626b9d6e116990dde235866c3bc95a2f28e36b4e', 'courier', '', 'pending', 0, 0, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'k1', 'key');
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (5, 'k1-1', 'https://b.example/hook', '\x7b226964223a226b312d31227d', '3f0afb6b8c41f38619380243c6e57983cff2ec22ac8c65461dce3cfa94a08f8b', 'courier', '', 'failed', 0, 1, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, 'receiver_rejected', 500, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'k1', NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (8, 'k2-2', 'https://c.example/hook', '\x7b226964223a226b322d32227d', '37f43e826f1726b2fdd42c418af274afc43eb1e85a4891b54233fd98d8355b8c', 'courier', '', 'pending', 0, 0, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'k2', 'key');
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (7, 'k2-1', 'https://c.example/hook', '\x7b226964223a226b322d31227d', 'ac4e3014022b8eca61781809bcf4304029f2480c5ec5af9cb927192e21f29875', 'courier', '', 'leased', 0, 1, 8, 1796126400000000, 1796385600000000, 'w-gone', '10718e60f20c4cf1b9b756e6ad40280c', 1796126400000000, 1796130000000000, NULL, NULL, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'k2', NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (9, 'd-1', 'https://d.example/hook', '\x7b226964223a22642d31227d', '9a1bc9310f5cf3a6fb69dc0e07cd860e4648ed6846782912ef4900aa8197d790', 'courier', '', 'leased', 0, 1, 8, 1796126400000000, 1796385600000000, 'w-d', '5a7a330357934f76b805412cf655d204', 1796126400000000, 1796130000000000, NULL, NULL, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (10, 'd-2', 'https://d.example/hook', '\x7b226964223a22642d32227d', '8023af1a6308643ee8b48056eaa3187bb763798971add2dadee4d5ce7bf0083c', 'courier', '', 'pending', 0, 0, 8, 1796126400000000, 1796385600000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'endpoint');
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (11, 'e-1', 'https://e.example/hook', '\x7b226964223a22652d31227d', '91efc6eb5ac3f6e06b6e76cf4776e2e57ad8a979111c7f2ecd2b52837957ac75', 'courier', '', 'retry_wait', 0, 1, 8, 1796126460000000, 1796385600000000, NULL, NULL, NULL, NULL, 'receiver_unavailable', 500, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (12, 'e-2', 'https://e.example/hook', '\x7b226964223a22652d32227d', 'a1e5763fe8f1f7587470c694109fffeda4f21285e3bc41b4dfb5e6fb09b31643', 'courier', '', 'retry_wait', 0, 1, 8, 1796126460000000, 1796385600000000, NULL, NULL, NULL, NULL, 'receiver_unavailable', 500, NULL, 1796126400000000, 1796126400000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (13, 'f-1', 'https://f.example/hook', '\x7b226964223a22662d31227d', '1d083f030bce24b7ca50b2d8c0a959d10a48311a14fa8f1acbe41de3080d219e', 'courier', '', 'pending', 0, 0, 8, 1796126520000000, 1796385720000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126520000000, 1796126520000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (14, 'n-pending', 'https://a.example/hook', '\x7b226964223a226e2d70656e64696e67227d', '84ca0746796e756f112935343aa3e31759953137610eea8a767d0e0b92bfc51a', 'courier', '', 'pending', 0, 0, 8, 1796126520000000, 1796385720000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126520000000, 1796126520000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (15, 'k3-1', 'https://a.example/hook', '\x7b226964223a226b332d31227d', '214e4b610809e86ba594a008814ddf0b4119f96cc92ca81150376fc454420142', 'courier', '', 'pending', 0, 0, 8, 1796126520000000, 1796385720000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126520000000, 1796126520000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'k3', NULL);
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (16, 'k3-2', 'https://a.example/hook', '\x7b226964223a226b332d32227d', 'd61d0ddc6e40d93fcc819e9bdd81729baf1713a57ab7d849b296fe2a54ea64c9', 'courier', '', 'pending', 0, 0, 8, 1796126520000000, 1796385720000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126520000000, 1796126520000000, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'k3', 'key');
INSERT INTO public.courier_outbox OVERRIDING SYSTEM VALUE VALUES (17, 'ev1:1', 'https://g.example/hook', '\x7b2278223a317d', '5041bf1f713df204784353e82f6a4a535931cb64f1f4b4a5aeaffcb720918b22', 'courier', 'k', 'pending', 0, 0, 8, 1796126520000000, 1796385720000000, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1796126520000000, 1796126520000000, '', 1, 'e359a0b2c263d127d9aa3201dd9de437a153a073f44163dfefa0cdfb6e4c1433', NULL, 'order.created', NULL, NULL, NULL, NULL, NULL, NULL);

INSERT INTO public.courier_replay VALUES ('key-1', 'nonce-1', 1796130120000000);

INSERT INTO public.courier_schema VALUES (1, 1796353988670154);
INSERT INTO public.courier_schema VALUES (2, 1796353988671099);
INSERT INTO public.courier_schema VALUES (3, 1796353988674452);
INSERT INTO public.courier_schema VALUES (4, 1796353988676570);
INSERT INTO public.courier_schema VALUES (5, 1796353988677874);
INSERT INTO public.courier_schema VALUES (6, 1796353988678414);
INSERT INTO public.courier_schema VALUES (7, 1796353988679031);
INSERT INTO public.courier_schema VALUES (8, 1796353988684560);

INSERT INTO public.courier_subscriptions OVERRIDING SYSTEM VALUE VALUES (1, 't1', 'https://g.example/hook', 'order.created', 'hmac-sha256', 'k', 'courier', 'e359a0b2c263d127d9aa3201dd9de437a153a073f44163dfefa0cdfb6e4c1433', true, 1796126520000000, 1796126520000000);

SELECT pg_catalog.setval('public.courier_attempts_id_seq', 6, true);

SELECT pg_catalog.setval('public.courier_outbox_id_seq', 17, true);

SELECT pg_catalog.setval('public.courier_subscriptions_id_seq', 1, true);

ALTER TABLE ONLY public.courier_attempts
    ADD CONSTRAINT courier_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.courier_contracts
    ADD CONSTRAINT courier_contracts_pkey PRIMARY KEY (endpoint);

ALTER TABLE ONLY public.courier_endpoint_limits
    ADD CONSTRAINT courier_endpoint_limits_pkey PRIMARY KEY (endpoint);

ALTER TABLE ONLY public.courier_endpoints
    ADD CONSTRAINT courier_endpoints_pkey PRIMARY KEY (endpoint);

ALTER TABLE ONLY public.courier_inbox
    ADD CONSTRAINT courier_inbox_pkey PRIMARY KEY (sender, dedupe_key);

ALTER TABLE ONLY public.courier_ordering_keys
    ADD CONSTRAINT courier_ordering_keys_pkey PRIMARY KEY (endpoint, ordering_key);

ALTER TABLE ONLY public.courier_outbox
    ADD CONSTRAINT courier_outbox_notification_id_endpoint_key UNIQUE (notification_id, endpoint);

ALTER TABLE ONLY public.courier_outbox
    ADD CONSTRAINT courier_outbox_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.courier_replay
    ADD CONSTRAINT courier_replay_pkey PRIMARY KEY (key_id, nonce);

ALTER TABLE ONLY public.courier_schema
    ADD CONSTRAINT courier_schema_pkey PRIMARY KEY (version);

ALTER TABLE ONLY public.courier_subscriptions
    ADD CONSTRAINT courier_subscriptions_pkey PRIMARY KEY (id);

CREATE INDEX courier_attempts_delivery ON public.courier_attempts USING btree (delivery_id, attempt);

CREATE INDEX courier_attempts_finished ON public.courier_attempts USING btree (finished_at);

CREATE INDEX courier_inbox_updated ON public.courier_inbox USING btree (updated_at);

CREATE INDEX courier_ordering_keys_blocked ON public.courier_ordering_keys USING btree (endpoint) WHERE (blocked_at IS NOT NULL);

CREATE INDEX courier_outbox_contract ON public.courier_outbox USING btree (endpoint, contract_sha256) WHERE ((contract_sha256 IS NOT NULL) AND (status = ANY (ARRAY['pending'::text, 'retry_wait'::text, 'leased'::text])));

CREATE UNIQUE INDEX courier_outbox_dedupe ON public.courier_outbox USING btree (endpoint, dedupe_key) WHERE (dedupe_key IS NOT NULL);

CREATE INDEX courier_outbox_due ON public.courier_outbox USING btree (priority, next_attempt_at, created_at, id) WHERE ((status = ANY (ARRAY['pending'::text, 'retry_wait'::text])) AND (hold IS NULL));

CREATE INDEX courier_outbox_in_flight ON public.courier_outbox USING btree (endpoint, lease_owner) WHERE (status = 'leased'::text);

CREATE INDEX courier_outbox_leases ON public.courier_outbox USING btree (lease_expires_at) WHERE (status = 'leased'::text);

CREATE INDEX courier_outbox_operations ON public.courier_outbox USING btree (event_type, status) WHERE (profile = 'command'::text);

CREATE INDEX courier_outbox_parked ON public.courier_outbox USING btree (endpoint, priority, next_attempt_at, created_at, id) WHERE (hold = 'endpoint'::text);

CREATE INDEX courier_outbox_status ON public.courier_outbox USING btree (status, updated_at, id);

CREATE INDEX courier_outbox_waiting ON public.courier_outbox USING btree (endpoint, ordering_key, id) WHERE (hold = 'key'::text);

CREATE INDEX courier_replay_expires ON public.courier_replay USING btree (expires_at);

CREATE INDEX courier_subscriptions_tenant ON public.courier_subscriptions USING btree (tenant, active);

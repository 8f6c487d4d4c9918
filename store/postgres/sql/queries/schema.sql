-- courier's queries for PostgreSQL: the schema version table and the schema guard.
-- store/sqlite/sql/queries/schema.sql has the same names and parameters; where the
-- SQL differs, both files say why. Parameters are :name; the store binds them
-- by name.

-- name: schema_version
SELECT COALESCE(MAX(version), 0) FROM courier_schema;

-- name: schema_required
-- How many migrations a courier must know to run on this schema: a newer
-- courier's migration that an older one must not run on (it changes what
-- a column the older one uses means, or removes one) records, besides its
-- version, a row whose version is the negated count. Migrations that only
-- add record none: every courier since the first one runs on them.
SELECT COALESCE(MAX(-version), 0) FROM courier_schema WHERE version < 0;

-- name: schema_create
-- Exported at the head of Migrations' first file: never change it.
CREATE TABLE IF NOT EXISTS courier_schema (
    version    INTEGER PRIMARY KEY,
    applied_at BIGINT NOT NULL
);

-- name: schema_record
-- Stamped by the database's clock, in unix microseconds. The migration files
-- Migrations exports end with this statement, its :version written in: like
-- schema_create, which the first of them begins with, it must never change.
-- PostgreSQL: extract(epoch) in place of julianday.
INSERT INTO courier_schema (version, applied_at) VALUES (:version, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);

-- name: schema_columns
-- PostgreSQL: the catalog in place of pragma_table_info, as
-- schema_fingerprint reads it. Not information_schema.columns, which
-- lists only the columns the role has a privilege on: a role granted only
-- the tables it uses would find the others missing, and take its grants
-- for an altered schema.
SELECT c.relname::text AS table_name, a.attname::text AS column_name
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = current_schema())
    AND c.relkind IN ('r', 'p')
    AND c.relname LIKE 'courier\_%' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum;

-- name: schema_objects
-- The indexes and triggers on courier's tables, each its kind and name,
-- which the schema guard looks for by name. PostgreSQL: the catalog, as
-- schema_columns reads it, in place of sqlite_master; the triggers a
-- constraint makes for itself (tgisinternal) are left out.
SELECT c.relname::text AS table_name, 'index ' || i.relname AS object
FROM pg_catalog.pg_index AS x
JOIN pg_catalog.pg_class AS c ON c.oid = x.indrelid
JOIN pg_catalog.pg_class AS i ON i.oid = x.indexrelid
WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = current_schema())
    AND c.relname LIKE 'courier\_%'
UNION ALL
SELECT c.relname::text, 'trigger ' || g.tgname
FROM pg_catalog.pg_trigger AS g
JOIN pg_catalog.pg_class AS c ON c.oid = g.tgrelid
WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = current_schema())
    AND c.relname LIKE 'courier\_%' AND NOT g.tgisinternal;

-- name: schema_isolation
-- The first statement of Migrate's own transaction: READ COMMITTED,
-- whatever the role's or database's default, so that a second migrating
-- process, once schema_lock lets it in, reads the version the first
-- committed (under REPEATABLE READ its snapshot predates the wait, and it
-- would apply the first's migrations again).
SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: schema_lock_wait
-- Migrate's own transaction, before its first lock: how long each
-- statement may wait for one. An ALTER TABLE waits for ACCESS EXCLUSIVE
-- behind every transaction that touched the table (an application's that
-- enqueued and goes on with its own work), and every enqueue, claim and
-- settle after it waits behind the ALTER: without a bound the outbox stops
-- for as long as the longest of them runs. Migrate gives up at the bound,
-- rolls back so the others go on, and tries again (store.Migrate). A
-- lock_timeout the connection already has (set for the role, the
-- database, or in the URL) is kept.
SELECT set_config('lock_timeout', '1s', true) WHERE current_setting('lock_timeout') IN ('0', '0ms');

-- name: schema_lock
-- Two processes migrating at once: the second waits for the first.
SELECT pg_advisory_xact_lock(7212345001);

-- name: schema_search
-- Where courier's version table is, as the connection's search_path finds
-- it: Migrate's look before it creates anything, and Open's once it found
-- no courier tables, in one query. A row for each relation of that name in
-- a schema of the search_path (current_schemas: those that exist and the
-- role may use), in its order: reached, is_first when the schema is the
-- first (current_schema(), where Migrate creates courier's tables and
-- unqualified names look first), is_table unless the relation is another
-- kind (a view). The store reads from them:
--   - present: the first schema has the table. Migrate runs schema_create
--     only when it has not: PostgreSQL checks CREATE TABLE IF NOT EXISTS
--     for the right to create in the schema before it looks for the table,
--     and an application's role granted courier's tables but not that
--     right would fail a Migrate with nothing to do.
--   - elsewhere: a later schema has the table while the first has no
--     relation of its name. New, empty tables created in the first would
--     hide the others, and the deliveries they hold, from every query: an
--     operator who put a new schema first after courier's tables landed
--     in public. Migrate refuses.
-- Then, only when no schema of the search_path has the table, a row for
-- each of up to ten other schemas that have it, by name (not reached):
-- a database restored from pg_dump into a new one (which brings no ALTER
-- ROLE … IN DATABASE … SET search_path), a URL that lost its search_path,
-- or a schema the search_path names but the role may not use (no USAGE),
-- which PostgreSQL leaves out of the search_path without a word. A
-- migration would create new, empty tables in the first schema of the
-- search_path instead, which would take the enqueues of every connection
-- with that search_path, and the deliveries waiting in the others would
-- never be seen: Migrate refuses, and Open's schema_outdated names them.
-- in_path says whether the search_path names the schema, read from the
-- setting as PostgreSQL splits it (commas outside double quotes, "$user"
-- the role's own name); usable, whether the role may use it; first_schema
-- is the first schema of the search_path, where Migrate would create the
-- tables ('' when none exists that the role may use). PostgreSQL only.
WITH found AS (
    SELECT n.oid, n.nspname, c.relkind IN ('r', 'p') AS is_table,
        array_position(current_schemas(false), n.nspname) AS path_position
    FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.relname = 'courier_schema'
)
SELECT f.nspname::text AS schema_name, current_setting('search_path') AS search_path,
    f.path_position IS NOT NULL AS reached,
    COALESCE(f.nspname = current_schema(), false) AS is_first,
    f.is_table,
    COALESCE(f.nspname IN (
        SELECT CASE WHEN btrim(e) IN ('', '""') THEN NULL
            WHEN btrim(e) IN ('$user', '"$user"') THEN current_user::text
            ELSE (parse_ident(btrim(e)))[1] END
        FROM regexp_split_to_table(current_setting('search_path'), ',(?=(?:[^"]*"[^"]*")*[^"]*$)') AS e
    ), false) AS in_path, -- an empty element is NULL: not found, rather than unknown
    has_schema_privilege(f.oid, 'USAGE') AS usable,
    COALESCE(current_schema()::text, '') AS first_schema
FROM (
    SELECT * FROM found WHERE path_position IS NOT NULL
    UNION ALL
    (SELECT * FROM found
    WHERE path_position IS NULL AND is_table
        AND NOT EXISTS (SELECT 1 FROM found AS r WHERE r.path_position IS NOT NULL AND r.is_table)
    ORDER BY nspname
    LIMIT 10)
) AS f
ORDER BY f.path_position, f.nspname;

-- name: schema_analyze
-- Tables the claim filters by are small and rarely written, so autovacuum
-- may never analyze them; without statistics the planner guesses them large
-- and abandons the due index.
ANALYZE courier_endpoints, courier_contracts;

-- name: schema_fingerprint
-- PostgreSQL has no cheap schema counter: the column list of courier's
-- tables from the catalog (index lookups on pg_class and pg_attribute),
-- which claims read at most once per engine.SchemaRecheck and compare
-- with the last one seen, running the full guard (schema_columns) only
-- when it changed. The schema's version is part of it: a newer courier's
-- migration that adds no column (an index, a constraint) changes it too.
-- The schema is looked up by its name as it is, not cast from text,
-- which would fold a quoted name ("Tenant") to lower case.
SELECT COALESCE(string_agg(c.relname || '.' || a.attname, ' ' ORDER BY c.relname, a.attnum), '')
    || ' v' || (SELECT COALESCE(MAX(version), 0) FROM courier_schema)
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_attribute AS a ON a.attrelid = c.oid
WHERE c.relnamespace = (SELECT n.oid FROM pg_catalog.pg_namespace AS n WHERE n.nspname = current_schema())
    AND c.relkind IN ('r', 'p')
    AND c.relname LIKE 'courier\_%' AND a.attnum > 0 AND NOT a.attisdropped;

-- name: schema_database_file
-- PostgreSQL: nothing to do here (a server, not a file).

-- name: schema_integrity_check
-- PostgreSQL: nothing to do here. The server checks its own pages
-- (data checksums, amcheck) with its own tooling.

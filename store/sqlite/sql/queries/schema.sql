-- courier's queries for SQLite: the schema version table and the schema guard.
-- store/postgres/sql/queries/schema.sql has the same names and parameters; where the
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
-- The version table itself; every migration records its number here.
-- Exported at the head of Migrations' first file: never change it.
CREATE TABLE IF NOT EXISTS courier_schema (
    version    INTEGER PRIMARY KEY,
    applied_at INTEGER NOT NULL
);

-- name: schema_record
-- Stamped by the database's clock, in unix microseconds. The migration files
-- Migrations exports end with this statement, its :version written in: like
-- schema_create, which the first of them begins with, it must never change.
-- SQLite: julianday, which every SQLite has, in place of extract(epoch);
-- millisecond precision is plenty for a record of when.
INSERT INTO courier_schema (version, applied_at) VALUES (:version, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));

-- name: schema_columns
-- SQLite: pragma_table_info in place of information_schema.
SELECT m.name AS table_name, p.name AS column_name
FROM sqlite_master AS m, pragma_table_info(m.name) AS p
WHERE m.type = 'table' AND m.name LIKE 'courier\_%' ESCAPE '\'
ORDER BY m.name, p.cid;

-- name: schema_objects
-- The indexes and triggers on courier's tables, each its kind and name,
-- which the schema guard looks for by name. SQLite: sqlite_master in place
-- of the catalog; it lists the indexes SQLite makes for a UNIQUE or
-- PRIMARY KEY constraint too (sqlite_autoindex_...), which the guard does
-- not look for.
SELECT tbl_name AS table_name, type || ' ' || name AS object
FROM sqlite_master
WHERE type IN ('index', 'trigger') AND tbl_name LIKE 'courier\_%' ESCAPE '\';

-- name: schema_isolation
-- SQLite: nothing to do; its transactions are serializable.

-- name: schema_lock_wait
-- SQLite: nothing to do; a writer waits for the one before it (the busy
-- timeout), and readers never wait for a writer (WAL).

-- name: schema_lock
-- Two processes migrating at once: the second waits for the first.
-- SQLite: a write that changes nothing, the transaction's first statement,
-- takes the write lock before the version is read. A transaction of
-- DSN's pool begins IMMEDIATE and holds it already, but one of go-sqlite3's
-- own "sqlite3" driver begins deferred: it would read the version from a
-- snapshot, and once another process's migration committed, SQLite would
-- refuse its first write at once (busy), whatever the busy timeout.
-- Before the first migration there is no courier_schema: Migrate goes on,
-- and schema_create's CREATE TABLE is the first write.
UPDATE courier_schema SET version = version WHERE 0;

-- name: schema_search
-- SQLite: nothing to look for; a database file has one schema for courier,
-- and Migrate always runs schema_create, which SQLite answers without a
-- right to check. A read here would begin a deferred transaction's
-- snapshot before its first write (see schema_lock), which SQLite refuses
-- at once, busy, once another process's migration has committed.

-- name: schema_analyze
-- SQLite: nothing to do; its planner reads the partial indexes without
-- statistics.

-- name: schema_fingerprint
-- What changes whenever any table or index does: SQLite's schema cookie,
-- read from the file header without a table read. Each claim compares it
-- with the last one seen and runs the full guard (schema_columns) only
-- when it changed. The schema's version is part of it, one lookup at the
-- end of courier_schema's key: a newer courier's migration that changes
-- data alone, and records that this courier must not run on it, leaves
-- the cookie as it was.
SELECT (SELECT schema_version FROM pragma_schema_version())
    || ' v' || (SELECT COALESCE(MAX(version), 0) FROM courier_schema);

-- name: schema_database_file
-- The file of the main database ('' in memory), whose identity Open
-- records and Outbox.Check compares: a file removed or replaced under an
-- open Store takes its writes to an unlinked file, lost when it closes.
SELECT file FROM pragma_database_list WHERE name = 'main';

-- name: schema_integrity_check
-- Outbox.Check's look at the file itself: b-tree structure, page and
-- record formats, NOT NULL and CHECK constraints (not the slower index
-- cross-check of integrity_check). One row 'ok' when all is well; it
-- reads the whole file. It stops at the first problem (1): past the
-- b-trees, it reads each table again for its constraints, and one whose
-- b-tree it found damaged fails that read (database disk image is
-- malformed), which would fail the Check rather than report the damage.
PRAGMA quick_check(1);

// Package postgres is courier's PostgreSQL engine, for many application
// instances sharing one database, through pgx's database/sql driver. It
// needs no cgo.
//
// Importing the package registers the engine for the driver names "pgx",
// "pgx/v5" and "postgres". The engine works through pgx's driver only
// (DriverName): "postgres" serves an application that registered pgx's
// driver under that name too, and store.Migrate and store.Open refuse
// another driver registered as "postgres", such as lib/pq, with code
// config_invalid. The application opens its database as it always does
// and hands it to package store:
//
//	import _ "github.com/courier-go/courier/store/postgres"
//
//	db, err := sqlx.Open("pgx", "postgres://app@db.internal/app")
//	err = store.Migrate(ctx, db) // or apply the files of Migrations with your own tool
//	s, err := store.Open(ctx, db, store.Config{})
//
// Courier's tables live where the connection creates tables: the first
// schema of its search_path, public by default. To keep them in a schema
// of their own, create it once (CREATE SCHEMA courier) and put it first in
// the pool's search_path, the application's schema after it; pgx takes
// the setting from the URL:
//
//	db, err := sqlx.Open("pgx", "postgres://app@db.internal/app?search_path=courier,public")
//
// store.Migrate, store.Open, the files of Migrations and every query then
// find courier's tables there, and the application's own tables stay
// reachable unqualified. The schema must exist: PostgreSQL skips a
// search_path entry that does not, and courier's tables would be created in
// the next. Decide before the first Migrate: once courier's tables are
// in public, putting an empty schema first makes store.Migrate refuse
// (config_invalid, naming public) rather than create new tables there that
// would hide the old ones and the deliveries they hold; move the tables
// (ALTER TABLE … SET SCHEMA) or keep public first. Once they are in a
// schema of their own, a connection whose search_path misses it (a URL
// without its search_path, a role without the setting) finds them
// nowhere: store.Open answers schema_outdated, naming the schema, and
// store.Migrate refuses alike (config_invalid) rather than create new,
// empty tables in public, which would take every enqueue made with that
// search_path while the workers look in courier's schema. A second
// courier in the database is another matter: see Two couriers in one
// database.
//
// The Store takes the database server's clock for its own (see
// store.Config.Now), so processes on hosts whose clocks disagree still
// stamp leases on one clock; the package doc of store says, under Clocks,
// what still reads a host's own clock.
//
// An application that holds its transactions through pgx itself (pgxpool,
// without database/sql) enqueues in them with Enqueue, EnqueueMany and
// Publish: store's Outbox methods, through the same code, with a pgx.Tx.
// The Store is still opened over database/sql on the same database:
//
//	tx, err := pool.Begin(ctx)
//	// ... the application's writes through tx ...
//	_, err = postgres.Enqueue(ctx, s, tx, store.EnqueueParams{...})
//	err = tx.Commit(ctx)
//
// Workers are woken by pg_notify, sent by the enqueue statement and
// delivered when the enqueuing transaction commits, and sent after a
// redrive or an Enable has committed; they poll as a fallback, and a
// worker whose LISTEN connection drops polls meanwhile and tries to
// listen again after 100ms, the wait doubling up to 5 seconds (or its
// client.Config.PollInterval, if shorter), then claims once it listens. Claims take FOR UPDATE SKIP LOCKED, so any
// number of worker processes share one outbox.
//
// # Two couriers in one database
//
// Two applications in two schemas of one database may each have a courier
// of its own. They are independent, but share the database-wide wake-up
// channel (a worker may wake for the other's enqueue and find nothing due)
// and migrate one after the other. The database cannot tell the second
// from the first with its search_path lost, so store.Migrate refuses to
// create the second's tables while only another schema holds courier's,
// as it refuses a search_path that misses courier's schema. Create the
// second's version table in its schema first, with the statement the
// first file of Migrations begins with; store.Migrate then creates the
// rest there:
//
//	CREATE TABLE billing.courier_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL);
//
// # Behind a transaction-mode pooler
//
// Behind PgBouncer, RDS Proxy or Supavisor in transaction mode, each
// transaction may run on another server connection. The Store's queries
// keep nothing in a session from one transaction to the next: their
// settings are SET LOCAL, their advisory locks end with their
// transaction, and they create no temporary table, prepare no statement
// by name and leave no cursor open. pgx's default query exec mode,
// cache_statement, does prepare statements by name on each connection,
// which a pooler that does not track them answers with "prepared
// statement ... already exists" or "does not exist" (database_unavailable,
// naming the setting below), as PgBouncer 1.18 does, from the second
// process or pool on. Choose a mode that prepares none in the URL; nothing
// else of the Store's setup changes:
//
//	db, err := sqlx.Open("pgx", "postgres://app@pgbouncer.internal/app?default_query_exec_mode=simple_protocol")
//
// store.Migrate (one transaction, its lock a transaction's), the courier
// CLI given that URL, receivers' inbox transactions, the admin and any
// number of worker processes work through the pooler, and a pool of fewer
// server connections (default_pool_size) than a worker's Concurrency
// only makes them wait their turn: a test runs a sender, two workers and
// a receiver through PgBouncer 1.18 with 2 server connections and a
// Concurrency of 8. The store conformance suite passes in simple_protocol
// (pgx writes the parameters into the statement) and exec, and all of it
// but wake-ups through PgBouncer 1.18 in transaction mode; Enqueue,
// EnqueueMany and Publish in a pgx.Tx, and payloads of the largest size
// sealed or not, work in those two modes and in describe_exec and
// cache_describe. Two things still differ:
//
//   - Wake-ups need a session. Through the pooler a worker's LISTEN would
//     be accepted, but no notification would reach the worker, and the
//     LISTEN would stay on the server connection it ran on, which the
//     pooler hands to other clients: the notification each enqueue sends
//     would reach whichever client runs a transaction there at the time,
//     and pgx would keep it in that connection, unread, for as long as the
//     connection lives. So a worker listens only on a direct connection:
//     before its LISTEN it asks the server for its process id, which a
//     pooler (PgBouncer, in any pool mode) does not give its clients, and
//     behind one it logs a warning once (client.Config.Logger, "worker:
//     wake-ups unavailable, polling", config_invalid) and finds new
//     deliveries at its next poll (client.Config.PollInterval, 1 second
//     by default). A pooler that passes the server's process id on to
//     its clients is not seen, and its LISTEN leaks as above. Open the
//     Store of each process that runs a worker on a direct connection, for
//     wake-ups and behind any pooler: it keeps them however the
//     application enqueues, as the notification is sent on commit to every
//     listener of the database.
//   - Settings in the URL do not reach the server: PgBouncer refuses a
//     startup parameter it does not track ("unsupported startup parameter:
//     search_path", database_unavailable), or drops it when told to ignore
//     it (ignore_startup_parameters). It tracks client_encoding, DateStyle,
//     TimeZone, standard_conforming_strings and application_name; not
//     search_path, statement_timeout or lock_timeout. Set those on the role,
//     which every server connection starts with, or with SET LOCAL in the
//     application's own transactions; without search_path courier's tables
//     are looked for, and migrated, in the schemas of the server's default:
//     ALTER ROLE app IN DATABASE app SET search_path = courier, public.
//
// # Roles and privileges
//
// A team whose deploy pipeline migrates as one role (the owner of
// courier's schema) and whose application runs as another, without the
// right to change the schema, grants the application's role, here app,
// what every part of courier uses: enqueues, workers, receivers, retention,
// the admin and every command of the courier CLI but migrate.
//
//	GRANT USAGE ON SCHEMA courier TO app;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA courier TO app;
//	ALTER DEFAULT PRIVILEGES FOR ROLE migrator IN SCHEMA courier
//	    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO app;
//	ALTER ROLE app IN DATABASE app SET search_path = courier, public; -- or the URL's search_path
//
// The GRANT and ALTER DEFAULT PRIVILEGES statements are the migrating
// role's to run. ALTER ROLE is not, unless it is a superuser or has
// CREATEROLE (PostgreSQL's rule): run it as app itself, which may set its
// own defaults.
//
// Nothing else: no sequence (courier's ids are identity columns), no
// TRUNCATE, no function (the replay cache's trigger runs as part of the
// insert). The default privileges grant the tables a later courier's
// migration creates as the migrating role creates them; without them, the
// release that uses a new table finds it refused ("permission denied for
// table …", config_invalid) until someone grants it. A role that
// only receives needs the four on courier_inbox, courier_replay and
// courier_replay_counts, and SELECT on courier_schema. Without USAGE on
// the schema, PostgreSQL leaves it out of the role's search_path without
// a word, and courier's tables are looked for in the next schema:
// store.Open answers schema_outdated, and store.Migrate config_invalid
// rather than create new, empty tables there, each naming the schema the
// role may not use.
//
// The application's role calls store.Open, which checks the schema and
// never migrates: schema_outdated while the pipeline has not yet applied
// the release's files (a process of the new release started before the
// migration step), and, on a newer release's schema, what package store
// says under Upgrades (it serves, or refuses with schema_too_new).
// store.Migrate run as that role, as a service that migrates at start
// does, creates nothing: on a current or newer schema it has nothing to
// do and returns nil; on one behind, it fails at the first pending
// migration, naming it with the database's refusal ("permission denied
// for schema courier", "must be owner of table courier_outbox";
// config_invalid), and leaves the schema as it was. After the pipeline applies new files, it runs ANALYZE as the
// owner (see Migrations): the application's role may not.
//
// # Backups and restores
//
// A pg_dump holds courier's tables at the same instant as the
// application's, so a delivery is in it exactly when its business rows
// are. Restored, the copy's deliveries go on from where they were: pending
// and retrying ones are sent when due, and those leased at the dump are
// sent again once their lease (client.Config.Lease, on the server's clock)
// runs out. Deliveries that succeeded after the dump are sent once more: a
// receiver that still keeps their records (see store.Inbox.Prune) answers
// each as the duplicate it is, with the Ack it stored, and does not run
// its function again. A receiver's database restored from an older copy
// has forgotten what it processed after the dump, records and effects
// together: a redelivery of one of those is processed again, and one whose
// sender already recorded it succeeded is not sent again by courier.
//
// A dump does not hold the roles, nor their settings in the database
// (ALTER ROLE … IN DATABASE … SET search_path) unless pg_dump is given
// --create. Restored into a new database without that setting, the
// application's role no longer finds courier's schema: store.Open answers
// schema_outdated, naming the schema that holds courier's tables. Set the
// search_path again; store.Migrate refuses (config_invalid) rather than
// create new, empty tables in the first schema of the search_path, beside
// the restored ones. A copy
// restored beside the original (staging, an investigation) holds the
// original's pending deliveries, addressed to the original's receivers:
// run no worker on it unless they are to be sent from there.
package postgres

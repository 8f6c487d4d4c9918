package postgres_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/jmoiron/sqlx"
)

// TestARoleGrantedSomeTablesOpensTheStore: a receiver's role granted only
// the tables it uses (the inbox, the replay cache, the schema's version)
// opens a Store over a schema as migrated. The schema guard read the
// columns from information_schema, which lists only those the role has a
// privilege on, and Open refused with schema_altered, "table
// courier_attempts is missing": a grant taken for an altered schema.
func TestARoleGrantedSomeTablesOpensTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	owner := openURL(t, u)
	if err := store.Migrate(ctx, owner); err != nil {
		t.Fatal(err)
	}
	role := newRole(t, u, owner, "courier_receiver_", `GRANT SELECT, INSERT, UPDATE, DELETE ON courier_inbox, courier_replay, courier_replay_counts TO %s;
		GRANT SELECT ON courier_schema TO %s`)
	s, err := store.Open(ctx, openURL(t, role.url(t, "")), store.Config{})
	if err != nil {
		t.Fatalf("Open as a role granted the inbox's tables only: %v; want the Store (the tables are as migrated)", err)
	}
	s.Close()
}

// TestTheReplayCacheCountsAcrossRoles: the common split of roles. One that
// owns a schema of its own name migrates (the tables go there, by the
// default search_path's "$user"), and another uses the tables, its
// search_path set in its URL. The replay cache's counting trigger kept
// the search_path as written at migration, "$user", public, which for the
// second role found no table: every Replay.Remember failed, and an RFC
// 9421 receiver sharing the cache answered 503 to every request.
func TestTheReplayCacheCountsAcrossRoles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	owner := openURL(t, u)
	migrator := newRole(t, u, nil, "courier_mig_", "")
	if _, err := owner.ExecContext(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]q AUTHORIZATION %[1]q`, migrator.name)); err != nil {
		t.Fatal(err)
	}
	mig := openURL(t, migrator.url(t, ""))
	if err := store.Migrate(ctx, mig); err != nil {
		t.Fatal(err)
	}
	schema := strconv.Quote(migrator.name)
	app := newRole(t, u, mig, "courier_app_", `GRANT USAGE ON SCHEMA `+schema+` TO %s;
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA `+schema+` TO %s;
		GRANT USAGE ON ALL SEQUENCES IN SCHEMA `+schema+` TO %s`)
	s, err := store.Open(ctx, openURL(t, app.url(t, migrator.name)), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if replayed, err := s.Replay.Remember(ctx, "key-1", "nonce-1", time.Now().Add(time.Minute)); err != nil || replayed {
		t.Fatalf("Replay.Remember as the application's role = %v, %v; want a new pair recorded", replayed, err)
	}
	var n int
	if err := mig.GetContext(ctx, &n, "SELECT COALESCE(sum(n), 0) FROM courier_replay_counts WHERE key_id = 'key-1'"); err != nil || n != 1 {
		t.Fatalf("counted %d pairs of key-1, %v; want 1", n, err)
	}
}

// TestMigrateTxLeavesTheCallersSearchPath: the README's layout, courier's
// tables in schema courier and the application's in public, with
// search_path=courier,public. An application migrating courier's tables
// in its own transaction (MigrateTx) writes its own tables after it: the
// first version of migration 11 set the search_path for the rest of the
// caller's transaction, and the application's table was no longer found.
func TestMigrateTxLeavesTheCallersSearchPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	base := pgtest.URL(t)
	if _, err := openURL(t, base).ExecContext(ctx, `CREATE SCHEMA courier; CREATE TABLE public.orders (id int)`); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", "courier,public")
	u.RawQuery = q.Encode()
	tx, err := openURL(t, u.String()).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := postgres.MigrateTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	var sp string
	if err := tx.QueryRowContext(ctx, `SHOW search_path`).Scan(&sp); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders VALUES (1)`); err != nil {
		t.Fatalf("after MigrateTx (search_path %s), the application's own table: %v", sp, err)
	}
}

// TestMigrateAsARoleWithoutDDLFindsNothingToDo: a team's pipeline
// migrates courier's schema as one role and the application runs as
// another, granted courier's tables but not the right to create in their
// schema, and calls store.Migrate at start as the README's sample does.
// On a schema already current that is a no-op, as documented; it failed
// with "permission denied for schema", database_unavailable, because it
// ran CREATE TABLE IF NOT EXISTS courier_schema, which PostgreSQL checks
// for the right to create before it looks for the table.
func TestMigrateAsARoleWithoutDDLFindsNothingToDo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	owner := openURL(t, u)
	schema, mig := migratedSchema(t, u, owner)
	app := newRole(t, u, mig, "courier_app_", fmt.Sprintf(`GRANT USAGE ON SCHEMA %[1]q TO %%s;
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %[1]q TO %%s`, schema))
	db := openURL(t, app.url(t, schema))
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("store.Migrate as a role without the right to create, on a current schema: %v; want nothing to do", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := postgres.MigrateTx(ctx, tx); err != nil {
		t.Fatalf("postgres.MigrateTx as a role without the right to create, on a current schema: %v; want nothing to do", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestOpenSaysTheRoleMayNotUseCouriersSchema: the application's role has
// courier's schema in its search_path and the grants on its tables, but
// not USAGE on the schema (the first line of Roles and privileges,
// forgotten). PostgreSQL skips a schema of the search_path the role may
// not use, so Open finds no tables; its schema_outdated said that no
// schema of the search_path has them and asked to name the schema in the
// search_path, which already names it. It says the role may not use it.
func TestOpenSaysTheRoleMayNotUseCouriersSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	owner := openURL(t, u)
	schema, mig := migratedSchema(t, u, owner)
	app := newRole(t, u, mig, "courier_app_", fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %q TO %%s`, schema))
	_, err := store.Open(ctx, openURL(t, app.url(t, schema+",public")), store.Config{})
	if !errors.Is(err, courier.CodeSchemaOutdated) || !strings.Contains(err.Error(), "USAGE") || strings.Contains(err.Error(), "no schema of the search_path") {
		t.Fatalf("Open as a role without USAGE on courier's schema, which its search_path names = %v; want schema_outdated saying the role may not use schema %q", err, schema)
	}
}

// TestMigrateRefusesWhereTheRoleMayNotUseCouriersSchema: as above, the
// role's search_path names courier's schema, which it may not use, and it
// may create in the next schema, public (every role could, before
// PostgreSQL 15). store.Migrate, as a service that migrates at start
// calls it, created new, empty tables in public: once the grant is
// made, the enqueues made meanwhile wait there, hidden by courier's
// schema, first in the search_path. It refuses, naming the schema.
func TestMigrateRefusesWhereTheRoleMayNotUseCouriersSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := pgtest.URL(t)
	owner := openURL(t, u)
	schema, _ := migratedSchema(t, u, owner)
	app := newRole(t, u, owner, "courier_app_", `GRANT CREATE ON SCHEMA public TO %s`)
	err := store.Migrate(ctx, openURL(t, app.url(t, schema+",public")))
	var created bool
	if err := owner.GetContext(ctx, &created, `SELECT to_regclass('public.courier_schema') IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), schema) || created {
		t.Fatalf("Migrate as a role without USAGE on courier's schema, which its search_path names = %v (tables created in public: %v); want config_invalid naming schema %q, nothing created", err, created, schema)
	}
}

// loginRole is a role of the test server's that logs in with a password,
// for the tests of what a role other than the owner of the test's
// database may do there.
type loginRole struct {
	name, password string
	dbURL          string // the test's database
}

// newRole creates a login role on the server of the test's database dbURL,
// named prefix and a random suffix, and runs grants there as db, each %s
// in it the role's quoted name (none: no grants). When the test ends it
// drops what the role owns in that database and its privileges there
// (the database itself is dropped later), and then the role.
func newRole(t *testing.T, dbURL string, db *sqlx.DB, prefix, grants string) loginRole {
	t.Helper()
	ctx := t.Context()
	r := loginRole{name: prefix + strings.ToLower(rand.Text()[:10]), password: rand.Text(), dbURL: dbURL}
	admin := openURL(t, pgtest.Server(t))
	if _, err := admin.ExecContext(ctx, fmt.Sprintf(`CREATE ROLE %q LOGIN PASSWORD '%s'`, r.name, r.password)); err != nil {
		t.Fatal(err)
	}
	owner := openURL(t, dbURL)
	t.Cleanup(func() {
		owner.Exec(fmt.Sprintf(`DROP OWNED BY %q CASCADE`, r.name))
		admin.Exec(fmt.Sprintf(`DROP ROLE %q`, r.name))
	})
	if grants != "" {
		if _, err := db.ExecContext(ctx, strings.ReplaceAll(grants, "%s", strconv.Quote(r.name))); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// url is the test's database's URL as the role, with its search_path set
// to searchPath unless that is empty.
func (r loginRole) url(t *testing.T, searchPath string) string {
	t.Helper()
	u := r.dbURL
	if searchPath != "" {
		u = withParam(t, u, "search_path", searchPath)
	}
	ru, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	ru.User = url.UserPassword(r.name, r.password)
	return ru.String()
}

// migratedSchema creates a schema of a random name as owner, migrates
// courier's tables into it as owner, and returns its name and a pool of
// the test's database (at u) whose search_path is that schema.
func migratedSchema(t *testing.T, u string, owner *sqlx.DB) (string, *sqlx.DB) {
	t.Helper()
	schema := "courier_" + strings.ToLower(rand.Text()[:10])
	if _, err := owner.ExecContext(t.Context(), fmt.Sprintf(`CREATE SCHEMA %q`, schema)); err != nil {
		t.Fatal(err)
	}
	mig := openURL(t, withParam(t, u, "search_path", schema))
	if err := store.Migrate(t.Context(), mig); err != nil {
		t.Fatal(err)
	}
	return schema, mig
}

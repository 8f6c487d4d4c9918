package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
)

func withParam(t *testing.T, dbURL, k, v string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

// TestSchemaWhoseNameNeedsQuotes: courier's tables in a schema whose name
// needs quoting (upper case, a hyphen). Open failed on "Tenant": the
// schema fingerprint cast current_schema() from text, which folds it to
// lower case ("tenant" does not exist, or is another schema).
func TestSchemaWhoseNameNeedsQuotes(t *testing.T) {
	t.Parallel()
	for _, schema := range []string{"Tenant", "tenant-1"} {
		t.Run(schema, func(t *testing.T) {
			ctx := t.Context()
			dbURL := pgtest.URL(t)
			admin := sqlx.MustOpen(postgres.DriverName, dbURL)
			defer admin.Close()
			if _, err := admin.ExecContext(ctx, `CREATE SCHEMA "`+schema+`"`); err != nil {
				t.Fatal(err)
			}
			db := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", `"`+schema+`",public`))
			defer db.Close()
			var cur string
			if err := db.GetContext(ctx, &cur, "SELECT current_schema()"); err != nil || cur != schema {
				t.Fatalf("current_schema = %q, %v", cur, err)
			}
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			s, err := store.Open(ctx, db, store.Config{})
			if err != nil {
				t.Fatalf("Open in schema %q: %v", schema, err)
			}
			s.Close()
		})
	}
}

// TestOpenNamesTheSchemaItsSearchPathMisses: courier's tables in a schema
// of their own, and a connection whose search_path does not name it: a
// database restored from pg_dump into a new one, which brings no ALTER
// ROLE … IN DATABASE … SET search_path, or a URL without its search_path.
// Open said only that the schema needs migrating, and the migration it
// asked for creates new, empty tables in public, where the deliveries
// waiting in the other schema are never seen again. The code is still
// schema_outdated, and the error names the schema that holds the tables.
func TestOpenNamesTheSchemaItsSearchPathMisses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	admin := sqlx.MustOpen(postgres.DriverName, dbURL)
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA courier`); err != nil {
		t.Fatal(err)
	}
	mig := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "courier,public"))
	defer mig.Close()
	if err := store.Migrate(ctx, mig); err != nil {
		t.Fatal(err)
	}
	db := sqlx.MustOpen(postgres.DriverName, dbURL) // the server's default search_path: "$user", public
	defer db.Close()
	_, err := store.Open(ctx, db, store.Config{})
	if !errors.Is(err, courier.CodeSchemaOutdated) || !strings.Contains(err.Error(), `schema "courier"`) || !strings.Contains(err.Error(), "search_path") {
		t.Fatalf("Open on a search_path without courier's schema = %v; want schema_outdated naming schema \"courier\" and the search_path", err)
	}
}

// TestMigrateRefusesWhenOnlyAnotherSchemaHasCouriersTables: courier's
// tables in a schema of their own, applied with search_path=courier,public,
// and `courier migrate` run with the database's URL alone (the server's
// default search_path, "$user", public). Migrate said it migrated, created
// a second, empty set of courier's tables in public, and the application's
// transactions, on the same default search_path, enqueued there, where no
// worker (whose search_path leads to schema courier) ever looked: lost
// notifications. It refuses as Open does, config_invalid, naming the
// schema that holds the tables and the search_path, and creates nothing;
// MigrateTx alike. A database with no courier tables anywhere still
// migrates into the first schema of the search_path.
func TestMigrateRefusesWhenOnlyAnotherSchemaHasCouriersTables(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	db := sqlx.MustOpen(postgres.DriverName, dbURL) // the server's default search_path: "$user", public
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA courier`); err != nil {
		t.Fatal(err)
	}
	own := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "courier,public"))
	defer own.Close()
	if err := store.Migrate(ctx, own); err != nil {
		t.Fatal(err)
	}
	createdInPublic := func() bool {
		t.Helper()
		var created bool
		if err := db.GetContext(ctx, &created, `SELECT to_regclass('public.courier_schema') IS NOT NULL`); err != nil {
			t.Fatal(err)
		}
		return created
	}

	err := store.Migrate(ctx, db)
	if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), `schema "courier"`) ||
		!strings.Contains(err.Error(), "name the schema in the search_path") || createdInPublic() {
		t.Fatalf("Migrate on a search_path that misses courier's schema = %v (tables created in public: %v); want config_invalid naming schema \"courier\" and the search_path, nothing created", err, createdInPublic())
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = postgres.MigrateTx(ctx, tx)
	if cerr := tx.Commit(); err == nil && cerr != nil {
		t.Fatal(cerr)
	}
	if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), `schema "courier"`) || createdInPublic() {
		t.Fatalf("MigrateTx on a search_path that misses courier's schema = %v (tables created in public: %v); want config_invalid naming schema \"courier\", nothing created", err, createdInPublic())
	}
	if _, err := store.Open(ctx, db, store.Config{}); !errors.Is(err, courier.CodeSchemaOutdated) || !strings.Contains(err.Error(), `schema "courier"`) {
		t.Fatalf("Open on that search_path = %v; want schema_outdated naming schema \"courier\"", err)
	}

	fresh := sqlx.MustOpen(postgres.DriverName, pgtest.URL(t))
	defer fresh.Close()
	if err := store.Migrate(ctx, fresh); err != nil {
		t.Fatalf("Migrate of a database with no courier tables: %v", err)
	}
	var in string
	if err := fresh.GetContext(ctx, &in, `SELECT relnamespace::regnamespace::text FROM pg_class WHERE relname = 'courier_schema'`); err != nil || in != "public" {
		t.Fatalf("a fresh database's courier_schema is in %q (%v), want public, the first schema of the search_path", in, err)
	}
}

// TestANewApplicationBesideAnotherCreatesItsVersionTableFirst: two
// applications in two schemas of one database, each with a courier of its
// own, as package postgres documents. The second, never migrated, cannot
// be told by the database from the first with its search_path lost: Open
// and Migrate name the first's schema, and say that an application of its
// own creates its version table in its schema first. Once it has, Migrate
// creates the rest there and Open serves.
func TestANewApplicationBesideAnotherCreatesItsVersionTableFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	admin := sqlx.MustOpen(postgres.DriverName, dbURL)
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA orders; CREATE SCHEMA billing`); err != nil {
		t.Fatal(err)
	}
	orders := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "orders"))
	defer orders.Close()
	if err := store.Migrate(ctx, orders); err != nil {
		t.Fatal(err)
	}
	billing := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "billing"))
	defer billing.Close()
	_, err := store.Open(ctx, billing, store.Config{})
	if !errors.Is(err, courier.CodeSchemaOutdated) || !strings.Contains(err.Error(), `schema "orders"`) ||
		!strings.Contains(err.Error(), "another application's") || !strings.Contains(err.Error(), `version table in schema "billing"`) {
		t.Fatalf("Open of a never-migrated application beside another's courier = %v; want schema_outdated naming schema \"orders\" and saying to create the version table in schema \"billing\" if the tables are another application's", err)
	}
	err = store.Migrate(ctx, billing)
	if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), `schema "orders"`) ||
		!strings.Contains(err.Error(), "another application's") || !strings.Contains(err.Error(), `version table in schema "billing"`) {
		t.Fatalf("Migrate of a never-migrated application beside another's courier = %v; want config_invalid naming schema \"orders\" and the version table to create in schema \"billing\"", err)
	}
	// As package postgres shows, under Two couriers in one database.
	if _, err := billing.ExecContext(ctx, `CREATE TABLE billing.courier_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, billing); err != nil {
		t.Fatalf("Migrate once the version table is in the application's schema: %v", err)
	}
	s, err := store.Open(ctx, billing, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestClaimsStopAfterANewerMigrationWithoutColumns: a newer courier's
// migration that adds no column (an index, a constraint), records its
// version and says older couriers must not run on its schema. Open refused
// it (schema_too_new), but a running Store's claims went on: the
// fingerprint they watch was the column list alone. It holds the version
// too, so they stop, as on SQLite.
func TestClaimsStopAfterANewerMigrationWithoutColumns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := openPostgres(t)
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Now().UnixMicro())
	s, err := store.Open(ctx, db, store.Config{Now: func() time.Time { return time.UnixMicro(now.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claim := func() ([]protocol.Claimed, error) {
		return protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
	}
	if _, err := claim(); err != nil {
		t.Fatal(err)
	}
	// The newer courier's next migration, which this courier must not run on.
	if _, err := db.ExecContext(ctx, `CREATE INDEX courier_outbox_next ON courier_outbox (endpoint, status);
		INSERT INTO courier_schema (version, applied_at) SELECT max(version) + 1, 1 FROM courier_schema;
			INSERT INTO courier_schema (version, applied_at) SELECT -max(version), 1 FROM courier_schema`); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, db, store.Config{}); !errors.Is(err, courier.CodeSchemaTooNew) {
		t.Fatalf("Open = %v, want schema_too_new", err)
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "n1", Endpoint: "https://r.example/h", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	now.Add((time.Minute).Microseconds()) // well past SchemaRecheck
	c, err := claim()
	if !errors.Is(err, courier.CodeSchemaTooNew) && !errors.Is(err, courier.CodeSchemaAltered) {
		t.Fatalf("claim after a newer courier migrated = %d leased, err %v; want it refused (schema_too_new), as SQLite does", len(c), err)
	}
}

// TestConcurrentMigrateWhateverTheDefaultIsolation: two processes
// migrating one database at once. Under a default isolation of REPEATABLE
// READ or SERIALIZABLE (set per role or database), the second, after
// waiting for the first, read the version from a snapshot taken before
// the wait and applied migration 1 again: Migrate's own transaction is
// READ COMMITTED.
func TestConcurrentMigrateWhateverTheDefaultIsolation(t *testing.T) {
	t.Parallel()
	for _, iso := range []string{"read committed", "repeatable read", "serializable"} {
		t.Run(iso, func(t *testing.T) {
			ctx := t.Context()
			dbURL := withParam(t, pgtest.URL(t), "default_transaction_isolation", iso)
			a := sqlx.MustOpen(postgres.DriverName, dbURL)
			b := sqlx.MustOpen(postgres.DriverName, dbURL)
			defer a.Close()
			defer b.Close()
			// A holds the migration lock (its transaction migrated, not committed).
			txA, err := a.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := postgres.MigrateTx(ctx, txA); err != nil {
				t.Fatal(err)
			}
			var errB error
			var wg sync.WaitGroup
			wg.Add(1)
			started := make(chan struct{})
			go func() {
				defer wg.Done()
				close(started)
				errB = store.Migrate(context.Background(), b)
			}()
			<-started
			// Wait until B waits on the advisory lock, in this test's
			// database: other tests share the server.
			for {
				var n int
				if err := a.GetContext(ctx, &n, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
					AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
					t.Fatal(err)
				}
				if n > 0 {
					break
				}
				time.Sleep(time.Millisecond) // polling, not synchronisation by sleep
			}
			if err := txA.Commit(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if errB != nil {
				t.Fatalf("the second Migrate, after waiting for the first: %v", errB)
			}
			var n int
			if err := a.GetContext(ctx, &n, "SELECT count(*) FROM courier_schema"); err != nil || n == 0 {
				t.Fatalf("versions recorded: %d, %v", n, err)
			}
		})
	}
}

// TestMigrateNeverHidesTablesOfALaterSchema: courier's tables landed in
// public, then the operator put a schema of its own first in the
// search_path. Migrate created new, empty tables there, which hid the old
// ones and the deliveries they held from every query. It refuses, naming
// where the tables are, and creates nothing; with tables in the first
// schema already, a later schema's are no concern of its.
func TestMigrateNeverHidesTablesOfALaterSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	public := sqlx.MustOpen(postgres.DriverName, dbURL)
	defer public.Close()
	if err := store.Migrate(ctx, public); err != nil {
		t.Fatal(err)
	}
	if _, err := public.ExecContext(ctx, `CREATE SCHEMA courier; CREATE SCHEMA other`); err != nil {
		t.Fatal(err)
	}

	moved := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "courier,public"))
	defer moved.Close()
	err := store.Migrate(ctx, moved)
	if !errors.Is(err, courier.CodeConfigInvalid) || !strings.Contains(err.Error(), `"public"`) {
		t.Fatalf("Migrate with courier's tables in public, behind an empty first schema: %v; want config_invalid naming public", err)
	}
	tx, err := moved.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = postgres.MigrateTx(ctx, tx)
	_ = tx.Rollback()
	if !errors.Is(err, courier.CodeConfigInvalid) {
		t.Fatalf("MigrateTx: %v; want config_invalid", err)
	}
	var created bool
	if err := public.GetContext(ctx, &created, `SELECT to_regclass('courier.courier_schema') IS NOT NULL`); err != nil || created {
		t.Fatalf("courier.courier_schema created: %v, %v", created, err)
	}

	// Tables of its own in the first schema: public's hide nothing of it.
	// (A second courier's schema begins with its version table: see
	// TestANewApplicationBesideAnotherCreatesItsVersionTableFirst.)
	own := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "other"))
	defer own.Close()
	if _, err := own.ExecContext(ctx, `CREATE TABLE courier_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, own); err != nil {
		t.Fatal(err)
	}
	both := sqlx.MustOpen(postgres.DriverName, withParam(t, dbURL, "search_path", "other,public"))
	defer both.Close()
	if err := store.Migrate(ctx, both); err != nil {
		t.Fatalf("Migrate with tables in the first schema and in a later one: %v", err)
	}
}

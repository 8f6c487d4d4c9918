package postgres_test

import (
	"context"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/testmain"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/postgres"
)

func TestMain(m *testing.M) { testmain.Main(m) }

// TestConformance runs the store conformance suite on PostgreSQL.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, openPostgres, openMigrated)
}

// openPostgres returns a fresh PostgreSQL database for one test.
func openPostgres(t *testing.T) *sqlx.DB {
	t.Helper()
	return openURL(t, pgtest.URL(t))
}

// migrated is a database that store.Migrate brought to the current
// schema, copied for each test of the conformance suite that needs no
// empty one: the suite's hundreds of databases then cost the server a
// copy each rather than a migration.
var migrated = pgtest.NewTemplate(func(ctx context.Context, dbURL string) error {
	db, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return store.Migrate(ctx, db)
})

// openMigrated returns a fresh PostgreSQL database for one test, migrated.
func openMigrated(t *testing.T) *sqlx.DB {
	t.Helper()
	return openURL(t, migrated.URL(t))
}

// TestMigrationsForTeamsWithTheirOwnTool: the files of Migrations and
// MigrateTx over a *sql.Tx (see storetest.Migrations).
func TestMigrationsForTeamsWithTheirOwnTool(t *testing.T) {
	t.Parallel()
	storetest.Migrations(t, openPostgres, storetest.MigrationKit{
		Files:     postgres.Migrations(),
		MigrateTx: postgres.MigrateTx,
		SchemaQuery: `SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '')
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name LIKE 'courier%'
			UNION ALL SELECT 'index ' || indexname || ' ' || indexdef
			FROM pg_indexes WHERE schemaname = current_schema() AND tablename LIKE 'courier%'
			UNION ALL SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid)
			FROM pg_constraint WHERE connamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())
			ORDER BY 1`,
	})
}

// TestSchemaOnTheSearchPath: courier's tables go in the schema named first
// in the pool's search_path, the application's own tables stay reachable
// unqualified beside them, and two couriers in two schemas of one database
// are independent.
func TestSchemaOnTheSearchPath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := pgtest.URL(t)
	admin, err := sqlx.Open(postgres.DriverName, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA courier_a; CREATE SCHEMA courier_b; CREATE TABLE public.orders (id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	openIn := func(schema string) *store.Store {
		t.Helper()
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema+",public")
		u.RawQuery = q.Encode()
		db, err := sqlx.Open(postgres.DriverName, u.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		// Each courier's schema begins with its version table, so that
		// the second's Migrate creates its tables beside the first's
		// rather than refuse (see package postgres, under Two couriers
		// in one database).
		if _, err := db.ExecContext(ctx, "CREATE TABLE courier_schema (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		if err := store.Migrate(ctx, db); err != nil {
			t.Fatalf("Migrate in %s: %v", schema, err)
		}
		s, err := store.Open(ctx, db, store.Config{})
		if err != nil {
			t.Fatalf("Open in %s: %v", schema, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := openIn("courier_a"), openIn("courier_b")

	var where []string
	if err := admin.SelectContext(ctx, &where, `SELECT DISTINCT table_schema::text FROM information_schema.tables
		WHERE table_name LIKE 'courier\_%' ORDER BY 1`); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(where, []string{"courier_a", "courier_b"}) {
		t.Fatalf("courier's tables are in the schemas %v, want courier_a and courier_b only", where)
	}

	// The application's table beside courier's, in one transaction.
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (1)"); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	e, err := a.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: "order-1", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{"id":1}`)})
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	claim := func(s *store.Store) []int64 {
		t.Helper()
		c, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "w", Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, d := range c {
			ids = append(ids, d.DeliveryID)
		}
		return ids
	}
	if got := claim(b); len(got) != 0 {
		t.Fatalf("the courier in courier_b claimed %v of courier_a's outbox", got)
	}
	if got := claim(a); !slices.Equal(got, []int64{e.ID}) {
		t.Fatalf("the courier in courier_a claimed %v, want [%d]", got, e.ID)
	}
}

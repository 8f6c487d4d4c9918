package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// testSchemaAlteredNamesTableAndColumn: Open refuses courier's tables
// altered, and its error names the table and the column it found wrong;
// an application's own table whose name begins with courier_ is none of
// courier's business.
func testSchemaAlteredNamesTableAndColumn(t *testing.T, open OpenFunc) {
	migrated := func(t *testing.T) (*sqlx.DB, context.Context) {
		t.Helper()
		db, ctx := open(t), t.Context()
		if err := store.Migrate(ctx, db); err != nil {
			t.Fatal(err)
		}
		return db, ctx
	}
	for _, tt := range []struct {
		name  string
		alter string
		want  []string // in the error; none: Open succeeds
	}{
		{"ExtraColumn", "ALTER TABLE courier_outbox ADD COLUMN surprise INTEGER", []string{"table courier_outbox", "column surprise is not courier's"}},
		{"MissingColumn", "ALTER TABLE courier_attempts DROP COLUMN http_status", []string{"table courier_attempts", "column http_status is missing"}},
		{"ApplicationTableNamedLikeCouriers", "CREATE TABLE courier_routes (id INTEGER PRIMARY KEY, path TEXT NOT NULL)", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, ctx := migrated(t)
			if _, err := db.ExecContext(ctx, tt.alter); err != nil {
				t.Fatal(err)
			}
			s, err := openStore(t, ctx, db, store.Config{})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Open = %v, want it to serve", err)
				}
				s.Close()
				return
			}
			if !errors.Is(err, courier.CodeSchemaAltered) || courier.CodeOf(err) != courier.CodeSchemaAltered {
				t.Fatalf("Open = %v, want CodeSchemaAltered", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open = %q, want it to say %q", err, w)
				}
			}
		})
	}
}

// MigrationKit is what an engine offers teams with their own migration
// tool, and how to read the schema it makes.
type MigrationKit struct {
	// Files are the engine's exported migration files (Migrations()).
	Files fs.FS
	// MigrateTx is the engine's MigrateTx, for a plain *sql.Tx.
	MigrateTx func(context.Context, *sql.Tx) error
	// SchemaQuery lists courier's tables, columns, indexes and
	// constraints as text, one per row, in a stable order.
	SchemaQuery string
}

// Migrations tests an engine's MigrationKit: its files, applied one by one
// as such a tool would, leave the database exactly as Migrate does, which
// Open serves and Migrate finds nothing left to do in; its MigrateTx
// migrates inside a plain *sql.Tx, as a goose Go migration gets one,
// committed or rolled back with it.
func Migrations(t *testing.T, open OpenFunc, kit MigrationKit) {
	t.Run("FilesAppliedByAnotherTool", func(t *testing.T) {
		t.Parallel()
		testMigrationFiles(t, open, kit)
	})
	t.Run("MigrateTxFromSQLTx", func(t *testing.T) {
		t.Parallel()
		testMigrateTxFromSQLTx(t, open, kit.MigrateTx)
	})
}

func testMigrationFiles(t *testing.T, open OpenFunc, kit MigrationKit) {
	files := kit.Files
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, e := range entries {
		if !strings.HasPrefix(e.Name(), fmt.Sprintf("%03d_", i+1)) || !strings.HasSuffix(e.Name(), ".sql") {
			t.Fatalf("file %d is %q, want %03d_name.sql", i+1, e.Name(), i+1)
		}
		names = append(names, e.Name())
	}
	if len(names) == 0 {
		t.Fatal("no migration files")
	}
	if err := fstest.TestFS(files, names...); err != nil {
		t.Fatalf("the files are not a well-behaved fs.FS: %v", err)
	}

	// Reference: the database Migrate makes.
	ref, ctx := open(t), t.Context()
	if err := store.Migrate(ctx, ref); err != nil {
		t.Fatal(err)
	}

	db := open(t)
	for _, name := range names {
		text, err := fs.ReadFile(files, name)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, string(text)); err != nil {
			tx.Rollback()
			t.Fatalf("%s: %v", name, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	type version struct {
		Version   int   `db:"version"`
		AppliedAt int64 `db:"applied_at"`
	}
	// The migrations' versions; a row of a negated count is a migration's
	// word that earlier couriers must not run on it (schema_required).
	var got []version
	if err := db.SelectContext(ctx, &got, "SELECT version, applied_at FROM courier_schema WHERE version > 0 ORDER BY version"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.GetContext(ctx, &rows, "SELECT count(*) FROM courier_schema"); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(names) {
		t.Fatalf("the files recorded %d versions, want %d", len(got), len(names))
	}
	for i, v := range got {
		if at := time.UnixMicro(v.AppliedAt); v.Version != i+1 || time.Since(at).Abs() > time.Hour {
			t.Fatalf("version record %d is %d applied at %s, want %d applied now", i, v.Version, at, i+1)
		}
	}
	s, err := openStore(t, ctx, db, store.Config{})
	if err != nil {
		t.Fatalf("Open after the files = %v, want it to serve", err)
	}
	defer s.Close()
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.GetContext(ctx, &n, "SELECT count(*) FROM courier_schema"); err != nil || n != rows {
		t.Fatalf("Migrate after the files left %d rows in courier_schema (%v), want the files' %d: nothing left to do", n, err, rows)
	}
	if a, b := schemaObjects(t, ref, kit.SchemaQuery), schemaObjects(t, db, kit.SchemaQuery); strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("the files make another schema than Migrate\nMigrate: %v\nfiles:   %v", a, b)
	}

	// And it serves.
	b := &bundle{db: db, store: s, ctx: ctx}
	e := b.enqueue(t, delivery("after-files"))
	if c := b.claim(t, "w", 1, time.Minute); len(c) != 1 || c[0].DeliveryID != e.ID {
		t.Fatalf("claimed %v, want delivery %d", c, e.ID)
	}
}

// schemaObjects runs a MigrationKit's SchemaQuery.
func schemaObjects(t *testing.T, db *sqlx.DB, query string) []string {
	t.Helper()
	var out []string
	if err := db.SelectContext(t.Context(), &out, query); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("SchemaQuery lists nothing")
	}
	return out
}

func testMigrateTxFromSQLTx(t *testing.T, open OpenFunc, migrateTx func(context.Context, *sql.Tx) error) {
	db, ctx := open(t), t.Context()
	tx, err := db.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateTx(ctx, tx); err != nil {
		t.Fatalf("MigrateTx: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := openStore(t, ctx, db, store.Config{}); !errors.Is(err, courier.CodeSchemaOutdated) {
		t.Fatalf("Open after a rolled-back MigrateTx = %v, want CodeSchemaOutdated", err)
	}
	for range 2 { // the second is a no-op
		tx, err := db.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrateTx(ctx, tx); err != nil {
			tx.Rollback()
			t.Fatalf("MigrateTx: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := openStore(t, ctx, db, store.Config{})
	if err != nil {
		t.Fatalf("Open after a committed MigrateTx = %v", err)
	}
	s.Close()
}

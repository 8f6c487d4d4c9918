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
// altered, and its error names the table and the column, index or
// trigger it found wrong, and a running Store's Check reports the schema
// blocked; an application's own table whose name begins with courier_ is
// none of courier's business. Indexes and triggers count as columns do:
// without the trigger that counts replay nonces the replay cache's cap
// went uncounted, without SQLite's payload trigger payloads leaked for
// good, and without an index a claim or an idempotent enqueue scanned
// the outbox, or (courier_outbox_dedupe) two deliveries took one dedupe
// key.
func testSchemaAlteredNamesTableAndColumn(t *testing.T, open OpenFunc) {
	for _, tt := range []struct {
		name           string
		alter          string // or, for a trigger, trigger and table
		trigger, table string
		sqlite         bool     // SQLite's alone: its payloads are apart
		want           []string // in the error; none: Open succeeds
	}{
		{name: "ExtraColumn", alter: "ALTER TABLE courier_outbox ADD COLUMN surprise INTEGER", want: []string{"table courier_outbox", "column surprise is not courier's"}},
		{name: "MissingColumn", alter: "ALTER TABLE courier_attempts DROP COLUMN http_status", want: []string{"table courier_attempts", "column http_status is missing"}},
		{name: "MissingTrigger", trigger: "courier_replay_counted", table: "courier_replay", want: []string{"table courier_replay", "trigger courier_replay_counted is missing"}},
		{name: "MissingRecountTrigger", trigger: "courier_replay_recounted", table: "courier_replay", sqlite: true, want: []string{"table courier_replay", "trigger courier_replay_recounted is missing"}},
		{name: "MissingPayloadTrigger", trigger: "courier_outbox_payload_deleted", table: "courier_outbox", sqlite: true, want: []string{"table courier_outbox", "trigger courier_outbox_payload_deleted is missing"}},
		{name: "MissingIndex", alter: "DROP INDEX courier_outbox_dedupe", want: []string{"table courier_outbox", "index courier_outbox_dedupe is missing"}},
		{name: "MissingClaimIndex", alter: "DROP INDEX courier_outbox_due", want: []string{"table courier_outbox", "index courier_outbox_due is missing"}},
		{name: "ApplicationTableNamedLikeCouriers", alter: "CREATE TABLE courier_routes (id INTEGER PRIMARY KEY, path TEXT NOT NULL)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, ctx := open(t), t.Context()
			onSQLite := strings.Contains(db.DriverName(), "sqlite")
			if tt.sqlite && !onSQLite {
				t.Skip("a trigger of SQLite's alone")
			}
			if err := store.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			running, err := openStore(t, ctx, db, store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			alter := tt.alter
			if tt.trigger != "" {
				alter = "DROP TRIGGER " + tt.trigger
				if !onSQLite {
					alter += " ON " + tt.table
				}
			}
			if _, err := db.ExecContext(ctx, alter); err != nil {
				t.Fatal(err)
			}
			_, err = openStore(t, ctx, db, store.Config{})
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Open = %v, want it to serve", err)
				}
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
			if h, err := running.Outbox.Check(ctx, 0); err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeSchemaAltered {
				t.Errorf("Check of the running Store = %s %s, %v; want blocked, schema_altered", h.Status, h.Code, err)
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
	t.Run("OpenNamesTheFilesToApply", func(t *testing.T) {
		t.Parallel()
		testOpenNamesTheFilesToApply(t, open, kit.Files)
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
	applyFiles(t, db, files, names)
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

// applyFiles applies the migration files names of files to db, each in a
// transaction of its own, as a team's own migration tool does.
func applyFiles(t *testing.T, db *sqlx.DB, files fs.FS, names []string) {
	t.Helper()
	ctx := t.Context()
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
}

// testOpenNamesTheFilesToApply: a team applies the migration files with its
// own tool, and a process of a release that knows one file more opens
// its Store before the new file is applied. Open said only that the
// schema needs migrating; it names the database's version, the one this
// courier needs, and the first file to apply, so the team knows which of
// its files are missing. A database never migrated is at version 0.
func testOpenNamesTheFilesToApply(t *testing.T, open OpenFunc, files fs.FS) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil || len(names) < 2 {
		t.Fatalf("migration files %v, %v; want two or more", names, err)
	}
	n := len(names)
	for _, tt := range []struct {
		name    string
		applied int // the files applied, in order
	}{
		{"OneFileBehind", n - 1},
		{"NeverMigrated", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := open(t)
			applyFiles(t, db, files, names[:tt.applied])
			_, err := openStore(t, t.Context(), db, store.Config{})
			if !errors.Is(err, courier.CodeSchemaOutdated) {
				t.Fatalf("Open at version %d = %v, want CodeSchemaOutdated", tt.applied, err)
			}
			for _, want := range []string{
				fmt.Sprintf("version %d", tt.applied),
				fmt.Sprintf("this courier needs %d", n),
				fmt.Sprintf("apply %s onward", names[tt.applied]),
			} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open at version %d = %q; want it to say %q", tt.applied, err, want)
				}
			}
		})
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

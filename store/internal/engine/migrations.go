package engine

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/courier-go/courier/internal/sqlfile"
)

// Migration is one numbered schema change: the file
// migrations/NNN_name.sql of an engine's SQL.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// FileName is the migration's file name, as the engine's SQL and the
// files of MigrationFiles spell it: 003_subscriptions.sql.
func (m Migration) FileName() string { return fmt.Sprintf("%03d_%s.sql", m.Version, m.Name) }

// Migrations returns the engine's migrations in order. They must be
// numbered 1..n without a gap.
func (e *Engine) Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(e.SQL, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, entry := range entries {
		num, rest, ok := strings.Cut(entry.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(rest, ".sql") {
			continue
		}
		b, err := fs.ReadFile(e.SQL, path.Join("migrations", entry.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql"), SQL: string(b)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("store: %s: migrations are not numbered 1..n (found %d at %d)", e.Name, m.Version, i+1)
		}
	}
	return ms, nil
}

// MigrationFiles returns the engine's migrations as a team's own migration
// tool applies them: one file per migration, NNN_name.sql, each complete
// in itself. The first creates the version table courier_schema; each
// ends by recording its version there (stamped by the database's clock),
// which is what Open checks. Applied in order, each once and each in a
// transaction, they leave the database exactly as Migrate does.
//
// A file's text depends only on its migration, never on the courier
// release that exports it, so tools that checksum applied migrations keep
// accepting them.
func (e *Engine) MigrationFiles() (fs.FS, error) {
	ms, err := e.Migrations()
	if err != nil {
		return nil, err
	}
	b, err := fs.ReadFile(e.SQL, "queries/schema.sql")
	if err != nil {
		return nil, err
	}
	stmts, err := sqlfile.Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("store: %s schema.sql: %w", e.Name, err)
	}
	if err := sqlfile.Require(stmts, "schema_create", "schema_record"); err != nil {
		return nil, fmt.Errorf("store: %s schema.sql: %w", e.Name, err)
	}
	files := make(memFS, len(ms))
	for _, m := range ms {
		var f strings.Builder
		fmt.Fprintf(&f, "-- courier migration %d (%s) for %s, with its record in courier_schema.\n", m.Version, m.Name, e.Name)
		f.WriteString("-- Apply the files in order, each once and in one transaction.\n\n")
		if m.Version == 1 {
			f.WriteString("-- The version table: every migration records its number here.\n")
			f.WriteString(statement(stmts["schema_create"]) + "\n\n")
		}
		f.WriteString(strings.TrimSpace(m.SQL) + "\n\n")
		record, _ := sqlfile.Compile(stmts["schema_record"], func(int) string { return strconv.Itoa(m.Version) })
		f.WriteString("-- The version record Open checks.\n")
		f.WriteString(statement(record) + "\n")
		files[m.FileName()] = []byte(f.String())
	}
	return files, nil
}

// statement returns one SQL statement, trimmed and ended by a semicolon.
func statement(sql string) string {
	return strings.TrimSuffix(strings.TrimSpace(sql), ";") + ";"
}

// MustMigrationFiles is MigrationFiles for the engine packages' exported
// Migrations: the SQL is courier's own and its tests read it, so an error
// is a bug in courier.
func (e *Engine) MustMigrationFiles() fs.FS {
	files, err := e.MigrationFiles()
	if err != nil {
		panic(err)
	}
	return files
}

// MigrateTx applies the pending migrations inside a *sql.Tx of the named
// driver; set by package store, it is the engine packages' MigrateTx.
var MigrateTx func(ctx context.Context, tx *sql.Tx, driver string) error

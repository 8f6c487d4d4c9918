package sqlite

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestMigrateAndOpenOnAReadOnlyFileAreDatabaseUnavailable: Migrate,
// store.Open and Open on a database file this process may not write fail
// with code database_unavailable, as a write to it later would; Open's
// refusal had no code. Migrate is refused on an older courier's file,
// which it has something to apply to, and on a current one too: a
// connection of DriverName is refused before SQLite opens a file this
// process may not write (TestAFileThisProcessMayNotWriteIsRefusedBeforeAnythingIsCreated).
func TestMigrateAndOpenOnAReadOnlyFileAreDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "courier.db")
	s, err := Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	older := filepath.Join(dir, "older.db")
	func() {
		db := sqlx.MustOpen(DriverName, DSN(older, store.DurabilityFull))
		defer db.Close()
		names, err := fs.Glob(Migrations(), "*.sql")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names[:len(names)-1] { // all but the last
			text, err := fs.ReadFile(Migrations(), name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, string(text)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}()
	chmodDB(t, path, 0o444)
	chmodDB(t, older, 0o444)

	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, courier.CodeDatabaseUnavailable) || !isReadOnly(err) {
			t.Errorf("%s on a read-only file = %v (code %q), want database_unavailable, SQLite's read-only error", what, err, courier.CodeOf(err))
		}
	}
	if s, err := Open(ctx, path, store.Config{}); err == nil {
		s.Close()
		t.Fatal("Open served a read-only database file")
	} else {
		want("Open", err)
	}
	db, err := sqlx.Open(DriverName, DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want("Migrate", store.Migrate(ctx, db))
	if s, err := store.Open(ctx, db, store.Config{}); err == nil {
		s.Close()
		t.Fatal("store.Open served a read-only database file")
	} else {
		want("store.Open", err)
	}
	olderDB, err := sqlx.Open(DriverName, DSN(older, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer olderDB.Close()
	want("Migrate of an older courier's file", store.Migrate(ctx, olderDB))
	if s, err := Open(ctx, older, store.Config{}); err == nil {
		s.Close()
		t.Fatal("Open served an older courier's read-only database file")
	} else {
		want("Open of an older courier's file", err)
	}
}

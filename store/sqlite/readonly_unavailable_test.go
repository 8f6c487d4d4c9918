package sqlite

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestMigrateAndOpenOnAReadOnlyFileAreDatabaseUnavailable: Migrate,
// store.Open and Open on a database file this process may not write fail
// with code database_unavailable, as a write to it later would; Open's
// refusal had no code, and Migrate, which takes the write lock before it
// reads the version, is refused too.
func TestMigrateAndOpenOnAReadOnlyFileAreDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	chmodDB(t, path, 0o444)

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
}

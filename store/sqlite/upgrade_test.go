package sqlite_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/sqlite"
)

// TestUpgradeFromMigration8 loads a database an earlier courier migrated
// to version 8 and filled with rows in every state (testdata/upgrade_v8.sql,
// the sqlite3 shell's .dump), migrates it and works every row to its end
// (storetest.UpgradeFromMigration8).
func TestUpgradeFromMigration8(t *testing.T) {
	dump, err := os.ReadFile("testdata/upgrade_v8.sql")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlx.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), string(dump)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.UpgradeFromMigration8(t, func(cfg store.Config) (*store.Store, error) {
		return sqlite.Open(t.Context(), path, cfg)
	})
}

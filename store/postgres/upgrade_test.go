package postgres_test

import (
	"os"
	"testing"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/internal/storetest"
)

// TestUpgradeFromMigration8 loads a database an earlier courier migrated
// to version 8 and filled with rows in every state (testdata/upgrade_v8.sql,
// pg_dump's), migrates it and works every row to its end
// (storetest.UpgradeFromMigration8).
func TestUpgradeFromMigration8(t *testing.T) {
	dump, err := os.ReadFile("testdata/upgrade_v8.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := openURL(t, pgtest.URL(t))
	if _, err := db.ExecContext(t.Context(), string(dump)); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	storetest.UpgradeFromMigration8(t, func(cfg store.Config) (*store.Store, error) {
		return store.Open(t.Context(), db, cfg)
	})
}

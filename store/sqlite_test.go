package store_test

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/storetest"
)

// openSQLite returns a fresh SQLite file database for one test.
func openSQLite(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open(store.SQLiteDriver, store.SQLiteDSN(filepath.Join(t.TempDir(), "courier.db")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) *sqlx.DB { return openSQLite(t) })
}

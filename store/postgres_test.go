package store_test

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openPostgres returns a fresh PostgreSQL database for one test.
func openPostgres(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("pgx", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) *sqlx.DB { return openPostgres(t) })
}

package postgres_test

import (
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store/internal/storetest"
	"github.com/courier-go/courier/store/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformance runs the store conformance suite on PostgreSQL.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) *sqlx.DB {
		db, err := sqlx.Open(postgres.DriverName, pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	})
}

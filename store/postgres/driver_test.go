package postgres_test

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/pgtest"
	"github.com/courier-go/courier/store"
)

// otherDriver is a database/sql driver other than pgx's, as lib/pq is: it
// speaks to PostgreSQL, but its connections are not pgx's.
type otherDriver struct{ driver.Driver }

func init() {
	sql.Register("postgres", otherDriver{stdlib.GetDefaultDriver()})
	sql.Register("pgx-instrumented", otherDriver{stdlib.GetDefaultDriver()})
}

// TestOtherDriverUnderPostgresRefused: the engine works through pgx's
// connections (wake-ups, the check that a connection given to Enqueue is
// not in a transaction, the reading of errors), so a pool of another driver
// registered as "postgres" (lib/pq's name) is refused by Migrate and Open,
// with config_invalid, rather than served half-working.
func TestOtherDriverUnderPostgresRefused(t *testing.T) {
	t.Parallel()
	db, err := sqlx.Open("postgres", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(t.Context(), db); !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf("Migrate over another driver named postgres = %v, want config_invalid", err)
	}
	s, err := store.Open(t.Context(), db, store.Config{})
	if !errors.Is(err, courier.CodeConfigInvalid) {
		t.Errorf("Open over another driver named postgres = %v, want config_invalid", err)
	}
	if s != nil {
		s.Close()
	}
}

// TestWrappedPgxDriverServes: a pool of pgx's driver wrapped for
// instrumentation, opened under its own name and handed to sqlx as "pgx",
// is the application's word that it is pgx's: Migrate and Open take it.
func TestWrappedPgxDriverServes(t *testing.T) {
	t.Parallel()
	raw, err := sql.Open("pgx-instrumented", pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(raw, "pgx")
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(t.Context(), db); err != nil {
		t.Fatalf("Migrate over a wrapped pgx driver = %v", err)
	}
	s, err := store.Open(t.Context(), db, store.Config{})
	if err != nil {
		t.Fatalf("Open over a wrapped pgx driver = %v", err)
	}
	s.Close()
}

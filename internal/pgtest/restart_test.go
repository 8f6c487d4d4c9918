package pgtest_test

import (
	"testing"

	"github.com/courier-go/courier/internal/pgtest"
)

// TestRestartable: a Restartable server stopped in each way starts again
// on its port and data directory, with every committed row.
func TestRestartable(t *testing.T) {
	t.Parallel()
	r := pgtest.StartRestartable(t)
	dbURL, err := r.NewDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	db := open(t, dbURL)
	if _, err := db.Exec(`CREATE TABLE kept (n int)`); err != nil {
		t.Fatal(err)
	}
	for i, how := range []pgtest.Stop{pgtest.Fast, pgtest.Immediate, pgtest.Kill} {
		if _, err := db.Exec(`INSERT INTO kept VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		admin := r.AdminURL()
		if err := r.Stop(how); err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(); err == nil {
			t.Fatalf("stop %d: the server still answers", how)
		}
		if err := r.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		if r.AdminURL() != admin {
			t.Fatalf("stop %d: restarted at %s, was %s", how, r.AdminURL(), admin)
		}
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM kept`); err != nil || n != i+1 {
			t.Fatalf("stop %d: %d rows kept, %v; want %d", how, n, err, i+1)
		}
	}
}

package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
)

// TestTheWriterKeepsItsStatementJournalsInMemory: the one connection
// courier writes through sets temp_store to MEMORY (2), so the statement
// journal every claim and settle keeps (their RETURNING) grows in small
// chunks instead of a 64 KiB buffer per statement; the application's
// pool of DriverName keeps SQLite's default (0), as its own statements
// may be of any size.
func TestTheWriterKeepsItsStatementJournalsInMemory(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "courier.db")
	app, err := sqlx.Open(DriverName, DSN(file, store.DurabilityFull))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	if err := store.Migrate(t.Context(), app); err != nil {
		t.Fatal(err)
	}
	w := openWriter(file, store.DurabilityFull)
	defer w.Close()
	for _, c := range []struct {
		pool string
		db   *sqlx.DB
		want int
	}{{"writer", w, 2}, {"application's", app, 0}} {
		var got int
		if err := c.db.GetContext(t.Context(), &got, "PRAGMA temp_store"); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("the %s pool's temp_store = %d, want %d", c.pool, got, c.want)
		}
	}
}

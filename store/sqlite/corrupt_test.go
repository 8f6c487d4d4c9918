package sqlite_test

import (
	"errors"
	"os"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/damage"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestADamagedFileFailsAsDatabaseCorrupt: SQLite's SQLITE_CORRUPT (a
// malformed page) and SQLITE_NOTADB (a header no database has) were
// database_unavailable, as a lock conflict is, while Check reported
// database_corrupt for the same file. Each is database_corrupt, a case of
// database_unavailable still (errors.Is holds for both): the database
// failed the operation.
func TestADamagedFileFailsAsDatabaseCorrupt(t *testing.T) {
	t.Parallel()
	want := func(t *testing.T, what string, err error) {
		t.Helper()
		if courier.CodeOf(err) != courier.CodeDatabaseCorrupt || !errors.Is(err, courier.CodeDatabaseUnavailable) {
			t.Errorf("%s = %v (code %q), want database_corrupt, a case of database_unavailable", what, err, courier.CodeOf(err))
		}
	}
	t.Run("a malformed page", func(t *testing.T) {
		t.Parallel()
		path := damaged(t, "courier_outbox")
		s, err := sqlite.Open(t.Context(), path, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Outbox.Health(t.Context())
		want(t, "Health", err)
		_, err = s.Outbox.List(t.Context(), store.ListParams{})
		want(t, "List", err)
		if h, err := s.Outbox.Check(t.Context(), 0); err != nil || h.Status != store.HealthBlocked || h.Code != courier.CodeDatabaseCorrupt {
			t.Errorf("Check = %s/%s, %v; want blocked/database_corrupt", h.Status, h.Code, err)
		}
	})
	t.Run("no database's header", func(t *testing.T) {
		t.Parallel()
		path := damaged(t, "")
		s, err := sqlite.Open(t.Context(), path, store.Config{})
		if err == nil {
			s.Close()
		}
		want(t, "Open", err)
	})
}

// damaged returns the path of a migrated database file holding a few
// deliveries, damaged: the root page of table given a page type no
// b-tree page has, or, table empty, the file's header overwritten.
func damaged(t *testing.T, table string) string {
	t.Helper()
	s, path := storeHolding(t, 20, []byte(`{}`))
	if table != "" {
		damage.Tables(t, s, path, table)
		return path
	}
	if err := s.Close(); err != nil { // the last connection checkpoints the WAL into the file
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("no database here"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

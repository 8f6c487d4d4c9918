//go:build unix

package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestANewFileInADirectoryThisProcessMayNotWriteIsSaidSo: SQLite, refused
// the file's creation in a directory this process may not write, opens
// it read-only and reports that open's error, "no such file or
// directory", which sent the reader looking for a file that was never to
// be there. Open and Migrate now say the directory cannot be written,
// still database_unavailable, and make nothing.
func TestANewFileInADirectoryThisProcessMayNotWriteIsSaidSo(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) }) // for TempDir's removal
	path := filepath.Join(dir, "app.db")

	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, courier.CodeDatabaseUnavailable) || err == nil || !strings.Contains(err.Error(), "directory "+dir+" cannot be written") {
			t.Errorf("%s of a new file in a directory this process may not write = %v (code %q), want database_unavailable saying the directory cannot be written",
				what, err, courier.CodeOf(err))
		}
	}
	_, err := Open(t.Context(), path, store.Config{})
	want("Open", err)
	db := sqlx.MustOpen(DriverName, DSN(path, store.DurabilityFull))
	defer db.Close()
	want("Migrate", store.Migrate(t.Context(), db))
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the directory holds %v (%v), want nothing", entries, err)
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// TestCommandsLeaveAFileThatIsNotCouriersAsTheyFound: given a SQLite file
// that is not courier's, every command but migrate fails, schema_outdated,
// but each turned the file to WAL first, as its connections opened it: a
// database of another program's, in rollback-journal mode, was left in
// WAL mode with its header rewritten, and an empty file became a
// 4096-byte database. Each now leaves the file byte for byte as it was,
// in its journal mode, with nothing beside it, and says the same.
func TestCommandsLeaveAFileThatIsNotCouriersAsTheyFound(t *testing.T) {
	t.Parallel()
	for _, file := range []struct {
		name string
		make func(t *testing.T, path string)
	}{
		{"another program's database", func(t *testing.T, path string) {
			db := sqlx.MustOpen("sqlite3", path) // go-sqlite3's defaults: rollback journal, as python3's sqlite3 makes one
			defer db.Close()
			db.MustExec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
			db.MustExec("INSERT INTO notes (body) VALUES ('kept')")
		}},
		{"an empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for _, cmd := range [][]string{ // the command and its action, -db, then its arguments
			{"health"}, {"keys"}, {"prune"},
			{"deliveries list"}, {"deliveries show", "1"}, {"deliveries redrive", "1"}, {"deliveries cancel", "1"},
			{"endpoints list"}, {"endpoints disable", "https://r.example/hooks"},
			{"contracts list"}, {"contracts fail-mismatched", "https://r.example/hooks"},
		} {
			dir := t.TempDir()
			path := filepath.Join(dir, "other.db")
			file.make(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			mode := journalMode(t, path)

			args := append(strings.Fields(cmd[0]), "-db", path)
			code, out, errOut := courierRun(t, append(args, cmd[1:]...)...)
			if code != exitFailed || out != "" || !strings.Contains(errOut, "schema_outdated: store: database schema needs migrating") {
				t.Errorf("%s: courier %s: exit %d, stdout %q, stderr %q; want %d, schema_outdated", file.name, cmd[0], code, out, errOut, exitFailed)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(after, before) {
				t.Errorf("%s: courier %s changed the file: %d bytes, were %d", file.name, cmd[0], len(after), len(before))
			}
			if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
				t.Errorf("%s: courier %s left %v (%v) in the directory, want the file alone", file.name, cmd[0], entries, err)
			}
			if got := journalMode(t, path); got != mode {
				t.Errorf("%s: courier %s left the file in journal mode %s, want %s", file.name, cmd[0], got, mode)
			}
		}
	}
}

// journalMode returns the journal mode of the SQLite file at path, read
// through a connection that sets none.
func journalMode(t *testing.T, path string) string {
	t.Helper()
	db := sqlx.MustOpen("sqlite3", path)
	defer db.Close()
	var mode string
	if err := db.Get(&mode, "PRAGMA journal_mode"); err != nil {
		t.Fatal(err)
	}
	return mode
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestASQLitePathThatCannotBeAFileIsSaid: SQLite creates a database
// file, not its directory. A -db whose directory does not exist failed
// with SQLite's "unable to open database file" (migrate) or sent the
// operator to migrate, which creates no directory either ("no such file
// (courier migrate creates it)"); a directory given as -db failed as
// "unable to open database file: is a directory". Each command that
// opens -db says what is wrong and what to do, without quoting the path,
// and makes nothing.
func TestASQLitePathThatCannotBeAFileIsSaid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, db string
		says     []string
	}{
		{"a missing directory", filepath.Join(dir, "nodir", "app.db"), []string{"directory does not exist", "create it"}},
		{"a directory", dir, []string{"is a directory", "name a file in it"}},
	} {
		for _, cmd := range [][]string{ // the command and its action, -db, then its arguments
			{"migrate"}, {"health"}, {"keys"}, {"prune"},
			{"deliveries list"}, {"deliveries show", "1"}, {"deliveries redrive", "1"}, {"deliveries cancel", "1"},
			{"endpoints list"}, {"endpoints disable", "https://r.example/hooks"},
			{"contracts fail-mismatched", "https://r.example/hooks"},
		} {
			args := append(strings.Fields(cmd[0]), "-db", tc.db)
			code, out, errOut := courierRun(t, append(args, cmd[1:]...)...)
			ok := code == exitFailed && out == "" && !strings.Contains(errOut, dir)
			for _, want := range tc.says {
				ok = ok && strings.Contains(errOut, want)
			}
			if !ok {
				t.Errorf("%s: courier %s: exit %d, stdout %q, stderr %q; want %d saying %q, without the path",
					tc.name, cmd[0], code, out, errOut, exitFailed, tc.says)
			}
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the directory holds %v (%v), want nothing", entries, err)
	}
}

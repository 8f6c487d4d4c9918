package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrateRefusesAnEngineTheDBIsNot: -engine that names another engine
// than -db's is a usage error, and -print writes nothing, rather than the
// other engine's SQL for the database; -engine without -print, which it
// goes with, is one too, and migrate applies nothing.
func TestMigrateRefusesAnEngineTheDBIsNot(t *testing.T) {
	t.Parallel()
	sqliteDB := filepath.Join(t.TempDir(), "app.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-print", "-engine", "sqlite", "-db", "postgres://app@db.internal/app"}, "-engine sqlite"},
		{[]string{"-print", "-engine", "postgres", "-db", sqliteDB}, "-engine postgres"},
		{[]string{"-engine", "postgres", "-db", sqliteDB}, "-engine goes with -print"},
	} {
		code, out, errOut := courierRun(t, append([]string{"migrate"}, tc.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("migrate %v: exit %d, stdout %.100q, stderr %q; want %d saying %q", tc.args, code, out, errOut, exitUsage, tc.want)
		}
	}
	if _, err := os.Stat(sqliteDB); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused migrate made the SQLite file: %v", err)
	}
}

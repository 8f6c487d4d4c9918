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

// TestAURLOfAnotherSchemeIsNoFilePath: a -db URL of another scheme than
// PostgreSQL's (another engine's, a misspelt postgres://, a JDBC URL) was
// taken for a SQLite file path: migrate -print wrote SQLite's SQL for it
// and exited 0, migrate made a SQLite file in a directory named after the
// scheme when one was there, and every other command said to create that
// directory. Each is a usage error that does not quote it, and no file is
// made.
func TestAURLOfAnotherSchemeIsNoFilePath(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd) // where a directory named after a scheme is
	for _, dir := range []string{"mysql:", "postgress:", "jdbc:postgresql:"} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{"mysql://app:s3cret@db", "postgress://app:s3cret@db", "jdbc:postgresql://db?password=s3cret", "MySQL://db"} {
		for _, args := range [][]string{
			{"migrate", "-db", db}, {"migrate", "-print", "-db", db}, {"health", "-db", db}, {"deliveries", "list", "-db", db},
		} {
			code, out, errOut := courierRun(t, args...)
			if code != exitUsage || out != "" || !strings.Contains(errOut, "a PostgreSQL URL starts postgres://") || strings.Contains(errOut, "s3cret") {
				hide := strings.NewReplacer("s3cret", "[PASSWORD]")
				t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d saying what -db takes, without the password",
					hide.Replace(strings.Join(args, " ")), code, out, hide.Replace(errOut), exitUsage)
			}
		}
	}
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("the tool made %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

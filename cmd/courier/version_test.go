package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
)

// TestVersionNamesTheSchemaMigrateBringsADatabaseTo: version says which
// courier the tool is and the schema version its migrate brings a new
// database to, as a rolling deploy asks of a binary (the release whose
// schema the database has is the one to run).
func TestVersionNamesTheSchemaMigrateBringsADatabaseTo(t *testing.T) {
	t.Parallel()
	out := mustRun(t, exitOK, "version")
	m := regexp.MustCompile(`^courier (\S.*), schema version (\d+), (go\S+) (\w+)/(\w+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("version printed %q, want courier <version>, schema version <n>, <go> <os>/<arch>", out)
	}
	if m[3] != runtime.Version() || m[4] != runtime.GOOS || m[5] != runtime.GOARCH {
		t.Errorf("version printed %q, want %s %s/%s", out, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	schema, _ := strconv.Atoi(m[2])
	migrated := mustRun(t, exitOK, "migrate", "-db", filepath.Join(t.TempDir(), "new.db"))
	if want := fmt.Sprintf("migrated: schema version %d (was 0)\n", schema); migrated != want {
		t.Errorf("migrate of a new file printed %q; version said schema %d", migrated, schema)
	}
	for _, dir := range []string{"../../store/sqlite/sql/migrations", "../../store/postgres/sql/migrations"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil || len(files) != schema {
			t.Errorf("%s holds %d migrations (%v); version said schema %d", dir, len(files), err, schema)
		}
	}
	if code, _, errOut := courierRun(t, "version", "extra"); code != exitUsage {
		t.Errorf("version extra: exit %d (%s), want %d", code, errOut, exitUsage)
	}
}

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/store"
)

// TestAFileThisProcessMayNotWriteIsRefusedBeforeAnythingIsCreated: SQLite
// opens a file it may not write read-only and, the directory writable,
// creates the -wal and -shm files of a WAL database beside it, this
// process's, which the file's owner, another user, may not write: Open,
// store.Open and Migrate refused the file only after their first
// connection had made them, and the owner's own processes could then no
// longer open the database until someone removed them. Each now refuses
// it before SQLite opens anything, database_unavailable with SQLite's
// read-only error naming the file, and the directory holds what it held;
// so for a -wal file this process may not write, which the error names.
// Once the permissions are mended, Open serves.
func TestAFileThisProcessMayNotWriteIsRefusedBeforeAnythingIsCreated(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	for _, tc := range []struct {
		name     string
		unusable func(path string) // makes a file of the database's one this process may not write
		named    string            // the file the error names besides the database's, if another
	}{
		{"the database file", func(path string) { chmodDB(t, path, 0o444) }, ""},
		{"its -wal file", func(path string) {
			if err := os.WriteFile(path+"-wal", nil, 0o444); err != nil { // as one another user's process left
				t.Fatal(err)
			}
		}, "-wal"},
	} {
		path := createdFile(t)
		tc.unusable(path)
		before := dirState(t, filepath.Dir(path))

		refused := func(what string, err error) {
			t.Helper()
			if msg := fmt.Sprint(err); !errors.Is(err, courier.CodeDatabaseUnavailable) || !isReadOnly(err) ||
				!strings.Contains(msg, path+" cannot be written") || (tc.named != "" && !strings.Contains(msg, path+tc.named+": ")) {
				t.Errorf("%s: %s = %v (code %q), want database_unavailable, SQLite's read-only error, naming %s%s", tc.name, what, err, courier.CodeOf(err), path, tc.named)
			}
			if after := dirState(t, filepath.Dir(path)); !slices.Equal(after, before) {
				t.Errorf("%s: after %s the directory holds %q, want what it held: %q", tc.name, what, after, before)
			}
		}
		if s, err := Open(ctx, path, store.Config{}); err == nil {
			s.Close()
			t.Fatalf("%s: Open served a file this process may not write", tc.name)
		} else {
			refused("Open", err)
		}
		db, err := sqlx.Open(DriverName, DSN(path, store.DurabilityFull))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := store.Open(ctx, db, store.Config{}); err == nil {
			s.Close()
			t.Fatalf("%s: store.Open served a file this process may not write", tc.name)
		} else {
			refused("store.Open", err)
		}
		refused("Migrate", store.Migrate(ctx, db))
		db.Close()

		chmodDB(t, path, 0o644)
		s, err := Open(ctx, path, store.Config{})
		if err != nil {
			t.Fatalf("%s: Open after the permissions are mended: %v", tc.name, err)
		}
		s.Close()
	}
}

// dirState lists the files in dir, each with its mode and size.
func dirState(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var state []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		state = append(state, fmt.Sprintf("%s %v %d", e.Name(), fi.Mode(), fi.Size()))
	}
	return state
}

// capDACOverride is Linux's CAP_DAC_OVERRIDE: its holder reads and
// writes a file whatever its mode says.
const capDACOverride = 1

// TestAFileThisProcessMayWriteThroughACapabilityIsServed: a process
// whose user the file's mode does not let write it, but which holds
// CAP_DAC_OVERRIDE (nobody given it as an ambient capability, as
// setpriv --ambient-caps=+dac_override does), writes the file: open(2)
// lets it, and SQLite opens it read-write. The look before SQLite's open
// asked access(2), which judges as the real user without capabilities,
// and refused the file; it now asks as the process's effective
// credentials, capabilities included, as open(2) judges, and Open serves.
func TestAFileThisProcessMayWriteThroughACapabilityIsServed(t *testing.T) {
	t.Parallel()
	if os.Getenv(unprivilegedEnv) == "" {
		if os.Geteuid() != 0 {
			t.Skip("gives an unprivileged user a capability, which takes root")
		}
		asUnprivilegedWith(t, capDACOverride)
		return
	}
	ctx := t.Context()
	path := createdFile(t)
	chmodDB(t, path, 0o444) // this user's, whom the mode does not let write it
	if err := syscall.Access(path, 0x2); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("access(2) of %s for writing = %v, want EACCES: the test needs a file the user may not write", path, err)
	}
	s, err := Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatalf("Open of a file this process may write through CAP_DAC_OVERRIDE: %v", err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE written (x)"); err != nil {
		t.Fatalf("a write through the Store's pool: %v", err)
	}
}

// TestThroughASymlinkTheFilesBesideItsTargetAreLookedAt: SQLite follows a
// symlinked database path and keeps the -wal and -shm files beside the
// file the link points to, but the look built their names from the
// link's: it refused a database for a -wal file beside the link, which
// SQLite never opens, and let one through whose -wal file beside the
// target this process may not write. It now looks beside the target,
// and the error names the -wal file there.
func TestThroughASymlinkTheFilesBesideItsTargetAreLookedAt(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	for _, tc := range []struct {
		name    string
		beside  func(target, link string) string // where a -wal file this process may not write lies
		refused bool
	}{
		{"beside the link", func(_, link string) string { return link }, false},
		{"beside the target", func(target, _ string) string { return target }, true},
	} {
		target := createdFile(t)
		link := filepath.Join(t.TempDir(), "courier.db")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		wal := tc.beside(target, link) + "-wal"
		if err := os.WriteFile(wal, nil, 0o444); err != nil { // as one another user's process left
			t.Fatal(err)
		}
		dirs := []string{filepath.Dir(target), filepath.Dir(link)}
		var before [][]string
		for _, dir := range dirs {
			before = append(before, dirState(t, dir))
		}

		s, err := Open(ctx, link, store.Config{})
		if !tc.refused {
			if err != nil {
				t.Errorf("%s: Open through the link = %v, want it served: SQLite does not open %s", tc.name, err, wal)
			} else {
				s.Close()
			}
			continue
		}
		if err == nil {
			s.Close()
			t.Fatalf("%s: Open through the link served a database whose %s this process may not write", tc.name, wal)
		}
		if msg := err.Error(); !errors.Is(err, courier.CodeDatabaseUnavailable) || !isReadOnly(err) ||
			!strings.Contains(msg, link+" cannot be written") || !strings.Contains(msg, wal+": ") {
			t.Errorf("%s: Open through the link = %v (code %q), want database_unavailable, SQLite's read-only error, naming %s and %s", tc.name, err, courier.CodeOf(err), link, wal)
		}
		for i, dir := range dirs {
			if after := dirState(t, dir); !slices.Equal(after, before[i]) {
				t.Errorf("%s: after Open %s holds %q, want what it held: %q", tc.name, dir, after, before[i])
			}
		}
	}
}

// TestAFileOpenedImmutableIsNotRefused: a file: URI's immutable=1 (or
// any other spelling SQLite reads as true: yes, true, on, a number but
// 0) opens the database read-only on purpose, as mode=ro does: SQLite
// neither writes nor locks the file, and creates nothing beside it. The
// look refused such a connection to a file this process may not write;
// it lets it through now, and still refuses immutable=0 (or no, off,
// false), which SQLite opens as any other.
func TestAFileOpenedImmutableIsNotRefused(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	path := createdFile(t)
	chmodDB(t, path, 0o444)
	before := dirState(t, filepath.Dir(path))
	for _, tc := range []struct {
		value   string
		refused bool
	}{
		{"1", false}, {"true", false}, {"on", false}, {"YES", false}, {"2", false},
		{"0", true}, {"false", true}, {"off", true}, {"no", true},
	} {
		db, err := sqlx.Open(DriverName, "file:"+path+"?immutable="+tc.value)
		if err != nil {
			t.Fatal(err)
		}
		var tables int
		err = db.GetContext(ctx, &tables, "SELECT count(*) FROM sqlite_master")
		db.Close()
		switch {
		case tc.refused && (err == nil || !isReadOnly(err)):
			t.Errorf("immutable=%s on a file this process may not write: %v, want SQLite's read-only error", tc.value, err)
		case !tc.refused && err != nil:
			t.Errorf("immutable=%s: %v, want the database read", tc.value, err)
		case !tc.refused && tables == 0:
			t.Errorf("immutable=%s read no tables from a courier database", tc.value)
		}
		if after := dirState(t, filepath.Dir(path)); !slices.Equal(after, before) {
			t.Errorf("after immutable=%s the directory holds %q, want what it held: %q", tc.value, after, before)
		}
	}
}

// TestImmutableIsReadAsSQLiteReadsIt: the look lets a connection through
// unlooked-at for exactly the immutable values SQLite opens the file
// read-only for, however they are spelled: SQLite itself (go-sqlite3's
// own driver, which has no look) says which, by refusing a write.
func TestImmutableIsReadAsSQLiteReadsIt(t *testing.T) {
	t.Parallel()
	path := createdFile(t)
	for i, v := range []string{
		"1", "2", "007", "12abc", "2147483647", "00000000000001",
		"yes", "YES", "true", "True", "on", "ON",
		"0x1", "0X10", "0xa", "0XF", "0x7fffffff", "0x1g",
		"0", "", "no", "off", "false", "full", "extra", "y", "+1", "-1", "%201",
		"2147483648", "99999999999", "0x", "0xg", "0x0", "0x80000000", "1x0",
	} {
		dsn := "file:" + path + "?immutable=" + v
		db, err := sqlx.Open("sqlite3", dsn)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.ExecContext(t.Context(), fmt.Sprintf("CREATE TABLE t%d (x)", i))
		db.Close()
		if err != nil && !isReadOnly(err) {
			t.Fatalf("immutable=%s: %v", v, err)
		}
		if readOnly := err != nil; readOnlyMode(dsn) != readOnly {
			t.Errorf("readOnlyMode(immutable=%s) = %t, want %t: whether SQLite opens the file read-only", v, !readOnly, readOnly)
		}
	}
}

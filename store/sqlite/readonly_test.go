package sqlite

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/courier-go/courier/internal/testbin"
	"github.com/courier-go/courier/store"
)

// These tests make a database file read-only with chmod. Root writes any
// file whatever its mode, so a test process running as root runs each of
// them again in a child process of this same test binary as an
// unprivileged user (nobody), for whom chmod binds: the file SQLite opens
// is then read-only for real, in every run.

// unprivilegedEnv marks the child process.
const unprivilegedEnv = "COURIER_TEST_UNPRIVILEGED"

// unprivilegedUser is whom the child runs as.
const unprivilegedUser = "nobody"

// asUnprivileged runs t's test in a child process as unprivilegedUser when
// this process runs as root, and reports whether it did: the caller then
// returns. Otherwise the caller runs the test itself.
func asUnprivileged(t *testing.T) bool {
	t.Helper()
	return asUnprivilegedWith(t)
}

// asUnprivilegedWith is asUnprivileged with caps, Linux capabilities,
// given to the child as ambient ones: its effective capabilities though
// its user is unprivileged, as setpriv --ambient-caps gives them.
func asUnprivilegedWith(t *testing.T, caps ...uintptr) bool {
	t.Helper()
	if os.Getenv(unprivilegedEnv) != "" || os.Geteuid() != 0 {
		return false
	}
	u, err := user.Lookup(unprivilegedUser)
	if err != nil {
		t.Fatalf("running as root, for whom chmod does not make a file read-only, and no %q user to run as: %v", unprivilegedUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("user %s: %v", unprivilegedUser, err)
	}
	// The test binary sits in a directory only root may enter: the child
	// runs a copy.
	bin := testbin.RunnableCopy(t)
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), unprivilegedEnv+"=1", "TMPDIR="+os.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}},
		AmbientCaps: caps,
		Pdeathsig:   syscall.SIGKILL,
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil || !strings.Contains(out.String(), "--- PASS: "+t.Name()) {
		t.Fatalf("as user %s: %v\n%s", unprivilegedUser, err, out.String())
	}
	t.Logf("ran as user %s:\n%s", unprivilegedUser, out.String())
	return true
}

// chmodDB sets the mode of a database file and of its -wal and -shm files
// where they exist: SQLite creates those with the database file's mode.
func chmodDB(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(f, mode); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// isReadOnly reports whether err is SQLite's "attempt to write a readonly
// database".
func isReadOnly(err error) bool {
	var e sqlite3.Error
	return errors.As(err, &e) && e.Code == sqlite3.ErrReadonly
}

// TestOpenRefusesAReadOnlyFile shows the finding "a read-only database
// file at open: sqlite.Open succeeds and the writer connection keeps
// failing" fixed: SQLite opens a file it may not write read-only without a
// word, and Open used to serve it; it now refuses, with an error that says
// so and names the file. Once the permissions are mended, Open serves.
func TestOpenRefusesAReadOnlyFile(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	path := createdFile(t)

	chmodDB(t, path, 0o444)
	openRefusesReadOnly(t, path)

	chmodDB(t, path, 0o644)
	s, err := Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatalf("Open after the permissions are mended: %v", err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, "CREATE TABLE app (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
}

// TestReadOnlyConnectionsAreDroppedAndWritesRecover: a connection that
// found its database read-only is not used again, so once the permissions
// are mended the next write opens the file afresh and succeeds, without a
// restart; before, the writer's one connection, and any idle one of the
// application's pool, kept failing. Shown on the writer's pool as Open
// makes it, and on the Store's DB().
func TestReadOnlyConnectionsAreDroppedAndWritesRecover(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := Open(ctx, path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db := s.DB()
	if _, err := db.ExecContext(ctx, "CREATE TABLE app (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	// One connection, none idle: the next use opens a new one.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(0)
	db.SetMaxIdleConns(1)

	chmodDB(t, path, 0o444)
	w := openWriter(path, store.DurabilityFull) // opens its connection now, read-only
	defer w.Close()
	if _, err := w.ExecContext(ctx, "INSERT INTO app (x) VALUES (1)"); !isReadOnly(err) {
		t.Fatalf("a write through a writer opened on a read-only file = %v, want SQLite's read-only error", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO app (x) VALUES (1)"); !isReadOnly(err) {
		t.Fatalf("a write through a connection opened on a read-only file = %v, want SQLite's read-only error", err)
	}

	chmodDB(t, path, 0o644)
	if _, err := w.ExecContext(ctx, "INSERT INTO app (x) VALUES (2)"); err != nil {
		t.Fatalf("the writer after the permissions are mended: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO app (x) VALUES (3)"); err != nil {
		t.Fatalf("DB() after the permissions are mended: %v", err)
	}
	var n int
	if err := db.GetContext(ctx, &n, "SELECT count(*) FROM app"); err != nil || n != 2 {
		t.Fatalf("%d rows (%v), want the 2 written after the mend", n, err)
	}
}

// TestOpenRefusesAReadOnlyFileWhileAnotherProcessWrites: Open's check
// that the file can be written takes the write lock held elsewhere (a
// process that could write the file when it opened it, in a long
// transaction) for a writable file, as SQLite refuses a write to a file
// it opened read-only before it asks for the lock: with the lock held, a
// read-only file is still refused, saying so.
func TestOpenRefusesAReadOnlyFileWhileAnotherProcessWrites(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	ctx := t.Context()
	path := createdFile(t)
	holder := sqlx.MustOpen("sqlite3", "file:"+path+"?_txlock=immediate&_journal_mode=WAL")
	defer holder.Close()
	tx, err := holder.BeginTxx(ctx, nil) // BEGIN IMMEDIATE: the write lock, held until Open returned
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	chmodDB(t, path, 0o444)
	openRefusesReadOnly(t, path)
}

// createdFile returns the path of a database file Open created and
// migrated, closed again.
func createdFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := Open(t.Context(), path, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return path
}

// openRefusesReadOnly fails t unless Open refuses the file at path with
// SQLite's read-only error, saying that the file, by its name, is
// read-only.
func openRefusesReadOnly(t *testing.T, path string) {
	t.Helper()
	if s, err := Open(t.Context(), path, store.Config{}); err == nil {
		s.Close()
		t.Fatal("Open served a read-only database file")
	} else if !isReadOnly(err) || !strings.Contains(err.Error(), "read-only") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open = %v, want an error that says %s is read-only", err, path)
	}
}

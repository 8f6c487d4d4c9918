//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/courier-go/courier/internal/testbin"
)

// toolArgsEnv holds, one a line, the command line the child process of
// TestAUserWhoMayNotWriteTheFileLeavesNothingThatLocksItsOwnerOut runs the
// tool with.
const toolArgsEnv = "COURIER_TEST_TOOL_ARGS"

// ownerUID is the uid of the database file's owner in
// TestAUserWhoMayNotWriteTheFileLeavesNothingThatLocksItsOwnerOut: an
// unprivileged user, for whom permissions bind, other than nobody. The
// kernel runs a process as a uid that has no account.
const ownerUID = 54321

// TestAUserWhoMayNotWriteTheFileLeavesNothingThatLocksItsOwnerOut: in a
// directory anyone may write, a user who may not write the database file
// (nobody, the file its owner's, mode 644) ran health: it failed,
// database_unavailable, "cannot be written", but SQLite, which opened the
// file read-only, had first created its -shm and -wal files, nobody's
// and read-only to the owner, whose own health (and application) could
// then no longer open the database until someone removed them. health is
// now refused before SQLite opens the file, leaving the directory as it
// was, and the owner's health runs.
func TestAUserWhoMayNotWriteTheFileLeavesNothingThatLocksItsOwnerOut(t *testing.T) {
	if args := os.Getenv(toolArgsEnv); args != "" {
		os.Args = append([]string{"courier"}, strings.Split(args, "\n")...)
		main() // exits
	}
	if os.Geteuid() != 0 {
		t.Skip("runs the tool as two users other than this one, which takes root; store/sqlite's " +
			"TestAFileThisProcessMayNotWriteIsRefusedBeforeAnythingIsCreated shows the refusal to this user")
	}
	t.Parallel()
	reader := nobody(t)
	owner := &syscall.Credential{Uid: ownerUID, Gid: ownerUID, Groups: []uint32{ownerUID}}

	bin := testbin.RunnableCopy(t)
	dir, err := os.MkdirTemp("", "courier-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil { // anyone may create files in it
		t.Fatal(err)
	}
	db := filepath.Join(dir, "app.db")

	if code, out := runAs(t, bin, owner, "migrate", "-db", db); code != exitOK {
		t.Fatalf("the owner's migrate: exit %d\n%s", code, out)
	}
	if err := os.Chmod(db, 0o644); err != nil { // its owner's alone to write, whatever the umask
		t.Fatal(err)
	}
	before := files(t, dir)

	code, out := runAs(t, bin, reader, "health", "-db", db)
	if code != exitFailed || !strings.Contains(out, "database_unavailable") || !strings.Contains(out, "cannot be written") {
		t.Errorf("nobody's health: exit %d, want %d saying database_unavailable, cannot be written\n%s", code, exitFailed, out)
	}
	if after := files(t, dir); !slices.Equal(after, before) {
		t.Errorf("after nobody's health the directory holds %q, want what it held: %q", after, before)
	}
	if code, out := runAs(t, bin, owner, "health", "-db", db); code != exitOK || !strings.Contains(out, "status: ok") {
		t.Errorf("the owner's health after nobody's: exit %d, want %d, status ok\n%s", code, exitOK, out)
	}
}

// nobody is the credential of the user nobody, to run the tool as one
// for whom permissions bind.
func nobody(t *testing.T) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody to run the tool as: %v", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}
}

// runAs runs the tool with args from bin, the test binary's copy, as the
// user cred, and returns its exit status and output.
func runAs(t *testing.T, bin string, cred *syscall.Credential, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), toolArgsEnv+"="+strings.Join(args, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("courier %s as uid %d: %v", args[0], cred.Uid, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// files lists the files in dir, each with its owner, mode and size.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		owner := "?"
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner = strconv.FormatUint(uint64(st.Uid), 10)
		}
		list = append(list, fmt.Sprintf("%s uid %s %v %d", e.Name(), owner, fi.Mode(), fi.Size()))
	}
	return list
}

// TestMigrateIntoADirectoryThisUserMayNotWriteSaysSo: migrate of a new
// file in a directory its user may not write failed saying "no such file
// or directory", SQLite's read-only open's after the file's creation was
// refused. It says the directory cannot be written, exit 1, and makes
// nothing. Root writes any directory whatever its mode: running as root,
// the test runs the tool as nobody in a directory of root's, mode 755;
// otherwise as itself in a directory of mode 555.
func TestMigrateIntoADirectoryThisUserMayNotWriteSaysSo(t *testing.T) {
	if args := os.Getenv(toolArgsEnv); args != "" {
		os.Args = append([]string{"courier"}, strings.Split(args, "\n")...)
		main() // exits
	}
	t.Parallel()
	dir, err := os.MkdirTemp("", "courier-readonly-") // not under TempDir's, which only its owner may enter
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755); os.RemoveAll(dir) })
	db := filepath.Join(dir, "app.db")
	var code int
	var out string
	if os.Geteuid() == 0 {
		if err := os.Chmod(dir, 0o755); err != nil { // root's, whatever the umask
			t.Fatal(err)
		}
		code, out = runAs(t, testbin.RunnableCopy(t), nobody(t), "migrate", "-db", db)
	} else {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr string
		code, stdout, stderr = courierRun(t, "migrate", "-db", db)
		out = stdout + stderr
	}
	if code != exitFailed || !strings.Contains(out, "directory "+dir+" cannot be written") || strings.Contains(out, "no such file") {
		t.Errorf("migrate into a directory its user may not write: exit %d, want %d saying the directory cannot be written\n%s", code, exitFailed, out)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the directory holds %v (%v), want nothing", entries, err)
	}
}

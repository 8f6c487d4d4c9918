package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// interruptDBEnv names the SQLite file TestASecondInterruptEndsTheTool's
// child process migrates.
const interruptDBEnv = "COURIER_TEST_INTERRUPT_DB"

// TestASecondInterruptEndsTheTool: Ctrl-C cancels the command, but a
// migrate waiting for SQLite's write lock, held by another process, waits
// inside SQLite, which does not heed it, for the busy timeout (10 s); and
// every Ctrl-C after the first was caught as well, so the operator could
// not end the tool before then. A second interrupt ends it at once, with
// the status a shell gives a process the interrupt killed (130), and so
// it does for a tool started with the interrupt ignored, as a script's
// background job is: there, the interrupt's default action the tool fell
// back on after the first was to ignore it again.
func TestASecondInterruptEndsTheTool(t *testing.T) {
	if db := os.Getenv(interruptDBEnv); db != "" {
		os.Args = []string{"courier", "migrate", "-db", db}
		main() // exits
	}
	if runtime.GOOS != "linux" {
		t.Skip("sees the child open the file in /proc")
	}
	t.Parallel()
	t.Run("default", func(t *testing.T) { t.Parallel(); interruptTwice(t, false) })
	t.Run("ignored", func(t *testing.T) { t.Parallel(); interruptTwice(t, true) })
}

// interruptTwice runs TestASecondInterruptEndsTheTool's child, the tool
// migrating a file another process holds the write lock of, started with
// the interrupt ignored or at its default, and interrupts it until it
// ends, until a run ends by a second interrupt: the first may reach the
// tool before its wait inside SQLite begins, and end it as a cancel
// does, which proves nothing of the second.
func interruptTwice(t *testing.T, ignored bool) {
	// A file not yet migrated: migrate has work to do, so it waits for the
	// write lock. On a migrated one it finds nothing to apply without the
	// lock and exits 0 at once, unless an interrupt happens to come first.
	db := filepath.Join(t.TempDir(), "app.db")
	holder := sqlx.MustOpen(sqlite.DriverName, sqlite.DSN(db, store.DurabilityFull))
	defer holder.Close()
	tx, err := holder.BeginTxx(t.Context(), nil) // BEGIN IMMEDIATE: the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("CREATE TABLE application_rows (id INTEGER)"); err != nil {
		t.Fatal(err)
	}

	for range 50 {
		if interruptOnce(t, db, ignored) {
			return
		}
	}
	t.Fatal("the first interrupt ended each of 50 runs, before its wait for the write lock")
}

// interruptOnce is one run of interruptTwice's: whether a second interrupt
// ended it.
func interruptOnce(t *testing.T, db string, ignored bool) bool {
	args := []string{"-test.run=^TestASecondInterruptEndsTheTool$", "-test.count=1"}
	child := exec.Command(os.Args[0], args...)
	if ignored { // a shell ignores it, then becomes the tool: the tool inherits the ignore
		child = exec.Command("/bin/sh", append([]string{"-c", `trap "" INT; exec "$0" "$@"`, os.Args[0]}, args...)...)
	}
	child.Env = append(os.Environ(), interruptDBEnv+"="+db)
	var stderr bytes.Buffer
	child.Stderr = &stderr
	// Unless ignored, the child starts with the interrupt at its default,
	// whatever this process inherited (a background job of a shell
	// ignores it): while this process handles the interrupt, a child it
	// starts gets the default.
	handled := make(chan os.Signal, 1)
	signal.Notify(handled, os.Interrupt)
	err := child.Start()
	signal.Stop(handled)
	if err != nil {
		t.Fatal(err)
	}
	file, err := filepath.EvalSymlinks(db) // as /proc shows it
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	opened := func() bool { // the tool has the file open, its signal handling set up before
		fds, _ := filepath.Glob("/proc/" + strconv.Itoa(child.Process.Pid) + "/fd/*")
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == file {
				return true
			}
		}
		return false
	}
	for ended := false; !ended; {
		if opened() {
			_ = child.Process.Signal(os.Interrupt) // again and again, as an operator would
		}
		select {
		case err = <-done:
			ended = true
		case <-time.After(10 * time.Millisecond): // a poll of the child, not a synchronization
		}
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the interrupted migrate exited 0 (%v), holding no write lock", err)
	}
	switch {
	case exit.ExitCode() == 130 && strings.Contains(stderr.String(), "interrupt again: ending now"):
		return true
	case exit.ExitCode() == 1 && strings.Contains(stderr.String(), "context canceled") && !strings.Contains(stderr.String(), "locked"):
		return false // the first interrupt was heeded
	}
	t.Fatalf("the interrupted migrate: %v, stderr %q; want it ended by the interrupt, not after the busy timeout", err, stderr.String())
	return false
}

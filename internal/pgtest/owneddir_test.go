//go:build unix

package pgtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The environment of a test binary run again as a child of the ownedDir
// tests, to own directories in a process of its own (TestOwnedDirChild):
// its role and the directory it makes them in.
const (
	envOwnerRole   = "COURIER_PGTEST_OWNER_ROLE"
	envOwnerParent = "COURIER_PGTEST_OWNER_PARENT"
)

// Roles of a child, in envOwnerRole.
const (
	// roleExit makes a directory, prints its path and exits without
	// removing it, as a test binary that panics.
	roleExit = "exit"
	// roleWait makes a directory, prints its path and waits, reading
	// standard input, until it is killed.
	roleWait = "wait"
	// roleChurn waits for a line on standard input, then makes
	// churnRounds directories one after another, checking after each that
	// all it still owns are there, and gives up two thirds of them on the
	// way, removing them or closing their lock as if it had died. It
	// prints the paths of those it still owns, then "done", and waits
	// for the end of standard input before it exits.
	roleChurn = "churn"
)

// churnRounds is how many directories a roleChurn child makes.
const churnRounds = 60

// markerName is a file each child puts in its directories, like the
// server's log, to tell a removed directory's contents from a kept one's.
const markerName = "postgres.log"

// TestOwnedDirChild is the child's part: it does nothing in a test run.
func TestOwnedDirChild(t *testing.T) {
	role := os.Getenv(envOwnerRole)
	if role == "" {
		t.Skip("the part of a child process of the ownedDir tests")
	}
	parent := os.Getenv(envOwnerParent)
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	switch role {
	case roleExit, roleWait:
		d, err := makeMarkedDir(parent)
		if err != nil {
			fail(err)
		}
		fmt.Println(d.path)
		if role == roleWait {
			_, _ = io.Copy(io.Discard, os.Stdin)
		}
		os.Exit(0) // without removing d, nor closing its lock
	case roleChurn:
		stdin := bufio.NewReader(os.Stdin)
		if _, err := stdin.ReadString('\n'); err != nil {
			fail(err)
		}
		var live []*ownedDir
		for i := range churnRounds {
			d, err := makeMarkedDir(parent)
			if err != nil {
				fail(err)
			}
			live = append(live, d)
			for _, d := range live {
				if err := checkOwned(d); err != nil {
					fail(fmt.Errorf("round %d: %w", i, err))
				}
			}
			switch i % 3 {
			case 1:
				err = live[0].remove()
			case 2:
				err = release(live[0].lock) // its owner gone, the directory left
			}
			if err != nil {
				fail(err)
			}
			if i%3 != 0 {
				live = live[1:]
			}
		}
		for _, d := range live {
			fmt.Println(d.path)
		}
		fmt.Println("done")
		_, _ = io.Copy(io.Discard, stdin)
		os.Exit(0)
	default:
		fail(fmt.Errorf("%s=%q: no such role", envOwnerRole, role))
	}
}

// makeMarkedDir makes an ownedDir of serverDirPrefix in parent, with a
// markerName file in it.
func makeMarkedDir(parent string) (*ownedDir, error) {
	d, err := makeOwnedDir(parent, serverDirPrefix)
	if err != nil {
		return nil, err
	}
	return d, os.WriteFile(filepath.Join(d.path, markerName), []byte("log\n"), 0o600)
}

// checkOwned reports an error unless d's directory is all there: its
// marker, and the lock file d holds, under its final name.
func checkOwned(d *ownedDir) error {
	if _, err := os.Stat(filepath.Join(d.path, markerName)); err != nil {
		return fmt.Errorf("a live directory lost its contents: %w", err)
	}
	held, err := d.lock.Stat()
	if err != nil {
		return err
	}
	now, err := os.Lstat(filepath.Join(d.path, lockName))
	if err != nil {
		return fmt.Errorf("a live directory lost its lock file: %w", err)
	}
	if !os.SameFile(held, now) {
		return fmt.Errorf("%s: the lock file is not the one its owner holds", d.path)
	}
	return nil
}

// child is a test binary run again as a child of the ownedDir tests.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

// startChild runs the test binary again in role, making directories in
// parent; it is killed, if still running, when t ends.
func startChild(t *testing.T, role, parent string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestOwnedDirChild$")}
	c.cmd.Env = append(os.Environ(), envOwnerRole+"="+role, envOwnerParent+"="+parent)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdout = bufio.NewReader(stdout)
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		_ = c.cmd.Wait()
	})
	return c
}

// line returns the next line c prints: the path of a directory it made,
// or "done".
func (c *child) line(t *testing.T) string {
	t.Helper()
	line, err := c.stdout.ReadString('\n')
	if err != nil {
		_ = c.cmd.Wait()
		t.Fatalf("child: %v\n%s", err, &c.stderr)
	}
	return strings.TrimSuffix(line, "\n")
}

// wait waits for c to exit and fails t unless it exited with status 0.
func (c *child) wait(t *testing.T) {
	t.Helper()
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, &c.stderr)
	}
}

// kill kills c with SIGKILL, a death it can do nothing about, and waits
// for it to be gone.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	var exit *exec.ExitError
	if err := c.cmd.Wait(); !errors.As(err, &exit) {
		t.Fatalf("killed child: %v, want it killed\n%s", err, &c.stderr)
	}
}

// mkdirWith makes a directory of prefix in parent holding the
// files named, and returns its path.
func mkdirWith(t *testing.T, parent, prefix string, files ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSweepRemovesOnlyDirectoriesWhoseOwnerIsGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// make makes the directory to sweep in parent and returns it.
		make func(t *testing.T, parent string) string
		kept bool
	}{
		{
			name: "its owner exited without removing it",
			make: func(t *testing.T, parent string) string {
				c := startChild(t, roleExit, parent)
				dir := c.line(t)
				c.wait(t)
				return dir
			},
		},
		{
			name: "its owner was killed",
			make: func(t *testing.T, parent string) string {
				c := startChild(t, roleWait, parent)
				dir := c.line(t)
				c.kill(t)
				return dir
			},
		},
		{
			name: "its owner, another process, is alive",
			make: func(t *testing.T, parent string) string {
				return startChild(t, roleWait, parent).line(t)
			},
			kept: true,
		},
		{
			name: "its owner is this process",
			make: func(t *testing.T, parent string) string {
				d, err := makeMarkedDir(parent)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.remove() })
				return d.path
			},
			kept: true,
		},
		{
			name: "its owner is this process, which let go of it unremoved",
			make: func(t *testing.T, parent string) string {
				d, err := makeMarkedDir(parent)
				if err != nil {
					t.Fatal(err)
				}
				path := d.path
				d = nil
				// An *os.File nothing refers to is closed by its finalizer,
				// which the collections queue and the yields let run.
				for range 3 {
					runtime.GC()
					runtime.Gosched()
				}
				return path
			},
			kept: true,
		},
		{
			name: "it has no lock file, as an older courier's",
			make: func(t *testing.T, parent string) string {
				return mkdirWith(t, parent, serverDirPrefix, markerName)
			},
			kept: true,
		},
		{
			name: "its lock file, not yet locked, has its first name",
			make: func(t *testing.T, parent string) string {
				return mkdirWith(t, parent, serverDirPrefix, markerName, lockName+".new")
			},
			kept: true,
		},
		{
			name: "its name has another prefix",
			make: func(t *testing.T, parent string) string {
				return mkdirWith(t, parent, "x"+serverDirPrefix, markerName, lockName)
			},
			kept: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			dir := tc.make(t, parent)
			marker := filepath.Join(dir, markerName)
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("before the sweep: %v", err)
			}
			sweep(parent, serverDirPrefix)
			_, err := os.Stat(dir)
			switch {
			case tc.kept && err != nil:
				t.Fatalf("removed: %v", err)
			case tc.kept:
				if _, err := os.Stat(marker); err != nil {
					t.Fatalf("kept, but not its contents: %v", err)
				}
			case !errors.Is(err, os.ErrNotExist):
				t.Fatalf("kept (%v), want it removed", err)
			}
		})
	}
}

// TestConcurrentSweepsRemoveNoLiveDirectory: processes that each make
// directories one after another, all at once, each sweeping as it makes
// one, and each giving up two thirds of them, never find one of their live
// directories removed, nor any part of one. While they are alive a sweep
// removes exactly the directories they gave up, and once they have
// exited, all they left.
func TestConcurrentSweepsRemoveNoLiveDirectory(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	var children []*child
	for range 4 {
		children = append(children, startChild(t, roleChurn, parent))
	}
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	live := map[string]bool{}
	for _, c := range children {
		for dir := c.line(t); dir != "done"; dir = c.line(t) {
			live[filepath.Base(dir)] = true
		}
	}
	if want := len(children) * churnRounds / 3; len(live) != want {
		t.Fatalf("the children own %d directories, want %d", len(live), want)
	}

	sweep(parent, serverDirPrefix)
	left, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		if !live[e.Name()] {
			t.Errorf("%s, given up, is left", e.Name())
		}
		if _, err := os.Stat(filepath.Join(parent, e.Name(), markerName)); err != nil {
			t.Errorf("a live directory lost its contents: %v", err)
		}
	}
	if len(left) != len(live) {
		t.Errorf("%d directories left, want the %d the children own", len(left), len(live))
	}

	for _, c := range children {
		c.stdin.Close()
	}
	for _, c := range children {
		c.wait(t)
	}
	sweep(parent, serverDirPrefix)
	if left, err = os.ReadDir(parent); err != nil || len(left) != 0 {
		t.Fatalf("after the children exited, a sweep left %d directories (%v)", len(left), err)
	}
}

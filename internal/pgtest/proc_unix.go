//go:build unix

package pgtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// credential is whom a server program runs as.
type credential = syscall.Credential

// serverCredential returns the credential to run the server programs with:
// nil, meaning that of the test process, unless the process runs as root,
// which PostgreSQL refuses; then that of the "postgres" OS user.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(osUser)
	if err != nil {
		return nil, fmt.Errorf("running as root, which PostgreSQL refuses, and no %q OS user to run it as: %w", osUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("OS user %s: uid %q: %w", osUser, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("OS user %s: gid %q: %w", osUser, u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}, nil
}

// killGroup sends SIGKILL to the process group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

// reap reports whether the child process pid has ended, without waiting
// for it, and if so reaps it and says how it ended.
func reap(pid int) (ended bool, how error) {
	var status syscall.WaitStatus
	got, err := syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
	switch {
	case errors.Is(err, syscall.EINTR), err == nil && got == 0:
		return false, nil
	case err != nil:
		return true, err
	case status.Signaled():
		return true, fmt.Errorf("signal: %v", status.Signal())
	default:
		return true, fmt.Errorf("exit status %d", status.ExitStatus())
	}
}

// giveDir makes dir, a new temporary directory, the server's: the OS user
// of cred must reach it, and owns it.
func giveDir(dir string, cred *credential) error {
	if err := checkSearchable(filepath.Dir(dir), cred); err != nil {
		return err
	}
	return os.Chown(dir, int(cred.Uid), int(cred.Gid))
}

// checkSearchable reports an error naming the first of dir and its parents
// that the user of cred may not search, as the server, running as that user,
// could not reach a data directory below it.
func checkSearchable(dir string, cred *syscall.Credential) error {
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			var search fs.FileMode = 0o001
			switch {
			case st.Uid == cred.Uid:
				search = 0o100
			case slices.Contains(cred.Groups, st.Gid) || st.Gid == cred.Gid:
				search = 0o010
			}
			if fi.Mode().Perm()&search == 0 {
				return fmt.Errorf("OS user %s, which runs the server, may not search %s; set TMPDIR to a directory it can reach", osUser, dir)
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}

// openLockFile opens path, an ownedDir's lock file, to lock it: not
// through a symlink, nor waiting on a FIFO, that another user of the
// temporary directory could have put there.
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// tryLock takes an exclusive flock on f, without waiting for it. The lock
// belongs to f's open file description, not to the process: another
// opening of the file, in this process too, cannot take it; closing f, or
// the process dying, drops it.
func tryLock(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

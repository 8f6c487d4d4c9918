package pgtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// lockName is the lock file of an ownedDir, and lockName+".new" its name
// until it is locked.
const lockName = "owner.lock"

// An ownedDir is a temporary directory of this process's own, such as a
// throwaway server's data directory and log. The process holds an
// exclusive flock on the lock file lockName inside it from just after
// making it until just after removing it. The kernel drops the lock when
// the process dies, however it dies: a test binary that panics or hits go
// test's -timeout, whose directory would otherwise stay behind for ever.
// A directory whose lock file can be locked has lost its owner, and the
// next makeOwnedDir of its prefix, in any process, removes it.
//
// The lock file appears under its final name already locked, and a sweep
// removes a directory only while it holds the lock of the lock file that
// is still there: a live process's directory is never removed, nor one
// being made, nor one without a lock file (made by a courier from before
// ownership, or by something else with the same prefix).
type ownedDir struct {
	path string
	lock *os.File // holds the flock, for as long as the directory exists
}

// held keeps the lock file of every ownedDir not yet removed reachable.
// An *os.File nothing refers to is closed when the garbage collector
// finds it, and its flock dropped with it: without held, a process that
// let go of an ownedDir it had not removed (a server a test forgot to
// stop) would see its live directory swept by another.
var held struct {
	mu    sync.Mutex
	locks map[*os.File]struct{}
}

// hold keeps f open until release(f).
func hold(f *os.File) {
	held.mu.Lock()
	defer held.mu.Unlock()
	if held.locks == nil {
		held.locks = make(map[*os.File]struct{})
	}
	held.locks[f] = struct{}{}
}

// release closes f, a lock file hold kept, dropping its flock.
func release(f *os.File) error {
	held.mu.Lock()
	delete(held.locks, f)
	held.mu.Unlock()
	return f.Close()
}

// makeOwnedDir removes the directories of prefix in parent whose owner is
// gone (sweep), then makes a new one, mode 0700, as os.MkdirTemp does, of
// this process's own.
func makeOwnedDir(parent, prefix string) (_ *ownedDir, err error) {
	sweep(parent, prefix)
	path, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(path)
		}
	}()
	// Locked under a name no sweep looks for, then renamed: the lock is
	// the inode's, and a sweep that finds lockName finds it locked.
	unlocked := filepath.Join(path, lockName+".new")
	lock, err := os.OpenFile(unlocked, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := tryLock(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("locking %s: %w", unlocked, err)
	}
	if err := os.Rename(unlocked, filepath.Join(path, lockName)); err != nil {
		lock.Close()
		return nil, err
	}
	hold(lock)
	return &ownedDir{path: path, lock: lock}, nil
}

// remove removes the directory, then gives up its ownership. When part of
// it cannot be removed, the lock file stays, and a later sweep tries again
// once this process is gone.
func (d *ownedDir) remove() error {
	return errors.Join(removeOwned(d.path), release(d.lock))
}

// sweep removes the directories directly in parent whose names start with
// prefix and whose owner is gone. It is best effort and silent: whatever
// it cannot read, lock or remove (another user's directory, one another
// sweep is removing) it leaves.
func sweep(parent, prefix string) {
	entries, _ := os.ReadDir(parent) // what could be read of it
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) { // a symlink is not followed
			sweepDir(filepath.Join(parent, e.Name()))
		}
	}
}

// sweepDir removes the directory path if it holds a lock file that it can
// lock, and that is still path's once locked: another sweep may have
// removed path meanwhile, and a maker made it again.
func sweepDir(path string) {
	lockPath := filepath.Join(path, lockName)
	lock, err := openLockFile(lockPath)
	if err != nil {
		return // no lock file: not an ownedDir, or one being made
	}
	defer lock.Close() // after the removal, which it guards
	if tryLock(lock) != nil {
		return // its owner is alive, or another sweep is removing it
	}
	held, err := lock.Stat()
	if err != nil {
		return
	}
	if now, err := os.Lstat(lockPath); err != nil || !os.SameFile(held, now) {
		return
	}
	_ = removeOwned(path)
}

// removeOwned removes the directory path, an ownedDir, its lock file last:
// while anything else is left in it, so is the lock file, and a sweep can
// try again.
func removeOwned(path string) error {
	entries, err := os.ReadDir(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != lockName {
			errs = append(errs, os.RemoveAll(filepath.Join(path, e.Name())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

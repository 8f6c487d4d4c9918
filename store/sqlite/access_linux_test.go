package sqlite

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/courier-go/courier/store"
)

// TestWhereTheKernelHasNoFaccessat2Access2Judges: where faccessat2 is
// missing (a kernel before Linux 5.8: ENOSYS) or a seccomp policy refuses
// it (EPERM, as container runtimes' older profiles do), access(2) judges
// instead, as the real user, which is the effective one: a file this
// process may not write is still refused before SQLite opens it, and one
// it may write is let through. (It let every file through, and SQLite
// then created -wal and -shm files beside one its owner alone may write.)
// The test refuses the call in a seccomp filter of one thread, which it
// then lets end.
func TestWhereTheKernelHasNoFaccessat2Access2Judges(t *testing.T) {
	t.Parallel()
	if asUnprivileged(t) {
		return
	}
	path := createdFile(t)
	chmodDB(t, path, 0o444)
	mine := filepath.Join(t.TempDir(), "mine.db")
	if err := os.WriteFile(mine, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, errno := range []syscall.Errno{syscall.ENOSYS, syscall.EPERM} {
		if err := withFaccessat2Refused(t, errno, func() error { return writeAccess(path) }); !errors.Is(err, syscall.EACCES) {
			t.Errorf("writeAccess of a file this process may not write, faccessat2 refused with %v: %v, want EACCES", errno, err)
		}
		if err := withFaccessat2Refused(t, errno, func() error { return writeAccess(mine) }); err != nil {
			t.Errorf("writeAccess of a file this process may write, faccessat2 refused with %v: %v, want nil", errno, err)
		}
	}
}

// TestAFileWithTheImmutableAttributeIsRefused: the kernel answers EPERM
// for a file with the immutable attribute (chattr +i), which no one may
// write, root included, as a seccomp policy answers a call it refuses;
// writeAccess tells them apart (the file's mere presence is no EPERM) and
// the file is refused before SQLite opens it, as one this process may not
// write.
func TestAFileWithTheImmutableAttributeIsRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("sets a file's immutable attribute, which takes root")
	}
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skip("no chattr to set a file's immutable attribute")
	}
	path := createdFile(t)
	if out, err := exec.CommandContext(t.Context(), chattr, "+i", path).CombinedOutput(); err != nil {
		t.Skipf("the file system of %s keeps no immutable attribute: %v: %s", path, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(chattr, "-i", path).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v: %s", path, err, out)
		}
	})
	if err := writeAccess(path); !errors.Is(err, syscall.EPERM) {
		t.Errorf("writeAccess of an immutable file = %v, want EPERM", err)
	}
	before := dirState(t, filepath.Dir(path))
	if s, err := Open(t.Context(), path, store.Config{}); err == nil {
		s.Close()
		t.Fatal("Open served an immutable file")
	} else if !isReadOnly(err) {
		t.Errorf("Open of an immutable file = %v, want SQLite's read-only error", err)
	}
	if after := dirState(t, filepath.Dir(path)); !slices.Equal(after, before) {
		t.Errorf("after Open the directory holds %q, want what it held: %q", after, before)
	}
}

// withFaccessat2Refused runs f on a thread whose seccomp filter answers
// every faccessat2 with errno, and returns what f returns. The thread
// is not reused: its goroutine ends locked to it.
func withFaccessat2Refused(t *testing.T, errno syscall.Errno, f func() error) error {
	t.Helper()
	const (
		prSetNoNewPrivs   = 38
		seccompModeFilter = 2
		seccompRetErrno   = 0x00050000
		seccompRetAllow   = 0x7fff0000
	)
	filter := []syscall.SockFilter{
		{Code: syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_FACCESSAT2},
		{Code: syscall.BPF_RET | syscall.BPF_K, K: seccompRetErrno | uint32(errno)},
		{Code: syscall.BPF_RET | syscall.BPF_K, K: seccompRetAllow},
	}
	prog := syscall.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	type result struct{ setup, err error }
	done := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
			done <- result{setup: e}
			return
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_SECCOMP, seccompModeFilter, uintptr(unsafe.Pointer(&prog))); e != 0 {
			done <- result{setup: e}
			return
		}
		done <- result{err: f()}
	}()
	r := <-done
	if r.setup != nil {
		t.Fatalf("a seccomp filter refusing faccessat2: %v", r.setup)
	}
	return r.err
}

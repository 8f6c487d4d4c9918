//go:build unix

// Package testbin gives a test a copy of its own binary that another
// user may run: a test that runs part of itself as an unprivileged user
// (for whom file permissions bind, as they do not for root) cannot run
// the binary go test built, which sits in a directory only its builder
// may enter.
package testbin

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// RunnableCopy returns the path of a copy of the running test binary,
// in a directory of its own that any user may enter, removed when t
// ends. The copy is written under syscall.ForkLock, which every fork of
// the process takes: a process started meanwhile by a parallel test
// would otherwise inherit the copy's open write descriptor, and the
// copy's exec would fail with "text file busy" (ETXTBSY) while it held
// it.
func RunnableCopy(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "courier-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	syscall.ForkLock.RLock()
	err = copyExecutable(bin, os.Args[0])
	syscall.ForkLock.RUnlock()
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func copyExecutable(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

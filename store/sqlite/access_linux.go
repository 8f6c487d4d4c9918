package sqlite

import (
	"errors"
	"syscall"
	"unsafe"
)

// faccessat2(2)'s arguments, the same on every Linux architecture.
const (
	atFDCWD   = -100  // AT_FDCWD: a relative path is the working directory's
	atEAccess = 0x200 // AT_EACCESS: judge as the effective credentials
	fOK       = 0x0   // F_OK: whether the file is there
	wOK       = 0x2   // W_OK: whether it may be written
)

// writeAccess returns why this process may not write the file at path
// (syscall.EACCES, EPERM or EROFS; ENOENT: there is none), nil when it
// may, or when the kernel cannot say. It asks the kernel rather than open
// the file: closing a descriptor of a file drops every POSIX lock the
// process holds on it, those of SQLite's connections to it included.
//
// The kernel judges as open(2) does only through faccessat2 with
// AT_EACCESS (Linux 5.8): access(2) judges as the real user and without
// the process's capabilities, and so refuses a process that may write
// the file through CAP_DAC_OVERRIDE. Where faccessat2 is missing (ENOSYS)
// or a seccomp policy refuses it (EPERM, which the kernel answers for an
// immutable file too, but not when asked whether it is there), writeAccess
// returns nil rather than judge from the mode bits, which ACLs override:
// a refusal in error would keep out a process that may write the file,
// and the writer's check through SQLite (checkWritable) still refuses
// one that may not.
func writeAccess(path string) error {
	err := faccessat2(path, wOK)
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return nil // a kernel before Linux 5.8
	case errors.Is(err, syscall.EPERM) && errors.Is(faccessat2(path, fOK), syscall.EPERM):
		return nil // a seccomp policy's: the kernel's for an immutable file is for writing alone
	}
	return err
}

// faccessat2 asks the kernel whether this process, as its effective
// credentials, may access the file at path as mode says.
func faccessat2(path string, mode uint32) error {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	dirfd := atFDCWD
	_, _, errno := syscall.Syscall6(sysFaccessat2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(mode), atEAccess, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

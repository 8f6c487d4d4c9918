package sqlite

import (
	"errors"

	"golang.org/x/sys/unix"
)

// writeAccess returns why this process may not write the file at path
// (EACCES, EPERM or EROFS; ENOENT: there is none), nil when it may. It
// asks the kernel rather than open the file: closing a descriptor of a
// file drops every POSIX lock the process holds on it, those of SQLite's
// connections to it included.
//
// The kernel judges as open(2) does through faccessat2 with AT_EACCESS
// (Linux 5.8): as the effective user, with the process's capabilities.
// Where faccessat2 is missing (ENOSYS) or a seccomp policy refuses it
// (EPERM, which the kernel answers for an immutable file too, but not
// when asked whether it is there), access(2) judges: as the real user,
// which is the effective one (courier's programs do not run setuid), but
// without the process's capabilities, so that a process granted
// CAP_DAC_OVERRIDE, which open(2) lets write any file, is let through
// unasked.
func writeAccess(path string) error {
	err := unix.Faccessat2(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS)
	if !errors.Is(err, unix.ENOSYS) && !refusedCall(err, func() error { return unix.Faccessat2(unix.AT_FDCWD, path, unix.F_OK, unix.AT_EACCESS) }) {
		return err
	}
	if dacOverride() {
		return nil
	}
	err = unix.Access(path, unix.W_OK)
	if refusedCall(err, func() error { return unix.Access(path, unix.F_OK) }) {
		return nil // the kernel cannot say
	}
	return err
}

// refusedCall reports whether err is EPERM for the call itself, a seccomp
// policy's, rather than the kernel's for the file: exists, which asks
// only whether the file is there, is refused with EPERM too.
func refusedCall(err error, exists func() error) bool {
	return errors.Is(err, unix.EPERM) && errors.Is(exists(), unix.EPERM)
}

// dacOverride reports whether the process holds CAP_DAC_OVERRIDE in its
// effective set, or cannot tell.
func dacOverride() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return true
	}
	return data[0].Effective&(1<<unix.CAP_DAC_OVERRIDE) != 0
}

//go:build unix && !linux

package sqlite

import "golang.org/x/sys/unix"

// writeAccess returns why this process may not write the file at path
// (EACCES, EPERM or EROFS; ENOENT: there is none), nil when it may. It
// asks the kernel, access(2), rather than open the file: closing a
// descriptor of a file drops every POSIX lock the process holds on it,
// those of SQLite's connections to it included. access(2) judges as the
// real user, which is the effective one (courier's programs do not run
// setuid).
func writeAccess(path string) error {
	return unix.Access(path, unix.W_OK)
}

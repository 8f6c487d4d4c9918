//go:build unix

package sqlite

import "syscall"

// wOK is access(2)'s W_OK, the same on every Unix.
const wOK = 0x2

// writeAccess returns why this process may not write the file at path
// (syscall.EACCES, EPERM or EROFS; ENOENT: there is none), nil when it
// may. It asks the kernel, access(2), rather than open the file: closing
// a descriptor of a file drops every POSIX lock the process holds on it,
// those of SQLite's connections to it included. access(2) judges as the
// process's real user, which is the one open(2) judges as unless the
// program runs setuid, as courier's never does.
func writeAccess(path string) error {
	return syscall.Access(path, wOK)
}

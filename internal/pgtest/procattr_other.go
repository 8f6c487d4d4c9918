//go:build unix && !linux && !freebsd

package pgtest

import "syscall"

// procAttr returns the attributes of a server program run as cred (nil:
// the test process's user), in a process group of its own when setpgid.
// This system has no parent-death signal: parentDeath is not sent, and a
// server outlives a test process that dies without stopping it.
func procAttr(cred *syscall.Credential, setpgid bool, _ syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: setpgid}
}

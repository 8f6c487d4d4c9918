//go:build linux || freebsd

package pgtest

import "syscall"

// procAttr returns the attributes of a server program run as cred (nil:
// the test process's user), in a process group of its own when setpgid,
// and sent parentDeath when the test process dies.
func procAttr(cred *syscall.Credential, setpgid bool, parentDeath syscall.Signal) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: setpgid, Pdeathsig: parentDeath}
}

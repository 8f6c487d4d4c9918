package pgtest

import (
	"errors"
	"os"
	"syscall"
)

// credential is whom a server program runs as. Windows starts no
// throwaway server: serverCredential refuses, before the rest of this
// file could be needed.
type credential struct{}

// errNoThrowaway is why there is no throwaway server on Windows.
var errNoThrowaway = errors.New("a throwaway PostgreSQL server starts on Unix systems only; set " + envURL + " to the admin URL of a server")

// serverCredential refuses: the tests need COURIER_PG_URL's server.
func serverCredential() (*credential, error) { return nil, errNoThrowaway }

// procAttr returns no attributes: there is no server program to run.
func procAttr(*credential, bool, syscall.Signal) *syscall.SysProcAttr { return nil }

// giveDir refuses, as serverCredential does.
func giveDir(string, *credential) error { return errNoThrowaway }

// killGroup kills the process pid.
func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// reap reports the process ended: no server program was started.
func reap(int) (bool, error) { return true, errNoThrowaway }

// openLockFile refuses, as serverCredential does.
func openLockFile(string) (*os.File, error) { return nil, errNoThrowaway }

// tryLock refuses, as serverCredential does.
func tryLock(*os.File) error { return errNoThrowaway }

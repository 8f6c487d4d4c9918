package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Stop is how Restartable.Stop stops the server.
type Stop int

const (
	// Fast is a fast shutdown (SIGINT): the server ends every session,
	// rolling back their transactions, and writes a checkpoint.
	Fast Stop = iota
	// Immediate is an immediate shutdown (SIGQUIT): the server and its
	// backends quit at once, and the next start recovers from the WAL.
	Immediate
	// Kill is SIGKILL to the server's main process alone, as the OOM
	// killer would send: its backends notice and quit, and the next start
	// recovers from the WAL.
	Kill
)

// restartSettings override serverSettings for a Restartable server: what
// a commit returned is durable across a stop, however abrupt (the host
// does not crash, so fsync may stay off).
var restartSettings = []string{"synchronous_commit=on"}

// Restartable is a throwaway server of one test's own, which the test may
// stop and start again on the same data directory and port, to see what
// its clients make of the database going away and coming back. It is
// separate from the server the package's other tests share.
type Restartable struct {
	mu  sync.Mutex
	srv *server // the running server, or the last one when stopped
	up  bool
}

// StartRestartable starts a Restartable server for t, stopped and removed
// when t ends. It skips or fails t like URL when no PostgreSQL is
// available; it ignores COURIER_PG_URL, a server the test could not stop.
func StartRestartable(t testing.TB) *Restartable {
	t.Helper()
	if ok, reason := Available(); !ok {
		unavailable(t, errors.New(reason))
	}
	bins, err := findBinaries(os.Getenv(envBin), fallbackBinGlob)
	if err != nil {
		unavailable(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := startServer(ctx, bins, restartSettings...)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	r := &Restartable{srv: srv, up: true}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		var err error
		if r.up {
			err = r.srv.shutdown()
		}
		if err = errors.Join(err, r.srv.dir.remove()); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return r
}

// AdminURL is the server's admin URL, over TCP; it stays the same across
// restarts.
func (r *Restartable) AdminURL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv.url
}

// NewDatabase creates an empty database on the server and returns its URL.
// It is dropped with the server.
func (r *Restartable) NewDatabase(ctx context.Context) (string, error) {
	_, dbURL, err := createDatabase(ctx, r.AdminURL())
	return dbURL, err
}

// Stop stops the server the way how says, and returns once it and its
// backends have exited.
func (r *Restartable) Stop(how Stop) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.up {
		return errors.New("pgtest: the server is not running")
	}
	sig := map[Stop]syscall.Signal{Fast: syscall.SIGINT, Immediate: syscall.SIGQUIT, Kill: syscall.SIGKILL}[how]
	// Each backend is a process group of its own, a child of the main
	// process: killed, it leaves them serving their connections until
	// they notice. Stop waits for them.
	backends := children(r.srv.cmd.Process.Pid)
	if err := r.srv.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgtest: stopping the server: %w", err)
	}
	signalled := time.Now()
	if !r.srv.awaitExit(stopTimeout) {
		return fmt.Errorf("pgtest: the server did not exit within %v of %v", stopTimeout, sig)
	}
	deadline := time.After(stopTimeout - time.Since(signalled))
	r.up = false
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for _, pid := range backends {
		for running(pid) {
			select {
			case <-tick.C:
			case <-deadline:
				return fmt.Errorf("pgtest: backend %d did not exit within %v of %v", pid, stopTimeout, sig)
			}
		}
	}
	return nil
}

// children returns the ids of the processes whose parent is pid.
func children(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		if ppid, _, ok := stat(path); ok && ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			out = append(out, child)
		}
	}
	return out
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	_, state, ok := stat(fmt.Sprintf("/proc/%d/stat", pid))
	return ok && state != "Z" && state != "X"
}

// stat reads the parent id and state of a process from its /proc stat file.
func stat(path string) (ppid int, state string, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, "", false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, "", false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, "", false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0], err == nil
}

// Start starts the stopped server again on its data directory and port,
// and returns once it accepts connections. After Kill it waits for the
// old server's backends to quit, which the new server needs first.
func (r *Restartable) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up {
		return errors.New("pgtest: the server is running")
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		srv, err := launch(ctx, r.srv.postgres, r.srv.dir, r.srv.cred, r.srv.port, r.srv.extra)
		if err == nil {
			r.srv, r.up = srv, true
			return nil
		}
		// A backend of the killed server still holding its shared
		// memory, or the port not yet free: try again.
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgtest: restarting the server: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

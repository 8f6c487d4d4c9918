package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fallbackBinGlob matches the directories where distribution packages
// install the PostgreSQL server programs, which are often not on PATH.
const fallbackBinGlob = "/usr/lib/postgresql/*/bin"

const (
	// osUser is the OS user the server runs as when the tests run as root.
	osUser = "postgres"
	// superuser is the database superuser initdb creates.
	superuser = "postgres"
	// portAttempts bounds the retries when another process takes the port
	// picked for the server before the server binds it.
	portAttempts = 5
	// readyPoll is how often startServer tries to connect while the server
	// starts up.
	readyPoll = 20 * time.Millisecond
	// stopTimeout is how long close waits for each shutdown signal to work.
	stopTimeout = 10 * time.Second
	// logTailBytes is how much of the server log an error quotes.
	logTailBytes = 4 << 10
	// serverDirPrefix begins the name of a server's directory, in the
	// system's temporary directory.
	serverDirPrefix = "courier-pgtest-"
)

// serverSettings are the run-time parameters of a throwaway server, tuned
// for speed over durability and for many parallel tests.
var serverSettings = []string{
	"listen_addresses=127.0.0.1",
	"fsync=off",
	"synchronous_commit=off",
	"full_page_writes=off",
	"max_connections=200",
	"shared_buffers=32MB",
}

// errPortInUse reports that the server could not bind its port.
var errPortInUse = errors.New("port already in use")

// binaries are the paths of the PostgreSQL server programs.
type binaries struct {
	initdb   string
	postgres string
}

// findBinaries locates initdb and postgres: in binDir when it is not empty
// (it comes from COURIER_PG_BIN), otherwise on PATH, otherwise in the newest
// version directory matching fallbackGlob.
func findBinaries(binDir, fallbackGlob string) (binaries, error) {
	if binDir != "" {
		b, err := binariesIn(binDir)
		if err != nil {
			return binaries{}, fmt.Errorf("%s=%s: %w", envBin, binDir, err)
		}
		return b, nil
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		// Prefer the postgres beside initdb: it is the one initdb runs.
		if b, err := binariesIn(filepath.Dir(initdb)); err == nil {
			return b, nil
		}
		if postgres, err := exec.LookPath("postgres"); err == nil {
			return binaries{initdb: initdb, postgres: postgres}, nil
		}
	}
	dirs, _ := filepath.Glob(fallbackGlob) // the only error is a malformed pattern
	slices.SortFunc(dirs, func(a, b string) int {
		return slices.Compare(versionOf(b), versionOf(a)) // newest first
	})
	for _, dir := range dirs {
		if b, err := binariesIn(dir); err == nil {
			return b, nil
		}
	}
	return binaries{}, fmt.Errorf("PostgreSQL server programs initdb and postgres not found on PATH or in %s; install the server or set %s to their directory", fallbackGlob, envBin)
}

// binariesIn returns the paths of initdb and postgres in dir, if both are
// executable files there.
func binariesIn(dir string) (binaries, error) {
	var b binaries
	for _, p := range []struct {
		name string
		path *string
	}{{"initdb", &b.initdb}, {"postgres", &b.postgres}} {
		path, err := exec.LookPath(filepath.Join(dir, p.name))
		if err != nil {
			return binaries{}, fmt.Errorf("no %s program: %w", p.name, err)
		}
		*p.path = path
	}
	return b, nil
}

// versionOf returns the numeric version in the name of the parent of dir,
// as in /usr/lib/postgresql/9.6/bin, or nil when that is not a version.
func versionOf(dir string) []int {
	var v []int
	for f := range strings.SplitSeq(filepath.Base(filepath.Dir(dir)), ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

// server is a throwaway PostgreSQL server running as a child process.
type server struct {
	dir       *ownedDir // temporary directory holding data, socket and log
	url       string    // admin URL, over TCP
	socketURL string    // admin URL over the Unix socket in dir
	port      int
	postgres  string      // the server program
	cred      *credential // whom it runs as, nil for the test process's user
	extra     []string    // settings beyond serverSettings
	cmd       *exec.Cmd
	ended     bool  // whether exited has found cmd's process ended, and reaped it
	waitErr   error // how it ended, valid once ended
}

// startServer initialises a cluster in a new temporary directory, an
// ownedDir of serverDirPrefix, and starts a server on it, listening on a
// free port of 127.0.0.1, with serverSettings and then extra, which may
// override them. Making the directory removes those of test processes
// that died without removing theirs.
func startServer(ctx context.Context, bins binaries, extra ...string) (_ *server, err error) {
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	owned, err := makeOwnedDir(os.TempDir(), serverDirPrefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			owned.remove()
		}
	}()
	dir := owned.path
	if !filepath.IsAbs(dir) { // TMPDIR is relative
		return nil, fmt.Errorf("temporary directory %s is not absolute; set TMPDIR to an absolute path", dir)
	}
	if cred != nil {
		if err := giveDir(dir, cred); err != nil {
			return nil, err
		}
	}

	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, bins.initdb,
		"-D", data, "-U", superuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir // the test's directory may be out of the OS user's reach
	initdb.SysProcAttr = procAttr(cred, false, syscall.SIGKILL)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", bins.initdb, err, tail(out))
	}

	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		srv, err := launch(ctx, bins.postgres, owned, cred, port, extra)
		if err == nil || !errors.Is(err, errPortInUse) || attempt == portAttempts {
			return srv, err
		}
	}
}

// launch starts postgres on port with the cluster initialised in owned,
// with serverSettings and then extra, and waits until it accepts
// connections.
func launch(ctx context.Context, postgres string, owned *ownedDir, cred *credential, port int, extra []string) (*server, error) {
	dir := owned.path
	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the server writes to its own copy of the descriptor

	args := []string{"-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(port), "-k", dir}
	for _, s := range slices.Concat(serverSettings, extra) {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(postgres, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The server gets its own process group so that a Ctrl-C to the tests
	// does not reach it; if the test process dies, the kernel sends it
	// SIGQUIT, an immediate shutdown, where the system can (Linux,
	// FreeBSD).
	cmd.SysProcAttr = procAttr(cred, true, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &server{
		dir:       owned,
		port:      port,
		postgres:  postgres,
		cred:      cred,
		extra:     extra,
		url:       fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", superuser, port),
		socketURL: socketURL(dir, port),
		cmd:       cmd,
	}

	if err := srv.waitReady(ctx); err != nil {
		stopErr := srv.shutdown()
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log, []byte("Address already in use")) {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return nil, fmt.Errorf("%s: %w\n--- server log (tail) ---\n%s", postgres, errors.Join(err, stopErr), tail(log))
	}
	return srv, nil
}

// socketURL returns the admin URL of a server listening on port with its
// Unix socket in dir.
func socketURL(dir string, port int) string {
	q := url.Values{"host": {dir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	return fmt.Sprintf("postgres://%s@/postgres?%s", superuser, q.Encode())
}

// waitReady waits until the server accepts connections, exits or ctx is
// done.
//
// It connects through the server's Unix socket, which no other server can
// have created: over TCP it might reach another server that had the port
// first, such as one started by another test process, while this one fails
// to bind it. The server creates its socket after binding its TCP port, so
// once it accepts connections on the socket it does on the port too.
func (s *server) waitReady(ctx context.Context) error {
	ticker := time.NewTicker(readyPoll)
	defer ticker.Stop()
	for {
		err := ping(ctx, s.socketURL)
		if err == nil {
			return nil
		}
		if s.exited() {
			return fmt.Errorf("server exited while starting: %w", s.waitErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w (last attempt: %w)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// close stops the server and removes its directory.
func (s *server) close() error {
	return errors.Join(s.shutdown(), s.dir.remove())
}

// shutdown stops the server with a fast shutdown (SIGINT), escalating to an
// immediate shutdown (SIGQUIT) and then to SIGKILL for its whole process
// group when the previous step takes longer than stopTimeout.
func (s *server) shutdown() error { return s.stop("postgres", syscall.SIGINT, syscall.SIGQUIT) }

// stop stops s's process, the program name: it sends each of signals in
// turn, then SIGKILL to its whole process group, going to the next step
// when the process has not exited stopTimeout after the last.
func (s *server) stop(name string, signals ...syscall.Signal) error {
	pid := s.cmd.Process.Pid
	var steps []func() error
	for _, sig := range signals {
		steps = append(steps, func() error { return s.cmd.Process.Signal(sig) })
	}
	steps = append(steps, func() error { return killGroup(pid) })
	for _, signal := range steps {
		if s.exited() {
			return nil
		}
		if err := signal(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
		}
		if s.awaitExit(stopTimeout) {
			return nil
		}
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", name, pid)
}

// exited reports whether the server's process has ended, without waiting
// for it: the first time it finds so, it reaps the process and records in
// waitErr how it ended. No goroutine waits on a running server: the
// server outlives tests, and a goroutine of its own would be what a
// goroutine leak check (goleak) run after them reports.
func (s *server) exited() bool {
	if s.ended {
		return true
	}
	ended, how := reap(s.cmd.Process.Pid)
	if !ended {
		return false
	}
	s.ended, s.waitErr = true, how
	_ = s.cmd.Process.Release() // reaped: nothing is left to wait for or signal
	return true
}

// awaitExit polls exited until it reports the server's process ended, or
// d has passed; it reports whether the process ended.
func (s *server) awaitExit(d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	ticker := time.NewTicker(readyPoll)
	defer ticker.Stop()
	for !s.exited() {
		select {
		case <-ticker.C:
		case <-deadline.C:
			return s.exited()
		}
	}
	return true
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of out, at most logTailBytes of them.
func tail(out []byte) []byte {
	if len(out) <= logTailBytes {
		return out
	}
	out = out[len(out)-logTailBytes:]
	if i := bytes.IndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	return out
}

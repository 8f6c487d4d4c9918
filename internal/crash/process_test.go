package crash_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/courier-go/courier/internal/crash"
)

// Bounds of the parent's waits on a child.
const (
	readyBound = 60 * time.Second // from start to its ready line
	exitBound  = 30 * time.Second // from SIGKILL or closed stdin to its exit
	tailBytes  = 32 << 10         // how much of a child's stderr is kept
)

// proc is one child process: one incarnation of the sender or receiver.
type proc struct {
	spec  crash.Spec
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it asks the child to stop
	ready chan struct{}  // closed when the child printed crash.ReadyLine
	done  chan struct{}  // closed when the child has exited and been reaped
	tail  *tailBuffer
	// killed is set by the parent before it sends SIGKILL.
	killed bool
	// waitErr is cmd.Wait's result, valid once done is closed.
	waitErr error
}

// startProc starts the test binary again as the child spec describes:
// in its own process group (so a kill reaches everything it runs), killed
// by the kernel if the parent's thread dies (Pdeathsig), and told to stop
// by its stdin closing, which also happens if the parent dies.
func startProc(spec crash.Spec, notes io.Writer) (*proc, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashProcess$", "-test.count=1", "-test.timeout=0")
	cmd.Env = append(os.Environ(), spec.Environ()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &proc{spec: spec, cmd: cmd, ready: make(chan struct{}), done: make(chan struct{}), tail: &tailBuffer{}}
	cmd.Stdout = readyWriter(p.ready)
	cmd.Stderr = io.MultiWriter(p.tail, notes)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Role, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL to the child's process group and waits until it is
// reaped. A child that has exited already is left as it is.
func (p *proc) kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.killed = true
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.spec.Role, err)
	}
	return p.await()
}

// await waits until the child has exited, killing it if it takes too long.
func (p *proc) await() error {
	t := time.NewTimer(exitBound)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return fmt.Errorf("%s incarnation %d did not exit within %v", p.spec.Role, p.spec.Incarnation, exitBound)
	}
}

// exited reports whether the child has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// selfKilled reports whether the child, reaped, died of the SIGKILL it
// sent itself after a commit.
func (p *proc) selfKilled() bool {
	return !p.killed && diedOfSIGKILL(p.waitErr) && strings.Contains(p.tail.String(), crash.SelfKillLine)
}

// cleanExit reports whether the child, reaped, exited 0.
func (p *proc) cleanExit() bool { return p.waitErr == nil }

func (p *proc) String() string {
	return fmt.Sprintf("%s incarnation %d (pid %d)", p.spec.Role, p.spec.Incarnation, p.cmd.Process.Pid)
}

// describe says how the child ended, with the end of its stderr.
func (p *proc) describe() string {
	return fmt.Sprintf("%s: %v; its stderr ends:\n%s", p, p.waitErr, p.tail.String())
}

func diedOfSIGKILL(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// lineWriter splits what a child writes into lines (each cut at 4 KiB)
// and hands each to line, under its lock.
type lineWriter struct {
	mu       sync.Mutex
	pending  []byte
	lineFunc func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range b {
		if c != '\n' {
			if len(w.pending) < 4096 {
				w.pending = append(w.pending, c)
			}
			continue
		}
		w.lineFunc(string(w.pending))
		w.pending = w.pending[:0]
	}
	return len(b), nil
}

// readyWriter is a child's stdout: it closes ready at crash.ReadyLine.
func readyWriter(ready chan struct{}) io.Writer {
	var once sync.Once
	return &lineWriter{lineFunc: func(line string) {
		if line == crash.ReadyLine {
			once.Do(func() { close(ready) })
		}
	}}
}

// tailBuffer keeps the last tailBytes of a child's stderr.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - tailBytes; over > 0 {
		b.buf = bytes.Clone(b.buf[over:])
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// fixedAddr picks, once per run, the loopback address the receiver serves
// on in every incarnation. It is chosen below the kernel's ephemeral port
// range, so that no outgoing connection (the sender's among them) can be
// given it as a source port while the receiver is down; and never twice
// in one test process.
var picked struct {
	mu    sync.Mutex
	ports map[int]bool
}

func fixedAddr(t *testing.T, pick func(n int) int) string {
	t.Helper()
	picked.mu.Lock()
	defer picked.mu.Unlock()
	if picked.ports == nil {
		picked.ports = make(map[int]bool)
	}
	const lowest = 10000
	if low := ephemeralLow(); low > lowest+1000 {
		for range 200 {
			port := lowest + pick(low-lowest)
			if picked.ports[port] {
				continue
			}
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				continue
			}
			ln.Close()
			picked.ports[port] = true
			return ln.Addr().String()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // fall back to any free port
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	picked.ports[ln.Addr().(*net.TCPAddr).Port] = true
	return ln.Addr().String()
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or
// 0 if it cannot tell.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0
	}
	return low
}

//go:build linux

package refusing

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// holds says whether Addr keeps its port from other sockets.
const holds = true

// addr binds a TCP socket to a port of 127.0.0.1 the kernel chooses and
// never listens on it: Linux answers a connection to a port with no
// listener with a reset, whether or not a socket is bound to it, and the
// bound socket keeps every other from binding the port, a listener's
// SO_REUSEADDR notwithstanding, since this one does not set it. The kernel
// does not give a bound port out as the source of a connection either.
func addr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("refusing: socket: %v", err)
	}
	tb.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatalf("refusing: bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatalf("refusing: getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok || in4.Port == 0 {
		tb.Fatalf("refusing: the socket is bound to %#v, want a port of 127.0.0.1", sa)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(in4.Port))
}

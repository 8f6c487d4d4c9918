//go:build !linux

package refusing

import (
	"net"
	"testing"
)

// holds says whether Addr keeps its port from other sockets.
const holds = false

// addr listens on a port of 127.0.0.1 the system chooses and closes the
// listener: nothing listens there when addr returns, but the port is not
// held, and another listener may take it before the test connects.
func addr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("refusing: %v", err)
	}
	a := l.Addr().String()
	if err := l.Close(); err != nil {
		tb.Fatalf("refusing: %v", err)
	}
	return a
}

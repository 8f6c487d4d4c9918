// Package refusing gives tests a loopback address that refuses
// connections for as long as the test runs.
//
// The usual way to get such an address, listening on port 0 and closing
// the listener, leaves the port free: another process, or another test
// running in parallel, may take it before the test connects, and the test
// then reaches a server where it counted on a refusal. On Linux, Addr
// holds the port instead: a socket bound to it but not listening, without
// SO_REUSEADDR, so that no other socket can bind the port and a connection
// to it is refused (ECONNREFUSED), until the test's cleanup closes it.
// Elsewhere Addr falls back to the usual way: the port was free when Addr
// returned, and nothing keeps it so.
package refusing

import "testing"

// Addr returns an address of 127.0.0.1, "127.0.0.1:port", to which a TCP
// connection is refused until tb's cleanup. Where the port cannot be held
// (off Linux) it is one that nothing listened on when Addr returned.
func Addr(tb testing.TB) string {
	tb.Helper()
	return addr(tb)
}

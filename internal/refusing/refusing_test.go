package refusing

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestAConnectionToAddrIsRefused: a TCP connection to the address is
// refused, ECONNREFUSED, while the test holds it.
func TestAConnectionToAddrIsRefused(t *testing.T) {
	if !holds {
		t.Skip("off Linux Addr holds no port: nothing says what a connection meets")
	}
	t.Parallel()
	a := Addr(t)
	for range 3 {
		var d net.Dialer
		c, err := d.DialContext(t.Context(), "tcp", a)
		if err == nil {
			c.Close()
			t.Fatalf("a connection to %s was accepted, want it refused", a)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("a connection to %s failed with %v, want ECONNREFUSED", a, err)
		}
	}
}

// TestNoListenerTakesAddrsPort: while the test holds the address, a
// listener on its port, on 127.0.0.1 or on every address, cannot bind it
// (net.Listen sets SO_REUSEADDR, which does not get past the holder), and
// a connection is still refused after the attempts.
func TestNoListenerTakesAddrsPort(t *testing.T) {
	if !holds {
		t.Skip("off Linux Addr holds no port")
	}
	t.Parallel()
	a := Addr(t)
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []string{a, "0.0.0.0:" + port, ":" + port} {
		l, err := net.Listen("tcp", on)
		if err == nil {
			l.Close()
			t.Fatalf("a listener took %s while %s was held", on, a)
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("listening on %s failed with %v, want EADDRINUSE", on, err)
		}
	}
	var d net.Dialer
	if c, err := d.DialContext(t.Context(), "tcp", a); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("after the listeners tried, a connection to %s = %v, want ECONNREFUSED", a, err)
	}
}

// TestAddrLetsThePortGoAtCleanup: once the test that asked for the
// address has ended, its port is free again: a listener binds it.
func TestAddrLetsThePortGoAtCleanup(t *testing.T) {
	if !holds {
		t.Skip("off Linux Addr holds no port")
	}
	var a string
	t.Run("holding", func(t *testing.T) { a = Addr(t) })
	l, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("after the cleanup, listening on %s = %v, want the port free", a, err)
	}
	l.Close()
}

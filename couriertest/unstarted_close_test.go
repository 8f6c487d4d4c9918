package couriertest_test

import (
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/courier-go/courier/couriertest"
)

// TestCloseOfUnstartedServerClosesItsListener: a test that listens first
// (as RFC9421Keys has it), hands the listener to an unstarted Server and
// defers Close, then fails before Start, has its listener closed, as
// httptest.Server's Close closes the Listener it was given.
func TestCloseOfUnstartedServerClosesItsListener(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewUnstartedServer(http.NotFoundHandler(), nil)
	srv.Listener = l
	srv.Close()
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
		l.Close()
		t.Fatalf("%s still accepts connections after Close; want its listener closed", l.Addr())
	}
	if err := l.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("closing the listener again: %v; want %v", err, net.ErrClosed)
	}
}

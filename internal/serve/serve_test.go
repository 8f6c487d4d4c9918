package serve

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier/internal/testmain"
)

// TestServerBoundsEveryPhase: the examples' servers bound the header, the
// body, the response and idle connections, and the header's size, so a
// slow or idle client cannot hold a connection or memory without end.
func TestServerBoundsEveryPhase(t *testing.T) {
	s := Server(http.NotFoundHandler())
	for name, v := range map[string]int64{
		"ReadHeaderTimeout": int64(s.ReadHeaderTimeout),
		"ReadTimeout":       int64(s.ReadTimeout),
		"WriteTimeout":      int64(s.WriteTimeout),
		"IdleTimeout":       int64(s.IdleTimeout),
		"MaxHeaderBytes":    int64(s.MaxHeaderBytes),
	} {
		if v <= 0 {
			t.Errorf("%s is %d: unbounded", name, v)
		}
	}
	if s.ReadTimeout > 30e9 {
		t.Errorf("ReadTimeout %s: more than 30 s for a body", s.ReadTimeout)
	}
}

func TestMain(m *testing.M) { testmain.Main(m) }

// TestRunLetsARequestInFlightFinish: once its context ends, Run shuts the
// server down, and a request it is serving still gets its answer; Run
// then returns nil, and the listener takes no more connections.
func TestRunLetsARequestInFlightFinish(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ctx, cancel := context.WithCancel(t.Context())
	srv := Server(h)
	// The handler answers only once the shutdown has begun: its request
	// is in flight at shutdown, not one that may have ended before it.
	srv.RegisterOnShutdown(func() { close(release) })
	ran := make(chan error, 1)
	go func() { ran <- Run(ctx, srv, ln) }()

	type answer struct {
		body string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answered <- answer{string(b), err}
	}()
	<-started
	cancel()
	if a := <-answered; a.err != nil || a.body != "finished" {
		t.Fatalf("the request in flight at shutdown: %q, %v; want its answer", a.body, a.err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v, want nil after a shutdown", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the listener still takes connections after Run returned")
	}
}

// TestSecret: the secret comes from the file, its surrounding white space
// (a trailing newline) trimmed, or from COURIER_SECRET without one; none,
// an unreadable file and an empty one are errors that say which.
func TestSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("COURIER_SECRET", "")
	if s, err := Secret(""); err == nil || !strings.Contains(err.Error(), "COURIER_SECRET") {
		t.Errorf("Secret(\"\") with no COURIER_SECRET = %q, %v; want an error naming it", s, err)
	}
	t.Setenv("COURIER_SECRET", "whsec_fromenv")
	if s, err := Secret(""); err != nil || s != "whsec_fromenv" {
		t.Errorf("Secret(\"\") = %q, %v; want COURIER_SECRET's", s, err)
	}
	if s, err := Secret(write("nl", "whsec_fromfile\n")); err != nil || s != "whsec_fromfile" {
		t.Errorf("Secret(file) = %q, %v; want the file's, trimmed", s, err)
	}
	if s, err := Secret(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "secret file") {
		t.Errorf("Secret(missing file) = %q, %v; want an error naming the secret file", s, err)
	}
	if s, err := Secret(write("empty", " \n")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("Secret(empty file) = %q, %v; want an error saying it is empty", s, err)
	}
}

package main

import (
	"bufio"
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/serve"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestSenderGuardClosedByDefault: the example's worker opened its SSRF
// guard for loopback unless told otherwise. With no flags the guard is
// closed: a delivery to a loopback receiver is refused before it is sent.
func TestSenderGuardClosedByDefault(t *testing.T) {
	t.Parallel()
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }))
	defer srv.Close()

	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.allowPrivate {
		t.Fatal("-allow-private defaults to true")
	}
	for _, tc := range []struct {
		allowPrivate bool
		wantRefused  bool
	}{{o.allowPrivate, true}, {true, false}} {
		guard, err := guardFor(srv.URL, tc.allowPrivate)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("{}"))
		resp, err := guard.Transport().RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		if refused := errors.Is(err, courier.CodeDestinationForbidden); refused != tc.wantRefused {
			t.Errorf("allow-private=%v: refused=%v (%v), want %v", tc.allowPrivate, refused, err, tc.wantRefused)
		}
	}
	if hits != 1 {
		t.Errorf("the receiver saw %d requests, want 1 (the opened guard's)", hits)
	}
}

// TestSenderTakesNoSecretFromArgs: the secret was a flag, visible in ps.
// Now there is no such flag: it comes from the environment or a file.
func TestSenderTakesNoSecretFromArgs(t *testing.T) {
	if _, err := parseFlags([]string{"-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}); err == nil {
		t.Fatal("-secret is accepted on the command line")
	}
	t.Setenv("COURIER_SECRET", "")
	o, _ := parseFlags(nil)
	if _, err := serve.Secret(o.secretFile); err == nil {
		t.Fatal("no secret in the environment or a file, yet one was found")
	}
}

// TestSenderStopsWorkerWhenListenFails: the worker was started before the
// application's listener; when the address was taken, run returned its
// error with the worker still running on a closed store, its claimed
// deliveries cut short when the process exited. Now a listener that
// cannot be opened stops run before any worker starts.
func TestSenderStopsWorkerWhenListenFails(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	logger := slog.New(slog.DiscardHandler)
	err = run(taken.Addr().String(), filepath.Join(t.TempDir(), "sender.db"), "http://127.0.0.1:1/terminal",
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true, logger)
	if err == nil {
		t.Fatal("run listened on a taken address")
	}
	if leak := goleak.Find(ignore); leak != nil {
		t.Fatalf("run returned %q and left goroutines running: %v", err, leak)
	}
}

// TestSenderHelpExitsZero: -h printed the usage and exited 2, as for a
// wrong flag, so a script asking for help saw a failure. It exits 0 now;
// a flag that does not exist still exits 2.
func TestSenderHelpExitsZero(t *testing.T) {
	if args := os.Getenv("COURIER_SENDER_ARGS"); args != "" {
		os.Args = append([]string{"sender"}, strings.Fields(args)...)
		main()
		return
	}
	for args, want := range map[string]int{"-h": 0, "-help": 0, "-no-such-flag": 2} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSenderHelpExitsZero$")
		cmd.Env = append(os.Environ(), "COURIER_SENDER_ARGS="+args)
		out, err := cmd.CombinedOutput()
		code := 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want || !strings.Contains(string(out), "Usage of sender") {
			t.Errorf("sender %s: exit %d, want %d, output:\n%s", args, code, want, out)
		}
	}
}

// TestSenderRefusesUnusableEndpoint: a -to that is not an absolute http or
// https URL started the program anyway, and every publication was then
// answered 500 "enqueue failed", with nothing logged to say why. Now the
// program stops at once, naming -to.
func TestSenderRefusesUnusableEndpoint(t *testing.T) {
	// A taken address: a run that got past the endpoint's check stops
	// there rather than serving.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, to := range []string{"ftp://127.0.0.1:8080/terminal", "127.0.0.1:8080/terminal", "/terminal", "http:///terminal"} {
		err := run(taken.Addr().String(), filepath.Join(t.TempDir(), "sender.db"), to,
			"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "-to") {
			t.Errorf("-to %q: run returned %v, want a refusal of -to", to, err)
		}
	}
}

// TestSenderAllowPrivateOpensOnlyTheEndpointsPort: -allow-private opened
// port 80 of every private address as well as the endpoint's port. It
// opens the endpoint's port alone (80 or 443 when the URL names none).
func TestSenderAllowPrivateOpensOnlyTheEndpointsPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		endpoint, dial string
		open           bool
	}{
		{"http://127.0.0.1:8080/terminal", "http://127.0.0.1:8080/", true},
		{"http://127.0.0.1:8080/terminal", "http://127.0.0.1:80/", false},
		{"http://127.0.0.1:8080/terminal", "http://127.0.0.1:8081/", false},
		{"http://127.0.0.1/terminal", "http://127.0.0.1:80/", true},
		{"http://127.0.0.1/terminal", "http://127.0.0.1:8080/", false},
		{"https://127.0.0.1/terminal", "https://127.0.0.1:443/", true},
		{"https://127.0.0.1/terminal", "http://127.0.0.1:80/", false},
	} {
		guard, err := guardFor(tc.endpoint, true)
		if err != nil {
			t.Fatal(err)
		}
		// Nothing need listen: the guard refuses before it dials, and an
		// address it admits fails to connect, or connects, instead.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tc.dial, strings.NewReader("{}"))
		resp, err := guard.Transport().RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		if open := !errors.Is(err, courier.CodeDestinationForbidden); open != tc.open {
			t.Errorf("-to %s: %s open=%v (%v), want %v", tc.endpoint, tc.dial, open, err, tc.open)
		}
	}
}

// TestSenderRefusesHTTPWithGuardClosed: with its defaults (-to on plain
// http, the guard closed) the program started, answered each publication
// 202, and every delivery then failed for good with destination_forbidden.
// Now it stops at once and says to use https or -allow-private.
func TestSenderRefusesHTTPWithGuardClosed(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	err = run(taken.Addr().String(), filepath.Join(t.TempDir(), "sender.db"), o.to,
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", o.allowPrivate, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "-allow-private") {
		t.Fatalf("-to %s with the guard closed: run returned %v, want a refusal naming -allow-private", o.to, err)
	}
	// Opened, the same -to gets as far as the listener.
	err = run(taken.Addr().String(), filepath.Join(t.TempDir(), "sender.db"), o.to,
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true, slog.New(slog.DiscardHandler))
	if err == nil || strings.Contains(err.Error(), "-to") {
		t.Fatalf("-to %s with -allow-private: run returned %v, want the taken address's error", o.to, err)
	}
}

// TestSenderLogsFailedPublish: a publication whose enqueue failed was
// answered 500 and nothing was logged, so an operator saw nothing of it.
// The failure is logged at Error now, with its code; the business write
// is rolled back with it.
func TestSenderLogsFailedPublish(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "sender.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, schema); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	// An endpoint Enqueue refuses (invalid_argument): every enqueue fails.
	srv := httptest.NewServer(routes(s, "ftp://receiver.example/terminal", logger))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/plans/plan-1/publish", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("a failed enqueue answered %d, want 500", resp.StatusCode)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "code=invalid_argument") {
		t.Fatalf("a publish answered 500 and logged %q, want an Error with its code", logs.String())
	}
	var n int
	if err := s.DB().GetContext(ctx, &n, "SELECT COUNT(*) FROM publications"); err != nil || n != 0 {
		t.Fatalf("%d publications kept (%v) for a publish that failed, want none", n, err)
	}
}

// TestSenderDoesNotPrintTheEndpointsPath: the sender printed its -to in
// full as it started, and an endpoint's path or query may be its secret
// (chat services' webhook URLs are). It prints scheme and host now, as
// courier's own logs show an endpoint.
func TestSenderDoesNotPrintTheEndpointsPath(t *testing.T) {
	if args := os.Getenv("COURIER_SENDER_SERVE"); args != "" {
		os.Args = append([]string{"sender"}, strings.Fields(args)...)
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSenderDoesNotPrintTheEndpointsPath$")
	cmd.Env = append(os.Environ(), "COURIER_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		"COURIER_SENDER_SERVE=-addr 127.0.0.1:0 -allow-private -db "+filepath.Join(t.TempDir(), "sender.db")+
			" -to http://127.0.0.1:9/hooks/T0KEN-in-the-path?key=T0KEN-in-the-query")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		printed.WriteString(lines.Text() + "\n")
		if strings.Contains(lines.Text(), "listening") {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		printed.WriteString(lines.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the sender stopped with %v at SIGTERM, want exit 0:\n%s", err, printed.String())
	}
	if !strings.Contains(printed.String(), "listening") || !strings.Contains(printed.String(), "http://127.0.0.1:9/…") {
		t.Fatalf("the sender printed no start line naming its endpoint as scheme://host/…:\n%s", printed.String())
	}
	if strings.Contains(printed.String(), "T0KEN") {
		t.Fatalf("the sender printed its endpoint's path or query:\n%s", printed.String())
	}
}

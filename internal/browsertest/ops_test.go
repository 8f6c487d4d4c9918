package browsertest

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/admin"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

const (
	prefix   = "/ops/courier"
	endpoint = "https://receiver.example/hooks"
	shown    = "https://receiver.example/…" // endpoint as the page shows it: its path may be a credential
	session  = "ops-session-0123456789abcdef"
)

// chromium finds the browser. Without it the test skips, or fails under
// COURIER_BROWSER_REQUIRE=1.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		msg := "chromium not found on PATH; install Debian's chromium package (apt-get install chromium)"
		if os.Getenv("COURIER_BROWSER_REQUIRE") == "1" {
			t.Fatal(msg + ", required by COURIER_BROWSER_REQUIRE=1")
		}
		t.Skip(msg + "; set COURIER_BROWSER_REQUIRE=1 to fail instead")
	}
	return path
}

// browser starts headless Chromium at path and returns a tab's context.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000),
	)
	// The whole browser session is bounded; nothing waits on a clock.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	ctx, cancelTab := chromedp.NewContext(ctx)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// artifacts is where screenshots go: $COURIER_ARTIFACTS, or testdata/out
// (ignored by git), since t.TempDir is deleted after the test.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("COURIER_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "out")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s is not a PNG", name)
	}
	path := filepath.Join(artifacts(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// setup serves an Admin under prefix over a SQLite outbox holding one
// failed delivery, behind a stand-in for the application's login, which
// sets the session cookie Authorize checks.
func setup(t *testing.T) (*store.Store, *httptest.Server, int64) {
	t.Helper()
	return setupAuthorized(t, func(r *http.Request) error {
		c, err := r.Cookie("session")
		if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(session)) != 1 {
			return errors.New("no operator session")
		}
		return nil
	})
}

// setupAuthorized is setup with authorize as the Admin's Authorize.
func setupAuthorized(t *testing.T, authorize func(*http.Request) error) (*store.Store, *httptest.Server, int64) {
	t.Helper()
	ctx := t.Context()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "outbox.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
		NotificationID: "order-42-shipped", Endpoint: endpoint, Payload: []byte(`{"order":42}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := protocol.For(s).Claim(ctx, protocol.ClaimParams{Owner: "worker-1", Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if _, err := protocol.For(s).Settle(ctx, protocol.Outcome{Lease: claimed[0].Lease, Result: protocol.Failed, Code: courier.CodeReceiverUnavailable, HTTPStatus: http.StatusServiceUnavailable}); err != nil {
		t.Fatal(err)
	}

	h, err := admin.NewHandler(admin.Config{Store: s, Authorize: authorize})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, prefix+"/", http.StatusSeeOther)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return s, srv, e.ID
}

func text(t *testing.T, ctx context.Context, sel chromedp.CSS) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func TestOpsPageRedrive(t *testing.T) {
	path := chromium(t)
	s, srv, id := setup(t)
	ctx := browser(t, path) // after setup: its cleanup closes the browser before the server
	sid := strconv.FormatInt(id, 10)

	// Log in and land on the ops page, which shows the failure.
	resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(srv.URL+"/login"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || !strings.HasSuffix(resp.URL, prefix+"/") {
		t.Fatalf("ops page: %d at %s", resp.Status, resp.URL)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.ID("redrive-"+sid))); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, "#health h2"); !strings.Contains(got, "blocked") || !strings.Contains(got, "deliveries_failed") {
		t.Errorf("health: %q", got)
	}
	failures := text(t, ctx, "#failures")
	for _, want := range []string{"order-42-shipped", shown, "failed", "receiver_unavailable", "HTTP 503"} {
		if !strings.Contains(failures, want) {
			t.Errorf("recent failures lack %q: %q", want, failures)
		}
	}
	if got := text(t, ctx, "#endpoints"); !strings.Contains(got, shown) || !strings.Contains(got, "closed") {
		t.Errorf("failing endpoints: %q", got)
	}
	// The inline style passed the page's Content-Security-Policy.
	bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("header")).backgroundColor`))
	if err != nil || bg != "rgb(34, 34, 34)" {
		t.Errorf("header background %q (%v): the inline style was blocked", bg, err)
	}
	screenshot(t, ctx, "ops-before-redrive.png")

	// Redrive it: the form posts, the Admin answers 303, the page reloads.
	resp, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("redrive-"+sid)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || !strings.HasSuffix(resp.URL, prefix+"/?done=redrive&n=1") {
		t.Fatalf("after redrive: %d at %s", resp.Status, resp.URL)
	}
	if got := text(t, ctx, "#flash"); got != "Moved 1 delivery back to pending." {
		t.Errorf("flash %q", got)
	}
	if got := text(t, ctx, "#failures"); !strings.Contains(got, "No failed deliveries.") {
		t.Errorf("recent failures after redrive: %q", got)
	}
	if got := text(t, ctx, "#latest"); !strings.Contains(got, "order-42-shipped") || !strings.Contains(got, "pending") {
		t.Errorf("latest deliveries after redrive: %q", got)
	}
	if got := text(t, ctx, "#health h2"); !strings.Contains(got, "ok") {
		t.Errorf("health after redrive: %q", got)
	}
	screenshot(t, ctx, "ops-after-redrive.png")

	// Its own page says pending too, and so does the store.
	resp, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#latest a[href="./deliveries/`+sid+`"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK || !strings.HasSuffix(resp.URL, prefix+"/deliveries/"+sid) {
		t.Fatalf("delivery page: %d at %s", resp.Status, resp.URL)
	}
	if got := text(t, ctx, "#status"); got != "pending" {
		t.Errorf("delivery page status %q", got)
	}
	screenshot(t, ctx, "delivery-after-redrive.png")
	d, err := s.Outbox.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != courier.StatusPending || d.LastErrorCode != "" {
		t.Fatalf("stored delivery: %s %s", d.Status, d.LastErrorCode)
	}
}

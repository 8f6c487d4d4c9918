package middleware_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"

	"github.com/courier-go/courier/middleware"
)

// TestRecoverPanicNilUnderGODEBUG: with GODEBUG=panicnil=1, recover
// returns nil for panic(nil), and Recover took the panic for a handler
// that returned. Under Recover(Transaction(app)) the transaction was
// rolled back, nothing of app's held 200 was sent, and net/http answered
// an empty 200: the sender saw success for effects that were undone.
func TestRecoverPanicNilUnderGODEBUG(t *testing.T) {
	if os.Getenv("COURIER_TEST_PANICNIL") != "1" {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRecoverPanicNilUnderGODEBUG$", "-test.v")
		cmd.Env = append(os.Environ(), "GODEBUG=panicnil=1", "COURIER_TEST_PANICNIL=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("under GODEBUG=panicnil=1: %v\n%s", err, out)
		}
		return
	}
	b := setupTx(t)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		insertItem(t, r)
		io.WriteString(w, "applied")
		panic(nil) //nolint:govet // the case under test
	})
	srv := httptest.NewServer(middleware.Recover(nil)(middleware.Transaction(b.store.Begin)(app)))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	got := readAll(t, resp)
	n, err := countItems(t.Context(), b.db)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("status = %d (body %q) with %d items committed, want 500", resp.StatusCode, got, n)
	}
	if n != 0 {
		t.Errorf("%d items committed, want 0", n)
	}
}

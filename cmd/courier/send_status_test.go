package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/courier-go/courier/signature"
)

// TestSendThatIsNotAcceptedFails: a send the receiver refuses, or
// answers 2xx with an Ack that does not verify, exits 1, the command
// failed, as a send that gets no answer does, and says why on stderr: it
// exited 3, which is health's blocked and verify's refusal.
func TestSendThatIsNotAcceptedFails(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(signature.NewStandardWebhooksSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		status   int
		answer   string
		out, err string // what stdout and stderr say
	}{
		{"refused", http.StatusBadRequest, `{"code":"validation_failed"}`, "status: 400", "the receiver refused the notification: status 400"},
		{"an Ack that does not verify", http.StatusOK, `{"schema":"courier.ack.v1"}`, "ack: invalid", "the receiver's Ack does not verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.answer))
			}))
			defer srv.Close()
			code, out, errOut := courierRun(t, "send", "-url", srv.URL+"/notes", "-secret-file", secretFile, "-allow-private")
			if code != exitFailed || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.err) {
				t.Fatalf("send: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFailed, out, errOut)
			}
		})
	}
}

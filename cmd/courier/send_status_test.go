package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/courier-go/courier/signature"
)

// TestSendThatIsNotAcceptedFails: a send the receiver refuses, or asks to
// have again later, or answers 2xx with an Ack that does not verify,
// exits 1, the command
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
		// A 5xx (or 408, 425, 429) is no refusal: the receiver asks to be
		// tried again, as a worker would.
		{"not now", http.StatusServiceUnavailable, `{"code":"in_progress"}`, "status: 503", "the receiver did not take the notification now: status 503 (a worker would retry it)"},
		{"too many", http.StatusTooManyRequests, ``, "status: 429", "did not take the notification now: status 429"},
		// As client.DefaultClassify judges them: a 425 is retried, a
		// status of 600 or above is refused.
		{"too early", http.StatusTooEarly, ``, "status: 425", "did not take the notification now: status 425"},
		{"not HTTP", 600, ``, "status: 600", "the receiver refused the notification: status 600"},
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

// TestSendShowsAHostileAnswerInert: a refusal's answer is shown with its
// control characters and bytes that are not UTF-8 escaped: a receiver's
// body printed as it came could drive the operator's terminal (clear the
// screen, set the clipboard, rewrite a line that came before).
func TestSendShowsAHostileAnswerInert(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte(signature.NewStandardWebhooksSecret()), 0o600); err != nil {
		t.Fatal(err)
	}
	answer := "{\"code\":\"bad\"}\r\x1b[2J\x1b]52;c;cHduZWQ=\x07\xff\u202etxt.exe"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	code, out, _ := courierRun(t, "send", "-url", srv.URL+"/notes", "-secret-file", secretFile, "-allow-private")
	if code != exitFailed || strings.ContainsAny(out, "\r\x1b\x07\u202e") || !utf8.ValidString(out) ||
		!strings.Contains(out, `answer: {"code":"bad"}\r\x1b[2J\x1b]52;c;cHduZWQ=\a\xff\u202etxt.exe`) {
		t.Fatalf("send to a receiver answering with terminal controls: exit %d, stdout %q; want them escaped", code, out)
	}
}

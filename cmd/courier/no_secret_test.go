package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoSecretIsAUsageError: send or verify with no secret (neither
// -secret-file nor $COURIER_SECRET) exited 1, the status of a command
// that failed; it is a usage error, exit 2, as the package documents:
// the same command line would fail again. (A -db that does not parse is
// one too: TestDBIsNeverQuoted.)
func TestNoSecretIsAUsageError(t *testing.T) {
	t.Setenv("COURIER_SECRET", "")
	capture := filepath.Join(t.TempDir(), "capture.http")
	if err := os.WriteFile(capture, []byte("POST /h HTTP/1.1\r\nHost: r\r\n\r\n{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"send", "-url", "https://receiver.example/hooks"}, "no secret"},
		{[]string{"verify", "-request", capture}, "no secret"},
	} {
		code, out, errOut := courierRun(t, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.says) {
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d saying %q",
				strings.Join(tc.args, " "), code, out, errOut, exitUsage, tc.says)
		}
	}
}

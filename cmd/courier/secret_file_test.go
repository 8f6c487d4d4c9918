package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAnEmptySecretFileIsSaidToBeEmpty: send and verify read their key
// as the examples do (serve.Secret): a -secret-file holding nothing but
// white space is refused saying the file is empty, not that no secret
// was given, which sent the operator to look for a missing flag.
func TestAnEmptySecretFileIsSaidToBeEmpty(t *testing.T) {
	t.Parallel()
	empty := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	request := filepath.Join(t.TempDir(), "captured.http")
	if err := os.WriteFile(request, []byte("POST /hooks HTTP/1.1\r\nHost: r.example\r\nContent-Length: 2\r\n\r\n{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"send", "-url", "https://receiver.example/hooks", "-secret-file", empty},
		{"verify", "-request", request, "-secret-file", empty},
	} {
		code, _, errOut := courierRun(t, args...)
		if code == exitOK || !strings.Contains(errOut, "is empty") {
			t.Errorf("courier %s: exit %d, stderr %q; want it refused saying the secret file is empty", strings.Join(args, " "), code, errOut)
		}
	}
}

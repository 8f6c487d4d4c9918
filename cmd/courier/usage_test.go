package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyNeverQuotesTheCapture: verify's error for a capture that does
// not parse quoted the line it choked on: a secret file given as -request
// by mistake, or an Authorization line without its colon, ended up on
// stderr.
func TestVerifyNeverQuotesTheCapture(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	secretFile := filepath.Join(dir, "secret")
	capture := filepath.Join(dir, "capture.http")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(capture, []byte("POST /h HTTP/1.1\r\nHost: r\r\nAuthorization Bearer tok_LIVE_8f7d6\r\n\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, leak := range map[string]string{secretFile: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", capture: "tok_LIVE_8f7d6"} {
		code, _, errOut := courierRun(t, "verify", "-request", file, "-secret-file", secretFile)
		if code != exitFailed || !strings.Contains(errOut, "not an HTTP request") || strings.Contains(errOut, leak) {
			t.Errorf("verify -request %s: exit %d, stderr %q; want exit %d, without %q", filepath.Base(file), code, errOut, exitFailed, leak)
		}
	}
}

// TestUsageErrorsExitTwo: a missing -db and a -limit outside 1..1000 are
// usage errors, exit 2, as a missing -url is: they exited 1 (and -limit 0
// listed 100 rows).
func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	for _, args := range [][]string{
		{"health"},
		{"migrate"},
		{"deliveries", "list"},
		{"endpoints", "list"},
		{"deliveries", "list", "-db", db, "-limit", "0"},
		{"deliveries", "list", "-db", db, "-limit", "5000"},
	} {
		if code, _, errOut := courierRun(t, args...); code != exitUsage || strings.TrimSpace(errOut) == "" {
			t.Errorf("courier %s: exit %d, stderr %q; want %d with a message", strings.Join(args, " "), code, strings.TrimSpace(errOut), exitUsage)
		}
	}
}

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/signature"
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

// TestUsageErrorsExitTwo: a missing -db, a -limit outside 1..1000 and an
// argument the store refuses (invalid_argument) are usage errors, exit 2,
// as a missing -url is: they exited 1 (and -limit 0 listed 100 rows).
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
		{"endpoints", "limit", "-db", db, "-rate", "5", "not a url"}, // the store's invalid_argument
	} {
		if code, _, errOut := courierRun(t, args...); code != exitUsage || strings.TrimSpace(errOut) == "" {
			t.Errorf("courier %s: exit %d, stderr %q; want %d with a message", strings.Join(args, " "), code, strings.TrimSpace(errOut), exitUsage)
		}
	}
}

// TestSendRefusesAnIdNoReceiverAccepts: send's -id is a notification id,
// a token; another was sent (a space: signed and refused by the receiver,
// exit 1) or built into a default body that was no JSON (a quote: "-body
// is not one JSON document", for a -body never given).
func TestSendRefusesAnIdNoReceiverAccepts(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"n 1", `n"1`, strings.Repeat("n", 257)} {
		code, _, errOut := courierRun(t, "send", "-url", "http://127.0.0.1:1/notes", "-secret-file", "/nonexistent", "-id", id)
		if code != exitUsage || !strings.Contains(errOut, "-id must be") {
			t.Errorf("send -id %.20q: exit %d, stderr %q; want %d naming -id", id, code, strings.TrimSpace(errOut), exitUsage)
		}
	}
}

// TestDurationsOutOfRangeAreUsageErrors: verify's -tolerance under a
// second or over an hour (the most a verifier takes), a malformed -at and
// send's -timeout not above zero are usage errors, exit 2: -tolerance 0
// verified within the default five minutes, as if it were not given, and
// -timeout 0 sent nothing and failed, exit 1.
func TestDurationsOutOfRangeAreUsageErrors(t *testing.T) {
	t.Parallel()
	capture, secretFile := signedCapture(t, time.Now().Add(-time.Minute))
	mustRun(t, exitOK, "verify", "-request", capture, "-secret-file", secretFile) // signed a minute ago: within five
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	for _, args := range [][]string{
		{"verify", "-request", capture, "-secret-file", secretFile, "-tolerance", "0"},
		{"verify", "-request", capture, "-secret-file", secretFile, "-tolerance", "-1m"},
		{"verify", "-request", capture, "-secret-file", secretFile, "-tolerance", "500ms"},
		{"verify", "-request", capture, "-secret-file", secretFile, "-tolerance", "61m"},
		{"verify", "-request", capture, "-secret-file", secretFile, "-at", "yesterday"},
		{"send", "-url", srv.URL, "-secret-file", secretFile, "-allow-private", "-timeout", "0"},
		{"send", "-url", srv.URL, "-secret-file", secretFile, "-allow-private", "-timeout", "-1s"},
	} {
		if code, out, errOut := courierRun(t, args...); code != exitUsage || out != "" || !strings.Contains(errOut, args[len(args)-2]) {
			t.Errorf("courier %s: exit %d, stdout %q, stderr %q; want %d naming %s", strings.Join(args, " "), code, out, errOut, exitUsage, args[len(args)-2])
		}
	}
}

// TestVerifyAnOldCaptureAsOfItsTime: a capture signed three days ago is
// refused for its timestamp now, since no tolerance reaches that far, and
// verified as of a minute after it was signed (-at).
func TestVerifyAnOldCaptureAsOfItsTime(t *testing.T) {
	t.Parallel()
	signed := time.Now().Add(-72 * time.Hour).Truncate(time.Second)
	capture, secretFile := signedCapture(t, signed)
	if out := mustRun(t, exitBlocked, "verify", "-request", capture, "-secret-file", secretFile); !strings.Contains(out, "refused: signature_timestamp") {
		t.Errorf("verify a capture three days old: %q, want refused: signature_timestamp", out)
	}
	at := signed.Add(time.Minute).UTC().Format(time.RFC3339)
	if out := mustRun(t, exitOK, "verify", "-request", capture, "-secret-file", secretFile, "-at", at); !strings.Contains(out, "verified: sender sender") {
		t.Errorf("verify -at %s: %q, want verified", at, out)
	}
}

// signedCapture writes a notification request signed with Standard
// Webhooks at the instant at, as it came over the wire, and its secret,
// to files of their own; it returns their paths.
func signedCapture(t *testing.T, at time.Time) (capture, secretFile string) {
	t.Helper()
	dir := t.TempDir()
	secret := signature.NewStandardWebhooksSecret()
	secretFile = filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signature.ParseStandardWebhooksKey("k", secret)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"id":"n-1","test":true}`
	req := httptest.NewRequest(http.MethodPost, "http://r.example/notes", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Length", strconv.Itoa(len(body))) // as it came over the wire
	if err := signer.Sign(req, signature.Message{ID: "n-1", Body: []byte(body), Time: at}); err != nil {
		t.Fatal(err)
	}
	captured, err := httputil.DumpRequest(req, true)
	if err != nil {
		t.Fatal(err)
	}
	capture = filepath.Join(dir, "capture.http")
	if err := os.WriteFile(capture, captured, 0o600); err != nil {
		t.Fatal(err)
	}
	return capture, secretFile
}

// TestRefusalsNameTheFlag: a -notification-id, -endpoint, limit or
// capabilities digest the store would refuse is a usage error naming the
// flag or argument, as -limit's is; it named the store's Go field
// (ListParams.NotificationID, RedriveParams.Endpoint, Limits.MaxInFlight),
// which the command line has none of, or exited 1. The URL is not
// quoted: it may hold a credential.
func TestRefusalsNameTheFlag(t *testing.T) {
	t.Parallel()
	db, _ := migrated(t)
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"deliveries", "list", "-db", db, "-notification-id", "a b"}, "-notification-id must be"},
		{[]string{"deliveries", "redrive", "-db", db, "-endpoint", "ftp://ops:hunter2@h.example/p"}, "-endpoint must be"},
		{[]string{"deliveries", "cancel", "-db", db, "-endpoint", "not a url"}, "-endpoint must be"},
		{[]string{"deliveries", "list", "-db", db, "-endpoint-ref", "r.example"}, "-endpoint-ref must be an endpoint's ref"},
		{[]string{"deliveries", "redrive", "-db", db, "-endpoint-ref", "https://r.example/hooks"}, "-endpoint-ref must be an endpoint's ref"},
		{[]string{"deliveries", "cancel", "-db", db, "-endpoint-ref", strings.Repeat("A", 32)}, "-endpoint-ref must be an endpoint's ref"},
		{[]string{"endpoints", "limit", "-db", db, "-max-in-flight", "2000000", "-rate", "1", "https://h.example/p"}, "-max-in-flight must be at most 100000"},
		{[]string{"endpoints", "limit", "-db", db, "-max-in-flight", "1", "-rate", "1e-9", "https://h.example/p"}, "-rate must be 0 (no limit) or at least"},
		{[]string{"endpoints", "limit", "-db", db, "-max-in-flight", "1", "-rate", "0", "-burst", "3", "https://h.example/p"}, "-burst needs a -rate above 0"},
		{[]string{"contracts", "pin", "-db", db, "https://h.example/p", "ABC"}, "capabilities digest must be 64 lowercase hex"},
		{[]string{"prune", "-db", db, "-older-than", "500ns"}, "-older-than must be at least 1µs"},
	} {
		code, _, errOut := courierRun(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.flag) || strings.Contains(errOut, "Params.") || strings.Contains(errOut, "Limits.") || strings.Contains(errOut, "invalid_argument") || strings.Contains(errOut, "hunter2") {
			t.Errorf("courier %s: exit %d, stderr %q; want %d naming the flag (%q), no Go field, no credential", strings.Join(tc.args, " "), code, strings.TrimSpace(errOut), exitUsage, tc.flag)
		}
	}
}

// TestVerifySaysABodyItCannotReadWhole: a capture cut short (its body
// shorter than its Content-Length) failed with "unexpected EOF" alone,
// and one whose body is over 16 MiB was verified cut to 16 MiB and
// refused as signature_mismatch, exit 3, a negative answer about a
// request it had not read. Each fails, exit 1, saying what is wrong with
// the capture, and answers nothing on stdout.
func TestVerifySaysABodyItCannotReadWhole(t *testing.T) {
	t.Parallel()
	capture, secretFile := signedCapture(t, time.Now())
	whole, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short.http")
	if err := os.WriteFile(short, whole[:len(whole)-3], 0o600); err != nil {
		t.Fatal(err)
	}
	head, _, _ := bytes.Cut(whole, []byte("\r\n\r\n"))
	body := bytes.Repeat([]byte(" "), 16<<20+1)
	head = regexp.MustCompile(`Content-Length: \d+`).ReplaceAll(head, []byte("Content-Length: "+strconv.Itoa(len(body))))
	large := filepath.Join(dir, "large.http")
	if err := os.WriteFile(large, slices.Concat(head, []byte("\r\n\r\n"), body), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, says := range map[string]string{short: "a capture cut short", large: "over 16 MiB"} {
		code, out, errOut := courierRun(t, "verify", "-request", file, "-secret-file", secretFile)
		if code != exitFailed || out != "" || !strings.Contains(errOut, says) {
			t.Errorf("verify %s: exit %d, stdout %q, stderr %q; want %d saying %q", filepath.Base(file), code, out, errOut, exitFailed, says)
		}
	}
}

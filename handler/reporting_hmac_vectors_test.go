package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/adcpvectors"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// hmacVectorsPath is AdCP's legacy HMAC-SHA256 webhook vectors (Apache-2.0,
// with their LICENSE), which package signature's tests check the verifier
// and the signer against.
const hmacVectorsPath = "../signature/testdata/adcp/webhook-hmac-sha256.json"

// postHMACVector posts body with the legacy headers to a Reporting
// receiver whose AdCP HMAC verifier holds the vectors' secret and reads
// the clock at now, and returns the answer and how many times the
// application's function ran.
func postHMACVector(t *testing.T, secret string, now int64, timestamp string, sig *string, body []byte) (*http.Response, []byte, int32) {
	t.Helper()
	clock := func() time.Time { return time.Unix(now, 0) }
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "inbox.db"), store.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	key, err := signature.ParseSecret("", secret)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := signature.NewAdCPHMACVerifier(signature.AdCPHMACVerifierConfig{Sender: reportingSender, Secrets: []signature.Secret{key}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	rcv, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: verifier},
		func(context.Context, *sqlx.Tx, ack.Reporting) error { calls.Add(1); return nil })
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(rcv)
	t.Cleanup(server.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, server.URL+"/hook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-ADCP-Timestamp", timestamp)
	if sig != nil {
		req.Header.Set("X-ADCP-Signature", *sig)
	}
	resp, err := server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	if n := rows(t, s, "courier_inbox"); n != 0 {
		t.Fatalf("refused request left %d inbox records", n)
	}
	return resp, out.Bytes(), calls.Load()
}

// TestReportingAdCPHMACVectors replays AdCP's legacy HMAC vectors against
// a Reporting receiver over HTTP. Each of the 15 vectors' signatures
// verifies, so none is answered 401; none of their bodies is an envelope,
// so each is refused 400 before the function runs, and the one whose body
// repeats a key ("reject-malformed") is refused as duplicate_json_key, the
// malformed-body answer the vector requires, distinct from a signature
// error. Each of the 10 rejection vectors is refused 401 with its code, in
// the problem and in WWW-Authenticate.
func TestReportingAdCPHMACVectors(t *testing.T) {
	t.Parallel()
	file := adcpvectors.LoadHMAC(t, hmacVectorsPath)
	for _, vec := range file.Vectors {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			ts := vec.TimestampText(t)
			now, err := strconv.ParseInt(ts, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			resp, out, calls := postHMACVector(t, file.Secret, now, ts, &vec.ExpectedSignature, []byte(vec.RawBody))
			var p reportingProblem
			_ = json.Unmarshal(out, &p)
			switch vec.ExpectedAction {
			case "reject-malformed":
				wantProblem(t, resp, out, http.StatusBadRequest, courier.CodeDuplicateKey)
			case "":
				if resp.StatusCode != http.StatusBadRequest || (p.Code != courier.CodeValidation && p.Code != courier.CodeMalformedJSON) {
					t.Fatalf("got %d %s, want 400 for a body that is no envelope (body %s)", resp.StatusCode, p.Code, out)
				}
			default:
				t.Fatalf("expected_verifier_action %q has no meaning in this test yet", vec.ExpectedAction)
			}
			if calls != 0 {
				t.Fatalf("the function ran %d times", calls)
			}
		})
	}
	want := adcpvectors.HMACRejectionCodes
	for _, vec := range file.RejectionVectors {
		t.Run(vec.ID, func(t *testing.T) {
			t.Parallel()
			code, ok := want[vec.ID]
			if !ok {
				t.Fatalf("no expected code for rejection vector %q", vec.ID)
			}
			now := int64(1700000000)
			if vec.CurrentTime != nil {
				now = *vec.CurrentTime
			}
			resp, out, calls := postHMACVector(t, file.Secret, now, vec.TimestampText(t), vec.Signature, []byte(vec.RawBody))
			wantProblem(t, resp, out, http.StatusUnauthorized, code)
			if got := resp.Header.Get("WWW-Authenticate"); got != `Signature error="`+string(code)+`"` {
				t.Fatalf("WWW-Authenticate %q", got)
			}
			if calls != 0 {
				t.Fatalf("the function ran %d times", calls)
			}
		})
	}
}

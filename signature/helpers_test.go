package signature

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

// loadJSON decodes the testdata file at path into v. A missing vector file
// fails the test; it never skips.
func loadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
}

// clockAt returns a clock stopped at unix seconds sec.
func clockAt(sec int64) func() time.Time {
	t := time.Unix(sec, 0)
	return func() time.Time { return t }
}

// newRequest returns a request with the given headers; each value in a
// header's slice is one field line.
func newRequest(t *testing.T, method, url string, headers map[string][]string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for k, vs := range headers {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req
}

// wantReject fails unless err is a signature failure with code.
func wantReject(t *testing.T, err error, code courier.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("verified; want rejection %s", code)
	}
	if !errors.Is(err, courier.CodeSignatureInvalid) {
		t.Errorf("error %v is not a case of CodeSignatureInvalid", err)
	}
	if got := courier.CodeOf(err); got != code {
		t.Errorf("code = %s (%v), want %s", got, err, code)
	}
}

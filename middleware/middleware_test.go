package middleware_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/problem"
)

// problemDoc is the problem+json body every refusal carries.
type problemDoc struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Code   courier.Code `json:"code"`
	Detail string       `json:"detail"`
}

// post sends body to url. A chunked request carries no Content-Length, so
// the server learns the body's length only by reading it. prepare, if not
// nil, adjusts the request before it is sent.
func post(t *testing.T, c *http.Client, url string, body []byte, chunked bool, prepare func(*http.Request)) *http.Response {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = struct{ io.Reader }{rd} // hide the length from net/http
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if chunked {
		req.ContentLength = -1
	}
	if prepare != nil {
		prepare(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readProblem decodes resp as a problem+json body with the given status.
func readProblem(t *testing.T, status int, header http.Header, body []byte) problemDoc {
	t.Helper()
	if ct := header.Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("Content-Type = %q, want %q (body %q)", ct, problem.ContentType, body)
	}
	var p problemDoc
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("decode problem %q: %v", body, err)
	}
	if p.Status != status {
		t.Errorf("problem status = %d, want the response's %d", p.Status, status)
	}
	return p
}

// readAll returns the whole body of resp.
func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read response body: %v", err)
	}
	return b
}

// mustPanic runs f and fails unless it panics.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Error("did not panic")
		}
	}()
	f()
}

package handler_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

// The hostile battery's cases that only a raw connection can send: a
// body that stalls mid-way, a sender that waits for 100 Continue before
// sending a huge one, and a document nested a million deep. Every
// receiver answers each with its problem, at once or at its ReadTimeout,
// and stores nothing.
func TestHostileWire(t *testing.T) {
	t.Parallel()
	nested := strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000)
	cases := []struct {
		name string
		// head is the framing header lines; body what is written after
		// the header, the connection left open.
		head, body string
		// signed is the body signed, when not body (what never arrives).
		signed []byte
		// stall: the body never arrives whole; the receiver's ReadTimeout
		// is short, where the others have the default.
		stall  bool
		status int
		code   courier.Code
	}{
		{name: "stalled chunked body", head: "Transfer-Encoding: chunked\r\n", body: "5\r\n{\"a\":", signed: []byte(`{"a":1}`), stall: true,
			status: http.StatusRequestTimeout, code: courier.CodeRequestTimeout},
		{name: "stalled body of a known length", head: "Content-Length: 100\r\n", body: `{"a":`, signed: []byte(`{"a":1}`), stall: true,
			status: http.StatusRequestTimeout, code: courier.CodeRequestTimeout},
		{name: "100-continue for a GiB", head: "Content-Length: 1073741824\r\nExpect: 100-continue\r\n", signed: []byte(`{}`),
			status: http.StatusRequestEntityTooLarge, code: courier.CodeBodyTooLarge},
		{name: "a million nested arrays", head: fmt.Sprintf("Content-Length: %d\r\n", len(nested)), body: nested,
			status: http.StatusBadRequest, code: courier.CodeMalformedJSON},
	}
	for _, target := range hostileTargets() {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					limits := middleware.BodyLimits{MaxBytes: 4 << 20}
					if tc.stall {
						limits.ReadTimeout = 200 * time.Millisecond
					}
					e := target.open(t, limits)
					v := target.valid(t)
					signed := tc.signed
					if signed == nil {
						signed = []byte(tc.body)
					}
					req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.server.URL+"/hooks", nil)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", "application/json")
					if e.base != nil {
						e.base(req)
					}
					e.sign(t, req, v.id, signed, false, time.Now())

					conn, err := net.Dial("tcp", e.server.Listener.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					var b bytes.Buffer
					fmt.Fprintf(&b, "POST /hooks HTTP/1.1\r\nHost: %s\r\n%s", req.Host, tc.head)
					if err := req.Header.Write(&b); err != nil {
						t.Fatal(err)
					}
					b.WriteString("\r\n" + tc.body)
					if _, err := conn.Write(b.Bytes()); err != nil {
						t.Fatal(err)
					}
					// The first answer: a 100 Continue, if one came, is it.
					resp, err := http.ReadResponse(bufio.NewReader(conn), req)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					defer resp.Body.Close()
					out, _ := io.ReadAll(resp.Body)
					var p problemFields
					_ = json.Unmarshal(out, &p)
					if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/problem+json" || p.Code != tc.code {
						t.Fatalf("answered %d %q %s, want %d %s", resp.StatusCode, resp.Header.Get("Content-Type"), out, tc.status, tc.code)
					}
					if inbox, effects := e.written(t); inbox != 0 || effects != 0 {
						t.Fatalf("refused, yet wrote %d Inbox records and %d effects", inbox, effects)
					}
				})
			}
		})
	}
}

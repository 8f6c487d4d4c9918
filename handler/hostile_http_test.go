package handler_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
)

// Attacks on the framing of a request, over raw HTTP/1.1 connections and
// over HTTP/2 (TLS and h2c), against every receiver of the hostile
// battery: a body framed oddly but whole is the body signed and is
// accepted once, answered byte for byte as the same body sent plainly is;
// one that never arrives whole is refused with a problem and stores
// nothing.

// rawFramed is one framing of the valid, signed body on a raw connection.
type rawFramed struct {
	name string
	// write returns what follows the signed header lines: more header
	// lines, the blank line and the body as framed. It is written, then
	// the connection's writes are closed when closeWrite.
	write      func(body []byte) string
	closeWrite bool
	// expect100: the request asks for 100 Continue, and the body (cont)
	// is sent only once it came.
	expect100 bool
	cont      func(body []byte) string
	status    int          // 0: the receiver's ok
	code      courier.Code // for a refusal
}

// chunked frames body in chunks of n bytes, each with ext after its size,
// and ends with trailer lines.
func chunked(body []byte, n int, ext, trailer string) string {
	var b strings.Builder
	for len(body) > 0 {
		c := body[:min(n, len(body))]
		body = body[len(c):]
		fmt.Fprintf(&b, "%x%s\r\n%s\r\n", len(c), ext, c)
	}
	b.WriteString("0\r\n" + trailer + "\r\n")
	return b.String()
}

var rawFramings = []rawFramed{
	{name: "one-byte chunks with extensions and trailers", write: func(body []byte) string {
		return "Transfer-Encoding: chunked\r\n\r\n" + chunked(body, 1, ";ext=\"x\";y", "X-Trailer: 1\r\nWebhook-Signature: v1,AAAA\r\nContent-Type: text/plain\r\n")
	}},
	{name: "Content-Length lying beside chunked", write: func(body []byte) string {
		return fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body)+7) + chunked(body, 5, "", "")
	}},
	{name: "Content-Length twice, the same", write: func(body []byte) string {
		return fmt.Sprintf("Content-Length: %d\r\nContent-Length: %d\r\n\r\n%s", len(body), len(body), body)
	}},
	{name: "100-continue, then the body", expect100: true,
		write: func(body []byte) string {
			return fmt.Sprintf("Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
		},
		cont: func(body []byte) string { return string(body) }},
	{name: "100-continue, then no body", expect100: true, closeWrite: true,
		write: func(body []byte) string {
			return fmt.Sprintf("Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body))
		},
		cont:   func([]byte) string { return "" },
		status: http.StatusBadRequest, code: courier.CodeInvalidArgument},
	{name: "body cut mid-way, the client's writes closed", closeWrite: true, write: func(body []byte) string {
		return fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body[:len(body)/2])
	}, status: http.StatusBadRequest, code: courier.CodeInvalidArgument},
	{name: "chunked body cut mid-chunk, the client's writes closed", closeWrite: true, write: func(body []byte) string {
		return fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s", len(body), body[:len(body)/2])
	}, status: http.StatusBadRequest, code: courier.CodeInvalidArgument},
	{name: "chunk size overflowing 64 bits", write: func(body []byte) string {
		return "Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n" + string(body) + "\r\n0\r\n\r\n"
	}, status: http.StatusBadRequest, code: courier.CodeInvalidArgument},
	{name: "chunk of a negative size", write: func(body []byte) string {
		return "Transfer-Encoding: chunked\r\n\r\n-1\r\n" + string(body) + "\r\n0\r\n\r\n"
	}, status: http.StatusBadRequest, code: courier.CodeInvalidArgument},
	{name: "chunk longer than its size", write: func(body []byte) string {
		return fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body)-1, body)
	}, status: http.StatusBadRequest, code: courier.CodeInvalidArgument},
}

func TestHostileFraming(t *testing.T) {
	t.Parallel()
	for _, target := range hostileTargets() {
		t.Run(target.name, func(t *testing.T) {
			t.Parallel()
			for _, f := range rawFramings {
				t.Run(f.name, func(t *testing.T) {
					t.Parallel()
					e := target.open(t, middleware.BodyLimits{MaxBytes: hostileMaxBody})
					v := target.valid(t)
					req := e.signedRequest(t, v)
					status, header, out := rawSend(t, e.server.Listener.Addr().String(), req, f)
					want := cmpInt(f.status, target.ok)
					inbox, effects := e.written(t)
					if f.status != 0 {
						wantRawProblem(t, status, header, out, f.status, f.code)
						if inbox != 0 || effects != 0 {
							t.Fatalf("refused, yet wrote %d Inbox records and %d effects", inbox, effects)
						}
						return
					}
					if status != want || inbox != 1 || effects != 1 {
						t.Fatalf("answered %d %q with %d Inbox records and %d effects; want %d, 1 and 1", status, out, inbox, effects, want)
					}
					// The same body sent plainly is a redelivery of the one
					// received: the same answer, byte for byte.
					resp, again := e.send(t, v, hostileRequest{body: v.body})
					if resp.StatusCode != want || !bytes.Equal(again, out) {
						t.Fatalf("the same body sent plainly: %d %q; the framed one got %d %q", resp.StatusCode, again, status, out)
					}
					if inbox, effects := e.written(t); inbox != 1 || effects != 1 {
						t.Fatalf("%d Inbox records and %d effects after the redelivery, want 1 and 1", inbox, effects)
					}
				})
			}
		})
	}
}

func cmpInt(a, def int) int {
	if a == 0 {
		return def
	}
	return a
}

// signedRequest returns the valid body's request, signed, with no body
// of its own: its header lines are what a raw sender writes.
func (e *hostileEnv) signedRequest(t *testing.T, v hostileValid) *http.Request {
	t.Helper()
	ctx := context.WithValue(t.Context(), signedBodyKey{}, v.body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.server.URL+"/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.base != nil {
		e.base(req)
	}
	e.sign(t, req, v.id, v.body, false, time.Now())
	return req
}

// rawSend writes req's header lines and f's framing of body on a new
// connection and reads the final answer.
func rawSend(t *testing.T, addr string, req *http.Request, f rawFramed) (int, http.Header, []byte) {
	t.Helper()
	body := hostileSignedBody(t, req)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST /hooks HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", req.Host)
	if err := req.Header.Write(&b); err != nil {
		t.Fatal(err)
	}
	b.WriteString(f.write(body))
	if _, err := conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if f.expect100 {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("no answer to the headers: %v", err)
		}
		if resp.StatusCode != http.StatusContinue {
			t.Fatalf("answered %d to Expect: 100-continue, want 100", resp.StatusCode)
		}
		if _, err := io.WriteString(conn, f.cont(body)); err != nil {
			t.Fatal(err)
		}
	}
	if f.closeWrite {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

// hostileSignedBody recovers the body a request of signedRequest was
// signed over, which the test kept in its context.
func hostileSignedBody(t *testing.T, req *http.Request) []byte {
	t.Helper()
	b, ok := req.Context().Value(signedBodyKey{}).([]byte)
	if !ok {
		t.Fatal("the request carries no signed body")
	}
	return b
}

type signedBodyKey struct{}

// wantRawProblem fails t unless the answer is a problem of status and code.
func wantRawProblem(t *testing.T, status int, header http.Header, out []byte, wantStatus int, code courier.Code) {
	t.Helper()
	var p problemFields
	if err := json.Unmarshal(out, &p); err != nil || header.Get("Content-Type") != "application/problem+json" || status != wantStatus || p.Status != wantStatus || p.Code != code {
		t.Fatalf("answered %d %q %q, want %d problem %s", status, header.Get("Content-Type"), out, wantStatus, code)
	}
}

// TestHostileHTTP2: every receiver over HTTP/2, with TLS and without
// (h2c): a body sent in many DATA frames and followed by trailers is
// accepted once and its redelivery answered byte for byte alike; a body
// of no declared length over the limit is refused 413; a body that stalls
// is refused 408 at the ReadTimeout; a refusal is a problem; nothing
// refused is stored. The ReadTimeout (2 s) bounds the whole body, so the
// one sent a byte a frame must arrive within it, even on a loaded machine.
func TestHostileHTTP2(t *testing.T) {
	t.Parallel()
	for _, target := range hostileTargets() {
		for _, tlsOn := range []bool{true, false} {
			name := target.name + "/h2c"
			if tlsOn {
				name = target.name + "/h2"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := target.open(t, middleware.BodyLimits{MaxBytes: hostileMaxBody, ReadTimeout: 2 * time.Second})
				v := target.valid(t)
				url, client := serveHTTP2(t, e.server.Config.Handler, tlsOn)

				// Many DATA frames, then trailers.
				pr, pw := io.Pipe()
				req := e.signedRequest(t, v)
				req = retarget(t, req, url, pr)
				req.Trailer = http.Header{"X-Trailer": nil, "Webhook-Signature": nil}
				go func() {
					for i := range v.body {
						if _, err := pw.Write(v.body[i : i+1]); err != nil {
							return
						}
					}
					req.Trailer.Set("X-Trailer", "1")
					req.Trailer.Set("Webhook-Signature", "v1,AAAA")
					pw.Close()
				}()
				resp, out := exchangeWith(t, client, req)
				if resp.ProtoMajor != 2 || resp.StatusCode != target.ok {
					t.Fatalf("answered %s %d %q, want HTTP/2 %d", resp.Proto, resp.StatusCode, out, target.ok)
				}
				if inbox, effects := e.written(t); inbox != 1 || effects != 1 {
					t.Fatalf("%d Inbox records and %d effects, want 1 and 1", inbox, effects)
				}
				again := retarget(t, e.signedRequest(t, v), url, bytes.NewReader(v.body))
				resp2, out2 := exchangeWith(t, client, again)
				if resp2.StatusCode != target.ok || !bytes.Equal(out2, out) {
					t.Fatalf("redelivery answered %d %q, the first %q", resp2.StatusCode, out2, out)
				}

				// A refusal: over the limit, no length declared.
				big := append(bytes.Clone(v.body), bytes.Repeat([]byte(" "), hostileMaxBody)...)
				over := retarget(t, e.signedRequest(t, v), url, io.MultiReader(bytes.NewReader(big)))
				over.ContentLength = -1
				resp3, out3 := exchangeWith(t, client, over)
				wantRawProblem(t, resp3.StatusCode, resp3.Header, out3, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)

				// A body that stalls halfway.
				spr, spw := io.Pipe()
				defer spw.Close()
				go func() { _, _ = spw.Write(v.body[:len(v.body)/2]) }()
				stall := retarget(t, e.signedRequest(t, v), url, spr)
				stall.ContentLength = int64(len(v.body))
				resp4, out4 := exchangeWith(t, client, stall)
				wantRawProblem(t, resp4.StatusCode, resp4.Header, out4, http.StatusRequestTimeout, courier.CodeRequestTimeout)
				if inbox, effects := e.written(t); inbox != 1 || effects != 1 {
					t.Fatalf("refusals wrote: %d Inbox records and %d effects, want 1 and 1", inbox, effects)
				}
			})
		}
	}
}

// retarget returns req sent to url's host with body, keeping its path,
// its header lines and its Host (what was signed).
func retarget(t *testing.T, req *http.Request, url string, body io.Reader) *http.Request {
	t.Helper()
	out, err := http.NewRequestWithContext(t.Context(), req.Method, url+req.URL.RequestURI(), body)
	if err != nil {
		t.Fatal(err)
	}
	out.Header = req.Header.Clone()
	out.Host = req.Host
	return out
}

// serveHTTP2 serves h over HTTP/2 only, with TLS or h2c, and returns its
// URL and a client speaking HTTP/2 to it.
func serveHTTP2(t *testing.T, h http.Handler, tlsOn bool) (string, *http.Client) {
	t.Helper()
	if tlsOn {
		srv := httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = true
		srv.StartTLS()
		t.Cleanup(srv.Close)
		c := srv.Client()
		c.Transport.(*http.Transport).ForceAttemptHTTP2 = true
		return srv.URL, c
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: p}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	tr := &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
		<-done
	})
	return "http://" + ln.Addr().String(), &http.Client{Transport: tr}
}

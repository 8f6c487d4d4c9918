package handler_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
)

// publicOrigin is the origin senders address the receivers of these tests
// by: a TLS-terminating proxy's. A TLS test server's Client sends
// requests for example.com to that server.
const publicOrigin = "https://example.com"

// proxyScheme is one signature scheme a receiver accepts, its keys made
// for a receiver serving origin.
type proxyScheme struct {
	name string
	keys func(origin string) couriertest.Keys
}

var proxySchemes = []proxyScheme{
	{"standard webhooks", func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("sender") }},
	{"rfc 9421", func(origin string) couriertest.Keys { return couriertest.RFC9421Keys("sender", origin) }},
	{"adcp hmac", func(string) couriertest.Keys { return couriertest.AdCPHMACKeys("sender") }},
	{"bearer", func(string) couriertest.Keys { return couriertest.BearerKeys("sender") }},
}

// proxiedHandler is one of the receivers an adopter mounts: how to build
// it on a real SQLite store, a request it accepts (its signed message id
// and body) and the status it accepts it with.
type proxiedHandler struct {
	name   string
	make   func(t *testing.T, s *store.Store, v signature.Verifier) http.Handler
	body   func(t *testing.T) (id string, body []byte)
	status int
}

var proxiedHandlers = []proxiedHandler{
	{"Receiver", func(t *testing.T, s *store.Store, v signature.Verifier) http.Handler {
		return must(handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: v},
			func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil }))
	}, func(t *testing.T) (string, []byte) {
		n, body := terminal(t, "evt-1")
		return n.NotificationID, body
	}, http.StatusOK},
	{"Reporting", func(t *testing.T, s *store.Store, v signature.Verifier) http.Handler {
		return must(handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: v},
			func(context.Context, *sqlx.Tx, ack.Reporting) error { return nil }))
	}, func(t *testing.T) (string, []byte) { return "report-1", deliveryReport(t) }, http.StatusOK},
	{"Source", func(t *testing.T, s *store.Store, v signature.Verifier) http.Handler {
		return must(handler.NewSource(handler.SourceConfig{Store: s, Verifier: v, CapabilitiesSHA256: sourceDigest},
			func(context.Context, *sqlx.Tx, ack.Command) error { return nil }))
	}, func(t *testing.T) (string, []byte) {
		return "change:r1", sourceCommand(t, ack.OperationChange, "r1", sourceDigest, `{"a":1}`)
	}, http.StatusOK},
	{"Publish", func(t *testing.T, s *store.Store, v signature.Verifier) http.Handler {
		return must(handler.NewPublish(handler.PublishConfig{Store: s, Verifier: v,
			Authorize: func(context.Context, signature.Principal, handler.PublishTarget) error { return nil }}))
	}, func(t *testing.T) (string, []byte) {
		return "publish-1", []byte(`{"notification_id":"n-1","endpoint":"https://receiver.example/hooks","payload":{"a":1}}`)
	}, http.StatusAccepted},
}

// must returns the handler a constructor made from a valid config; it
// panics, naming the error, if the constructor refused the config.
func must[H http.Handler](h H, err error) http.Handler {
	if err != nil {
		panic(err)
	}
	return h
}

// rfc9421Sender is a sender's RFC 9421 key and its signer.
func rfc9421Sender(t *testing.T) (signature.JWK, signature.Signer) {
	t.Helper()
	key, err := signature.GenerateJWK("sender-key", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return key, signer
}

// writtenAnywhere counts what a receiver stored: Inbox records and, for
// Publish, deliveries.
func writtenAnywhere(t *testing.T, s *store.Store) int {
	t.Helper()
	return rows(t, s, "courier_inbox") + rows(t, s, "courier_outbox")
}

// proxyOptions shape the TLS-terminating proxy in front of a receiver.
type proxyOptions struct {
	http2    bool // the sender speaks HTTP/2 to the proxy; the proxy HTTP/1.1 to the receiver
	keepHost bool // the proxy forwards the sender's Host rather than the receiver's address
	// rewrite, when set, edits what the proxy forwards (a path prefix it
	// strips, say).
	rewrite func(r *httputil.ProxyRequest)
}

// behindProxy serves backend behind a real httputil.ReverseProxy that
// terminates TLS and forwards plain HTTP, setting X-Forwarded-For,
// -Host and -Proto. It returns the client that reaches the proxy as
// publicOrigin.
func behindProxy(t *testing.T, backend http.Handler, opt proxyOptions) *http.Client {
	t.Helper()
	back := httptest.NewServer(backend)
	t.Cleanup(back.Close)
	u, err := url.Parse(back.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.SetXForwarded()
		if opt.keepHost {
			r.Out.Host = r.In.Host
		}
		if opt.rewrite != nil {
			opt.rewrite(r)
		}
	}}
	front := httptest.NewUnstartedServer(proxy)
	front.EnableHTTP2 = opt.http2
	front.StartTLS()
	t.Cleanup(front.Close)
	return front.Client()
}

// proxyAnswer is a response as the sender saw it.
type proxyAnswer struct {
	status int
	proto  string
	header http.Header
	body   []byte
}

// sendSigned signs body for target as a courier worker does and sends it
// with c, after edit (nil: none) changes the request.
func sendSigned(t *testing.T, c *http.Client, target, id string, body []byte, signer signature.Signer, edit func(r *http.Request)) proxyAnswer {
	t.Helper()
	req := couriertest.NewRequest(target, id, body, signer)
	if edit != nil {
		edit(req)
	}
	resp, out := exchangeWith(t, c, req.WithContext(t.Context()))
	return proxyAnswer{status: resp.StatusCode, proto: resp.Proto, header: resp.Header, body: out}
}

// wantRefused checks that a is the problem status and code.
func (a proxyAnswer) wantRefused(t *testing.T, status int, code courier.Code) {
	t.Helper()
	wantProblem(t, &http.Response{StatusCode: a.status, Header: a.header}, a.body, status, code)
}

// gzipped returns body compressed, as a sender that compresses its
// request bodies sends it.
func gzipped(t *testing.T, body []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReceiversRefuseContentCodedBodies: a sender that compresses its
// request bodies (Content-Encoding: gzip) was answered as if it had signed
// with the wrong key, 401 signature_mismatch (or
// webhook_signature_digest_mismatch), when it signed the JSON it
// compressed, and 400 malformed_json when it signed the compressed bytes or
// signs no body (Bearer): answers that send its operator after keys or
// encoders, while the receiver reads no content coding at all. Every
// receiver now refuses a content-coded body before reading it, 415
// unsupported_media_type with Accept-Encoding: identity (RFC 9110 12.5.3),
// under every scheme, and stores nothing; Content-Encoding: identity is no
// coding and is served.
func TestReceiversRefuseContentCodedBodies(t *testing.T) {
	t.Parallel()
	for _, sc := range proxySchemes {
		for _, h := range proxiedHandlers {
			t.Run(sc.name+"/"+h.name, func(t *testing.T) {
				t.Parallel()
				keys := sc.keys(publicOrigin)
				s := openSQLiteStore(t)
				c := behindProxy(t, h.make(t, s, keys.Verifier), proxyOptions{})
				id, body := h.body(t)
				zipped := gzipped(t, body)
				for _, tc := range []struct {
					name   string
					signed []byte // what the sender signed: the JSON or the bytes it sent
				}{{"signed the JSON", body}, {"signed the compressed bytes", zipped}} {
					a := sendSigned(t, c, publicOrigin+"/hooks", id, tc.signed, keys.Signer, func(r *http.Request) {
						r.Header.Set("Content-Encoding", "gzip")
						r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(zipped)), int64(len(zipped))
					})
					if a.status != http.StatusUnsupportedMediaType {
						t.Fatalf("%s: %d %s, want 415 unsupported_media_type", tc.name, a.status, a.body)
					}
					a.wantRefused(t, http.StatusUnsupportedMediaType, courier.CodeUnsupportedMediaType)
					if got := a.header.Get("Accept-Encoding"); got != "identity" {
						t.Fatalf("%s: Accept-Encoding %q, want identity", tc.name, got)
					}
				}
				if n := writtenAnywhere(t, s); n != 0 {
					t.Fatalf("refused, yet %d rows written", n)
				}
				a := sendSigned(t, c, publicOrigin+"/hooks", id, body, keys.Signer, func(r *http.Request) {
					r.Header.Set("Content-Encoding", "identity")
				})
				if a.status != h.status {
					t.Fatalf("Content-Encoding identity: %d %s, want %d", a.status, a.body, h.status)
				}
			})
		}
	}
}

// TestReceiversBehindTLSTerminatingProxy: every receiver, under every
// scheme, behind a reverse proxy that terminates TLS and forwards plain
// HTTP/1.1 to another address (the sender speaking HTTP/1.1 or HTTP/2 to
// the proxy), accepts what the sender signed for the public URL, sent with
// its length known or chunked. Only RFC 9421 signs the URL; its verifier
// is configured with the public origin, and the X-Forwarded-Host and
// Forwarded headers the request carries, forged or not, change nothing.
func TestReceiversBehindTLSTerminatingProxy(t *testing.T) {
	t.Parallel()
	for _, h2 := range []bool{false, true} {
		for _, sc := range proxySchemes {
			for _, h := range proxiedHandlers {
				t.Run(fmt.Sprintf("http2=%v/%s/%s", h2, sc.name, h.name), func(t *testing.T) {
					t.Parallel()
					keys := sc.keys(publicOrigin)
					c := behindProxy(t, h.make(t, openSQLiteStore(t), keys.Verifier), proxyOptions{http2: h2})
					id, body := h.body(t)
					for _, chunked := range []bool{false, true} {
						a := sendSigned(t, c, publicOrigin+"/hooks/acme?attempt=1", id, body, keys.Signer, func(r *http.Request) {
							r.Header.Set("X-Forwarded-Host", "attacker.example")
							r.Header.Set("Forwarded", "host=attacker.example;proto=http")
							if chunked {
								r.Body, r.ContentLength = io.NopCloser(io.MultiReader(bytes.NewReader(body))), -1
							}
						})
						if a.status != h.status || (a.proto == "HTTP/2.0") != h2 {
							t.Fatalf("chunked=%v: %s %d %s, want %d", chunked, a.proto, a.status, a.body, h.status)
						}
					}
				})
			}
		}
	}
}

// TestRFC9421ReceiverUnderPathPrefix: RFC 9421 signs the path, and a
// receiver mounted under a prefix sees it as the sender signed it:
// http.StripPrefix leaves the request's RequestURI whole, which the
// verifier reads, and a Go 1.22 pattern ("POST /hooks/{tenant}") changes
// nothing. A proxy that rewrites the path (strips "/api" before
// forwarding) makes the receiver see another target than the one signed:
// 401 webhook_signature_invalid, in the problem and WWW-Authenticate, with
// nothing stored.
func TestRFC9421ReceiverUnderPathPrefix(t *testing.T) {
	t.Parallel()
	for _, h := range proxiedHandlers {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			keys := couriertest.RFC9421Keys("sender", publicOrigin)
			s := openSQLiteStore(t)
			rcv := h.make(t, s, keys.Verifier)
			mux := http.NewServeMux()
			mux.Handle("/tenants/acme/", http.StripPrefix("/tenants/acme", rcv))
			mux.Handle("POST /hooks/{tenant}", rcv)
			c := behindProxy(t, mux, proxyOptions{})
			id, body := h.body(t)
			for _, path := range []string{"/tenants/acme/hooks?x=1", "/hooks/acme"} {
				if a := sendSigned(t, c, publicOrigin+path, id, body, keys.Signer, nil); a.status != h.status {
					t.Fatalf("%s: %d %s, want %d", path, a.status, a.body, h.status)
				}
			}

			s = openSQLiteStore(t)
			rcv = h.make(t, s, keys.Verifier)
			mux = http.NewServeMux()
			mux.Handle("POST /hooks/{tenant}", rcv)
			c = behindProxy(t, mux, proxyOptions{rewrite: func(r *httputil.ProxyRequest) {
				r.Out.URL.Path = r.Out.URL.Path[len("/api"):]
				r.Out.URL.RawPath = ""
			}})
			a := sendSigned(t, c, publicOrigin+"/api/hooks/acme", id, body, keys.Signer, nil)
			a.wantRefused(t, http.StatusUnauthorized, courier.CodeWebhookInvalid)
			if got := a.header.Get("WWW-Authenticate"); got != `Signature error="webhook_signature_invalid"` {
				t.Fatalf("WWW-Authenticate %q", got)
			}
			if n := writtenAnywhere(t, s); n != 0 {
				t.Fatalf("refused, yet %d rows written", n)
			}
		})
	}
}

// TestRFC9421OriginBehindTLSTerminatingProxy: behind a proxy that
// terminates TLS, the verifier's Origin is the public origin the sender
// signs for. Set to the address the proxy forwards to, every request is
// refused 401 webhook_signature_invalid; TrustRequestHost, even with the
// proxy forwarding the sender's Host, derives http (the proxy forwards
// plain HTTP), which no https signature matches: 401
// webhook_target_uri_malformed. A request signed for another receiver
// that trusts the same key is refused whatever X-Forwarded-Host,
// X-Forwarded-Proto or Forwarded it carries: the verifier reads none of
// them. Nothing is stored for a refusal.
func TestRFC9421OriginBehindTLSTerminatingProxy(t *testing.T) {
	t.Parallel()
	key, signer := rfc9421Sender(t)
	forged := func(r *http.Request) {
		r.Host = "example.com"
		r.Header.Set("X-Forwarded-Host", "other.example.com")
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("Forwarded", "host=other.example.com;proto=https")
	}
	for _, tc := range []struct {
		name     string
		origin   string // "internal": the address the proxy forwards to
		trust    bool
		keepHost bool
		target   string // what the sender signed for
		edit     func(r *http.Request)
		status   int
		code     courier.Code
	}{
		{"origin: the public one", publicOrigin, false, false, publicOrigin + "/hooks", nil, http.StatusOK, ""},
		{"origin: the proxy's upstream", "internal", false, false, publicOrigin + "/hooks", nil, http.StatusUnauthorized, courier.CodeWebhookInvalid},
		{"TrustRequestHost, the sender's Host forwarded", "", true, true, publicOrigin + "/hooks", nil, http.StatusUnauthorized, courier.CodeWebhookTargetURIMalformed},
		{"signed for another receiver, forwarding headers forged", publicOrigin, false, false, "https://other.example.com/hooks", forged, http.StatusUnauthorized, courier.CodeWebhookInvalid},
		{"signed for another receiver, the sender's Host forwarded", publicOrigin, false, true, "https://other.example.com/hooks", nil, http.StatusUnauthorized, courier.CodeWebhookInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openSQLiteStore(t)
			back := httptest.NewUnstartedServer(nil)
			origin := tc.origin
			if origin == "internal" {
				origin = "http://" + back.Listener.Addr().String()
			}
			v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
				Sender: "sender", Keys: []signature.JWK{key.Public()}, Replay: s.Replay, Origin: origin, TrustRequestHost: tc.trust,
			})
			if err != nil {
				t.Fatal(err)
			}
			h := proxiedHandlers[0]
			back.Config.Handler = h.make(t, s, v)
			back.Start()
			t.Cleanup(back.Close)
			u, _ := url.Parse(back.URL)
			proxy := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(u)
				r.SetXForwarded()
				if tc.keepHost {
					r.Out.Host = r.In.Host
				}
			}})
			t.Cleanup(proxy.Close)
			id, body := h.body(t)
			a := sendSigned(t, proxy.Client(), tc.target, id, body, signer, tc.edit)
			if tc.status == http.StatusOK {
				if a.status != http.StatusOK {
					t.Fatalf("%d %s, want 200", a.status, a.body)
				}
				return
			}
			a.wantRefused(t, tc.status, tc.code)
			if got, want := a.header.Get("WWW-Authenticate"), `Signature error="`+string(tc.code)+`"`; got != want {
				t.Fatalf("WWW-Authenticate %q, want %q", got, want)
			}
			if n := writtenAnywhere(t, s); n != 0 {
				t.Fatalf("refused, yet %d rows written", n)
			}
		})
	}
}

// TestBodyLimitsBehindProxy: a body over the receiver's Body.MaxBytes,
// sent through a proxy that streams it on (HTTP/1.1 or HTTP/2 from the
// sender, with its length known or chunked, with Expect: 100-continue or
// without), is answered 413 body_too_large as a problem the sender
// reads, not a broken connection or the proxy's 502; a sender that waits
// for 100 Continue gets the 413 instead, without sending its body.
// Nothing is stored.
func TestBodyLimitsBehindProxy(t *testing.T) {
	t.Parallel()
	keys := couriertest.StandardWebhooksKeys("sender")
	s := openSQLiteStore(t)
	rcv := must(handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: keys.Verifier, Body: middleware.BodyLimits{MaxBytes: 4 << 10}},
		func(context.Context, *sqlx.Tx, ack.Terminal) error { return nil }))
	// 48 times the limit, and within what a Go server (the proxy here)
	// still reads of a body it answered early before it closes the
	// connection (256 KiB): a larger one is the proxy's to reset, whatever
	// the receiver answered.
	big := []byte(`{"notification_id":"` + string(bytes.Repeat([]byte("a"), 192<<10)) + `"}`)
	for _, h2 := range []bool{false, true} {
		c := behindProxy(t, rcv, proxyOptions{http2: h2})
		for _, chunked := range []bool{false, true} {
			for _, expect := range []bool{false, true} {
				a := sendSigned(t, c, publicOrigin+"/hooks", "n-1", big, keys.Signer, func(r *http.Request) {
					if chunked {
						r.Body, r.ContentLength = io.NopCloser(io.MultiReader(bytes.NewReader(big))), -1
					}
					if expect {
						r.Header.Set("Expect", "100-continue")
					}
				})
				if a.status != http.StatusRequestEntityTooLarge {
					t.Fatalf("http2=%v chunked=%v expect=%v: %d %s, want 413", h2, chunked, expect, a.status, a.body)
				}
				a.wantRefused(t, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
			}
		}
	}

	// A sender that waits for 100 Continue, and sends nothing until then.
	back := httptest.NewServer(rcv)
	t.Cleanup(back.Close)
	u, _ := url.Parse(back.URL)
	proxy := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }})
	t.Cleanup(proxy.Close)
	conn, err := tls.Dial("tcp", proxy.Listener.Addr().String(), &tls.Config{RootCAs: proxy.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := couriertest.NewRequest(publicOrigin+"/hooks", "n-1", big, keys.Signer)
	fmt.Fprintf(conn, "POST /hooks HTTP/1.1\r\nHost: example.com\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", len(big))
	for name, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(conn, "%s: %s\r\n", name, v)
		}
	}
	fmt.Fprint(conn, "\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("waiting for 100 Continue: %d %s, want 413 (and no 100)", resp.StatusCode, out)
	}
	wantProblem(t, resp, out, http.StatusRequestEntityTooLarge, courier.CodeBodyTooLarge)
	if n := writtenAnywhere(t, s); n != 0 {
		t.Fatalf("refused, yet %d rows written", n)
	}
}

// TestRFC9421ReceiverPerPublicHost: a receiver serving several public
// hosts behind one proxy builds one verifier per host, each with its
// Origin, and routes by the Host the proxy forwards. Each host's request
// is accepted; a request signed for one host and sent with the other's
// Host reaches the other's verifier and is refused there, 401
// webhook_signature_invalid, nothing stored.
func TestRFC9421ReceiverPerPublicHost(t *testing.T) {
	t.Parallel()
	key, signer := rfc9421Sender(t)
	h := proxiedHandlers[0]
	mux := http.NewServeMux()
	stores := map[string]*store.Store{}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		s := openSQLiteStore(t)
		v, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
			Sender: "sender", Keys: []signature.JWK{key.Public()}, Replay: s.Replay, Origin: "https://" + host,
		})
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle(host+"/hooks", h.make(t, s, v))
		stores[host] = s
	}
	c := behindProxy(t, mux, proxyOptions{keepHost: true})
	id, body := h.body(t)
	a := sendSigned(t, c, "https://b.example.com/hooks", id, body, signer, func(r *http.Request) { r.Host = "a.example.com" })
	a.wantRefused(t, http.StatusUnauthorized, courier.CodeWebhookInvalid)
	if n := writtenAnywhere(t, stores["a.example.com"]) + writtenAnywhere(t, stores["b.example.com"]); n != 0 {
		t.Fatalf("refused, yet %d rows written", n)
	}
	for host, s := range stores {
		if a := sendSigned(t, c, "https://"+host+"/hooks", id, body, signer, nil); a.status != http.StatusOK {
			t.Fatalf("%s: %d %s, want 200", host, a.status, a.body)
		}
		if n := rows(t, s, "courier_inbox"); n != 1 {
			t.Fatalf("%s: %d inbox records, want 1", host, n)
		}
	}
}

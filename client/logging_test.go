package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/refusing"
	"github.com/courier-go/courier/store"
)

// TestWorkerLogsWhatOperatorsMustSee is the finding "logging that keeps
// its promise": every permanent failure is a Warn line, every retry from
// the third attempt on an Info line, every destination the guard refuses
// a Warn line, each with its codes (code, remote_code, http_status) and
// the endpoint redacted and by its ref; nothing of an endpoint's
// credentials appears, in its userinfo, query or path.
func TestWorkerLogsWhatOperatorsMustSee(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/retry/SECRETPATH":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/reject":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"type":"about:blank","status":400,"code":"validation_failed","detail":"plan missing"}`))
		}
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	host := strings.TrimPrefix(b.server.URL, "http://")
	endpoints := map[string]string{
		"retry":   "http://user:SECRETPW@" + host + "/retry/SECRETPATH?token=SECRETQ",
		"reject":  "http://" + host + "/reject?token=SECRETQ#frag",
		"refused": "https://user:SECRETPW@10.0.0.1/hooks?token=SECRETQ",
	}
	ids := map[string]int64{}
	for name, ep := range endpoints {
		ids[name] = b.enqueueWith(t, name, func(p *store.EnqueueParams) { p.Endpoint = ep })
	}
	const rounds = 4 // the retried delivery makes four attempts
	for range rounds {
		if _, err := b.worker.Work(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(time.Minute)
	}
	if d := b.get(t, ids["retry"]); d.Attempts != rounds || d.Status != courier.StatusRetryWait {
		t.Fatalf("the retried delivery is %s after %d attempts, want retry_wait after %d", d.Status, d.Attempts, rounds)
	}

	type want struct {
		level slog.Level
		attrs map[string]string
	}
	id := func(name string) string { return strconv.FormatInt(ids[name], 10) }
	checks := map[string][]want{
		"worker: delivery failed": {{slog.LevelWarn, map[string]string{
			"delivery": id("reject"), "attempt": "1", "endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(endpoints["reject"]), "status": "failed",
			"code": "receiver_rejected", "remote_code": "validation_failed", "http_status": "400"}}},
		"worker: destination refused": {{slog.LevelWarn, map[string]string{
			"delivery": id("refused"), "attempt": "1", "endpoint": "https://10.0.0.1/…", "endpoint_ref": endpoint.Ref(endpoints["refused"]), "status": "failed", "code": "destination_forbidden"}}},
		"worker: delivery retrying": {
			{slog.LevelInfo, map[string]string{"delivery": id("retry"), "attempt": "3", "endpoint": "http://" + host + "/…", "endpoint_ref": endpoint.Ref(endpoints["retry"]), "code": "receiver_unavailable", "http_status": "503"}},
			{slog.LevelInfo, map[string]string{"delivery": id("retry"), "attempt": "4", "code": "receiver_unavailable", "http_status": "503"}},
		},
	}
	for msg, wants := range checks {
		got := logs.lines(msg)
		if len(got) != len(wants) {
			t.Errorf("%d lines %q, want %d: %+v", len(got), msg, len(wants), got)
			continue
		}
		for i, w := range wants {
			if got[i].Level != w.level {
				t.Errorf("%q at %v, want %v", msg, got[i].Level, w.level)
			}
			for k, v := range w.attrs {
				if got[i].Attrs[k] != v {
					t.Errorf("%q line %d: %s=%q, want %q (line %+v)", msg, i, k, got[i].Attrs[k], v, got[i].Attrs)
				}
			}
		}
	}
	// The first two attempts of the retried delivery are routine: Debug.
	var routine int
	for _, r := range logs.lines("worker: attempt settled") {
		if r.Attrs["delivery"] == id("retry") {
			routine++
			if r.Level != slog.LevelDebug {
				t.Errorf("routine retry logged at %v", r.Level)
			}
		}
	}
	if routine != 2 {
		t.Errorf("%d routine lines for the first two retries, want 2", routine)
	}
	for _, r := range logs.lines("") {
		for k, v := range r.Attrs {
			if strings.Contains(v, "SECRET") || strings.Contains(v, "user") {
				t.Errorf("%q: %s=%q shows an endpoint credential", r.Message, k, v)
			}
		}
	}
}

// TestWorkerLogsWhyTheGuardRefused: a destination the guard refuses is
// logged with the guard's reason (scheme, port, or the class of the
// address, its own or a redirect's), which says what to open, and where a
// Guard opens it; never with the endpoint's credentials.
func TestWorkerLogsWhyTheGuardRefused(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://10.0.0.1/elsewhere", http.StatusTemporaryRedirect)
	}, func(c *client.Config) { c.Logger = slog.New(logs) })
	port := b.server.URL[strings.LastIndex(b.server.URL, ":")+1:]
	endpoints := map[string]struct{ url, reason string }{
		"private":  {"https://user:SECRETPW@10.0.0.1/hooks?token=SECRETQ", "destination_forbidden: address is private"},
		"port":     {"http://127.0.0.1:1/hooks/SECRETPATH", "destination_forbidden: port not allowed"},
		"ipv6":     {"http://[::1]:" + port + "/hooks", "destination_forbidden: address is loopback"},
		"redirect": {b.server.URL + "/hooks", "destination_forbidden: address is private"},
	}
	urls := map[string]string{}
	for name, e := range endpoints {
		urls[name] = e.url
	}
	for name, r := range deliverEach(t, b, logs, "worker: destination refused", urls, nil) {
		if want := endpoints[name].reason; !strings.HasPrefix(r.Attrs["error"], want+" (") || !strings.Contains(r.Attrs["error"], "client.Guard") {
			t.Errorf("%s: error=%q, want %q and where a client.Guard opens it (line %+v)", name, r.Attrs["error"], want, r.Attrs)
		}
		for k, v := range r.Attrs {
			if strings.Contains(v, "SECRET") || strings.Contains(v, "user") {
				t.Errorf("%s: %s=%q shows an endpoint credential", name, k, v)
			}
		}
	}
}

// TestWorkerLogsWhyTheNetworkFailed: an attempt that got no answer is
// logged with the transport's cause (the connection refused, the
// certificate not trusted, the name not found), which says where to look;
// never with what the other side sent, nor the endpoint's credentials:
// not even the names in its certificate, which x509's messages quote.
func TestWorkerLogsWhyTheNetworkFailed(t *testing.T) {
	t.Parallel()
	closedAddr := refusing.Addr(t) // nothing listens there: connection refused
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { garbage.Close() })
	go func() { // answers every request with bytes that are no HTTP response
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Read(make([]byte, 4096))
				c.Write([]byte("SECRETBODY from the receiver\r\n\r\n"))
			}()
		}
	}()

	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler()) // its certificate is signed by no authority the worker trusts
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0)           // the handshakes it refuses
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	host := strings.TrimPrefix(untrusted.URL, "https://")
	named := httptest.NewUnstartedServer(http.NotFoundHandler()) // its certificate names anything but localhost, in words the receiver chose
	named.TLS = &tls.Config{Certificates: []tls.Certificate{certificateFor(t, "SECRET-chosen-by-the-receiver.example")}}
	named.Config.ErrorLog = log.New(io.Discard, "", 0)
	named.StartTLS()
	t.Cleanup(named.Close)
	namedPort := named.Listener.Addr().(*net.TCPAddr).Port

	logs := newCapture(t)
	b := setupWorker(t, nil, func(c *client.Config) {
		c.Logger = slog.New(logs)
		c.Transport = client.Guard{
			AllowHTTP:     true,
			AllowPorts:    append(portsOf(t, closedAddr, garbage.Addr().String(), host), uint16(namedPort)),
			AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")},
		}.Transport()
	})
	endpoints := map[string]struct{ url, cause string }{
		"refused": {"http://user:SECRETPW@" + closedAddr + "/hooks/SECRETPATH?token=SECRETQ", "connection refused"},
		"tls":     {"https://" + host + "/hooks/SECRETPATH", "x509: certificate signed by unknown authority"},
		"garbage": {"http://" + garbage.Addr().String() + "/hooks", ""}, // the receiver's bytes are not logged
		"name":    {"https://localhost:" + strconv.Itoa(namedPort) + "/hooks", "x509: certificate is not valid for localhost"},
	}
	urls := map[string]string{}
	for name, e := range endpoints {
		urls[name] = e.url
	}
	for name, r := range deliverEach(t, b, logs, "worker: delivery failed", urls, func(p *store.EnqueueParams) { p.MaxAttempts = 1 }) {
		cause := endpoints[name].cause
		if r.Attrs["code"] != string(courier.CodeNetwork) {
			t.Errorf("%s: code=%q, want network_error (line %+v)", name, r.Attrs["code"], r.Attrs)
		}
		if cause != "" && !strings.Contains(r.Attrs["error"], cause) {
			t.Errorf("%s: error=%q, want the cause (%q) (line %+v)", name, r.Attrs["error"], cause, r.Attrs)
		}
		for k, v := range r.Attrs {
			if strings.Contains(v, "SECRET") || strings.Contains(v, "user") {
				t.Errorf("%s: %s=%q shows the endpoint's credentials or the receiver's bytes", name, k, v)
			}
		}
	}
}

// deliverEach enqueues a delivery to each of urls (by name), edited by
// edit when it is not nil, runs one Work, and returns the line logged as
// msg for each, by name: it fails the test unless there is one for each.
func deliverEach(t *testing.T, b *workerBundle, logs *capture, msg string, urls map[string]string, edit func(*store.EnqueueParams)) map[string]logRecord {
	t.Helper()
	names := map[string]string{} // by delivery id
	for name, url := range urls {
		id := b.enqueueWith(t, name, func(p *store.EnqueueParams) {
			p.Endpoint = url
			if edit != nil {
				edit(p)
			}
		})
		names[strconv.FormatInt(id, 10)] = name
	}
	if _, err := b.worker.Work(t.Context()); err != nil {
		t.Fatal(err)
	}
	lines := logs.lines(msg)
	got := map[string]logRecord{}
	for _, r := range lines {
		got[names[r.Attrs["delivery"]]] = r
	}
	if len(lines) != len(urls) || len(got) != len(urls) {
		t.Fatalf("%d lines %q, want one for each of %d endpoints: %+v", len(lines), msg, len(urls), lines)
	}
	return got
}

// portsOf returns the ports of addrs ("host:port"), for a Guard to open.
func portsOf(t *testing.T, addrs ...string) []uint16 {
	t.Helper()
	var ports []uint16
	for _, a := range addrs {
		p, err := netip.ParseAddrPort(a)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p.Port())
	}
	return ports
}

// certificateFor returns a self-signed certificate for the DNS names.
func certificateFor(t *testing.T, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestAFailureAtTheDeadlineKeepsTheAttemptsOwnCode: an attempt whose retry
// would be due past the delivery's deadline ends the delivery failed with
// code expired, and its Warn line and the attempts log keep what the
// attempt itself met (receiver_unavailable, 503): both said expired, so an
// operator saw only that time ran out, not why the last attempt failed.
func TestAFailureAtTheDeadlineKeepsTheAttemptsOwnCode(t *testing.T) {
	t.Parallel()
	logs := newCapture(t)
	b := setupWorker(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}, func(c *client.Config) {
		c.Logger = slog.New(logs)
		c.Backoff = func(int, time.Duration) time.Duration { return 2 * time.Minute }
	})
	id := b.enqueueWith(t, "n-1", func(p *store.EnqueueParams) { p.Deadline = b.clock.Now().Add(time.Minute) })
	if n, err := b.worker.Work(t.Context()); n != 1 || err != nil {
		t.Fatalf("Work = %d, %v", n, err)
	}
	if d := b.get(t, id); d.Status != courier.StatusFailed || d.LastErrorCode != courier.CodeExpired || d.LastHTTPStatus != 503 {
		t.Fatalf("delivery %s/%s (HTTP %d), want failed/expired after a 503", d.Status, d.LastErrorCode, d.LastHTTPStatus)
	}
	lines := logs.lines("worker: delivery failed")
	if len(lines) != 1 || lines[0].Attrs["code"] != "expired" || lines[0].Attrs["attempt_code"] != "receiver_unavailable" || lines[0].Attrs["http_status"] != "503" {
		t.Fatalf("delivery failed lines %+v, want one: code expired, attempt_code receiver_unavailable, http_status 503", lines)
	}
	a, err := b.store.Outbox.Attempts(t.Context(), id)
	if err != nil || len(a) != 1 || a[0].Outcome != store.AttemptFailed || a[0].ErrorCode != courier.CodeReceiverUnavailable || a[0].HTTPStatus != 503 {
		t.Fatalf("attempts %+v, %v; want one failed with its own code receiver_unavailable", a, err)
	}
}

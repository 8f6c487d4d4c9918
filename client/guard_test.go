package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

// guardMetadataURL is where the test server redirects to: the cloud metadata
// endpoint an SSRF attacker is after.
const guardMetadataURL = "http://169.254.169.254/latest/meta-data"

// guardBundle is a receiver on 127.0.0.1:0 that counts the requests it gets.
// Its /redirect path answers 302 to guardMetadataURL.
type guardBundle struct {
	server *httptest.Server
	hits   *atomic.Int64
	port   uint16
}

func setupGuard(t *testing.T) *guardBundle {
	t.Helper()
	hits := new(atomic.Int64)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, guardMetadataURL, http.StatusFound)
			return
		}
		io.WriteString(w, r.Host)
	}))
	t.Cleanup(server.Close)
	ap, err := netip.ParseAddrPort(server.Listener.Addr().String())
	if err != nil {
		t.Fatalf("server address: %v", err)
	}
	return &guardBundle{server: server, hits: hits, port: ap.Port()}
}

// guard returns a Guard that allows http and the server's port, but no
// address ranges.
func (b *guardBundle) guard(resolve func(context.Context, string) ([]netip.Addr, error)) Guard {
	return Guard{AllowHTTP: true, AllowPorts: []uint16{b.port}, Resolve: resolve}
}

// url returns an http URL to host on the server's port.
func (b *guardBundle) url(host, path string) string {
	return "http://" + net.JoinHostPort(host, strconv.Itoa(int(b.port))) + path
}

// guardDials records every address the guard's transport hands to its
// dialer, that is, every connection it attempts.
type guardDials struct {
	mu    sync.Mutex
	addrs []string
}

func (d *guardDials) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.addrs)
}

// newGuardClient returns a client that sends through g.Transport() and never
// follows redirects, and the record of its dials.
func newGuardClient(t *testing.T, g Guard) (*http.Client, *guardDials) {
	t.Helper()
	rt := g.Transport()
	gt, ok := rt.(*guardTransport)
	if !ok {
		t.Fatalf("Transport() = %T, want *guardTransport", rt)
	}
	dials := new(guardDials)
	connect := gt.dialer.connect
	gt.dialer.connect = func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.mu.Lock()
		dials.addrs = append(dials.addrs, address)
		dials.mu.Unlock()
		return connect(ctx, network, address)
	}
	client := &http.Client{Transport: rt, CheckRedirect: checkRedirect}
	t.Cleanup(client.CloseIdleConnections)
	return client, dials
}

// guardGet sends a GET and returns the response with its body read and closed.
func guardGet(t *testing.T, client *http.Client, target string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
	if err != nil {
		t.Fatalf("NewRequest(%q): %v", target, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(body), nil
}

// guardResolver answers every lookup with addrs and counts the lookups.
func guardResolver(calls *atomic.Int64, addrs ...string) func(context.Context, string) ([]netip.Addr, error) {
	parsed := make([]netip.Addr, len(addrs))
	for i, a := range addrs {
		parsed[i] = netip.MustParseAddr(a)
	}
	return func(context.Context, string) ([]netip.Addr, error) {
		calls.Add(1)
		return slices.Clone(parsed), nil
	}
}

func assertGuardForbidden(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, courier.CodeDestinationForbidden) {
		t.Fatalf("err = %v, want destination_forbidden", err)
	}
	if got := courier.CodeOf(err); got != courier.CodeDestinationForbidden {
		t.Fatalf("CodeOf(err) = %q, want %q", got, courier.CodeDestinationForbidden)
	}
}

// TestGuardRefusesForbiddenDestinations sends to each forbidden address, as
// an IP literal and as a name that resolves to it, through a guard that
// allows http and the server's port; nothing is dialed and the server on
// 127.0.0.1 receives nothing.
func TestGuardRefusesForbiddenDestinations(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	hosts := []string{
		"127.0.0.1",
		"::1",
		"10.0.0.1",
		"172.16.0.1",
		"192.168.1.1",
		"100.64.0.1",
		"169.254.169.254",
		"::ffff:127.0.0.1",
		"64:ff9b::7f00:1",
		"fc00::1",
		"fe80::1",
		"0.0.0.0",
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			t.Parallel()

			t.Run("literal", func(t *testing.T) {
				t.Parallel()
				var resolves atomic.Int64
				client, dials := newGuardClient(t, b.guard(guardResolver(&resolves, "8.8.8.8")))
				_, _, err := guardGet(t, client, b.url(host, "/"))
				assertGuardForbidden(t, err)
				if got := dials.list(); len(got) != 0 {
					t.Errorf("dialed %v, want no dial", got)
				}
				if n := resolves.Load(); n != 0 {
					t.Errorf("Resolve called %d times for an IP literal", n)
				}
			})

			t.Run("name", func(t *testing.T) {
				t.Parallel()
				var resolves atomic.Int64
				client, dials := newGuardClient(t, b.guard(guardResolver(&resolves, host)))
				_, _, err := guardGet(t, client, b.url("receiver.test", "/"))
				assertGuardForbidden(t, err)
				if got := dials.list(); len(got) != 0 {
					t.Errorf("dialed %v, want no dial", got)
				}
				if n := resolves.Load(); n != 1 {
					t.Errorf("Resolve called %d times, want 1", n)
				}
			})

			// The dialer and its Control hook refuse on their own, without
			// the URL check in front of them.
			t.Run("dialer", func(t *testing.T) {
				t.Parallel()
				g := b.guard(nil)
				gt := g.Transport().(*guardTransport)
				var connects atomic.Int64
				gt.dialer.connect = func(context.Context, string, string) (net.Conn, error) {
					connects.Add(1)
					return nil, errors.New("connect must not be called")
				}
				address := net.JoinHostPort(host, strconv.Itoa(int(b.port)))
				_, err := gt.dialer.dialContext(t.Context(), "tcp", address)
				assertGuardForbidden(t, err)
				if n := connects.Load(); n != 0 {
					t.Errorf("connect called %d times", n)
				}
				target := netip.AddrPortFrom(netip.MustParseAddr(host).Unmap(), b.port).String()
				assertGuardForbidden(t, g.control("tcp", target, nil))
			})
		})
	}
	t.Cleanup(func() {
		if n := b.hits.Load(); n != 0 {
			t.Errorf("server received %d requests, want 0", n)
		}
	})
}

func TestGuardAllowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		// Public.
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"93.184.216.34", true},
		{"2606:4700::1111", true},
		{"2a00:1450:4001:80b::200e", true},
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::808:808", true},
		{"::8.8.8.8", true},                 // IPv4-compatible, public IPv4
		{"2002:808:808::1", true},           // 6to4 of 8.8.8.8
		{"2001:0:808:808::f7f7:f7f7", true}, // Teredo: server 8.8.8.8, client 8.8.8.8
		// Edges of forbidden ranges.
		{"1.0.0.0", true},
		{"9.255.255.255", true},
		{"11.0.0.0", true},
		{"100.63.255.255", true},
		{"100.128.0.0", true},
		{"126.255.255.255", true},
		{"128.0.0.0", true},
		{"172.15.255.255", true},
		{"172.32.0.0", true},
		{"192.167.255.255", true},
		{"192.169.0.0", true},
		{"198.17.255.255", true},
		{"198.20.0.0", true},
		{"223.255.255.255", true},

		// IPv4 special-purpose ranges.
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"127.0.0.1", false},
		{"127.255.255.254", false},
		{"10.0.0.1", false},
		{"10.255.255.255", false},
		{"172.16.0.1", false},
		{"172.31.255.255", false},
		{"192.168.1.1", false},
		{"100.64.0.1", false},
		{"100.127.255.255", false},
		{"169.254.169.254", false},
		{"169.254.0.1", false},
		{"224.0.0.1", false},
		{"239.255.255.250", false},
		{"255.255.255.255", false},
		{"240.0.0.1", false},
		{"192.0.0.8", false},
		{"198.18.0.1", false},
		{"198.19.255.255", false},
		{"192.0.2.1", false},
		{"198.51.100.1", false},
		{"203.0.113.1", false},

		// IPv6 special-purpose ranges.
		{"::", false},
		{"::1", false},
		{"fc00::1", false},
		{"fd12:3456:789a::1", false},
		{"fe80::1", false},
		{"febf:ffff::1", false},
		{"fec0::1", false},
		{"ff02::1", false},
		{"ff0e::1", false},
		{"2001:db8::1", false},
		{"100::1", false},
		{"fe80::1%eth0", false}, // zone-scoped
		{"2606:4700::1111%eth0", false},

		// IPv6 forms that carry a forbidden IPv4 address.
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"::ffff:169.254.169.254", false},
		{"::ffff:0.0.0.0", false},
		{"::127.0.0.1", false},               // IPv4-compatible
		{"::10.0.0.1", false},                // IPv4-compatible
		{"::ffff:0:127.0.0.1", false},        // IPv4-translated
		{"64:ff9b::7f00:1", false},           // NAT64 127.0.0.1
		{"64:ff9b::a9fe:a9fe", false},        // NAT64 169.254.169.254
		{"64:ff9b::10.0.0.1", false},         // NAT64 10.0.0.1
		{"64:ff9b:1::7f00:1", false},         // local-use NAT64 /96 layout
		{"64:ff9b:1:7f00:0:100::", false},    // local-use NAT64 /48 layout
		{"64:ff9b:1:0:7f:0:108:808", false},  // /64 layout 127.0.0.1, /96 layout 1.8.8.8
		{"2002:7f00:1::1", false},            // 6to4 127.0.0.1
		{"2002:a9fe:a9fe::", false},          // 6to4 169.254.169.254
		{"2002:a00:1::1", false},             // 6to4 10.0.0.1
		{"2001:0:808:808::80ff:fffe", false}, // Teredo, client 127.0.0.1
		{"2001:0:a00:1::f7f7:f7f7", false},   // Teredo, server 10.0.0.1
	}
	var g Guard
	for _, tt := range tests {
		a, err := netip.ParseAddr(tt.addr)
		if err != nil {
			t.Fatalf("ParseAddr(%q): %v", tt.addr, err)
		}
		if got := g.allowed(a); got != tt.want {
			t.Errorf("Allowed(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
	if g.allowed(netip.Addr{}) {
		t.Errorf("Allowed(zero Addr) = true, want false")
	}
}

// TestGuardRefusesNames checks names whose addresses are forbidden: all of
// them, or only one of several. Nothing is dialed.
func TestGuardRefusesNames(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	tests := []struct {
		name  string
		addrs []string
	}{
		{"private", []string{"10.0.0.5"}},
		{"public then loopback", []string{"93.184.216.34", "127.0.0.1"}},
		{"loopback then public", []string{"127.0.0.1", "93.184.216.34"}},
		{"public then metadata", []string{"2606:4700::1111", "169.254.169.254"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var resolves atomic.Int64
			g := b.guard(guardResolver(&resolves, tt.addrs...))
			client, dials := newGuardClient(t, g)
			_, _, err := guardGet(t, client, b.url("receiver.test", "/"))
			assertGuardForbidden(t, err)
			if got := dials.list(); len(got) != 0 {
				t.Errorf("dialed %v, want no dial", got)
			}
			u, _ := url.Parse(b.url("receiver.test", "/"))
			assertGuardForbidden(t, g.check(t.Context(), u))
		})
	}
	t.Cleanup(func() {
		if n := b.hits.Load(); n != 0 {
			t.Errorf("server received %d requests, want 0", n)
		}
	})
}

// TestGuardSendsToCheckedAddress resolves once per connection and dials the
// checked IP literal.
func TestGuardSendsToCheckedAddress(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	var resolves atomic.Int64
	g := b.guard(guardResolver(&resolves, "127.0.0.1"))
	g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	client, dials := newGuardClient(t, g)

	resp, body, err := guardGet(t, client, b.url("receiver.test", "/"))
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	if want := net.JoinHostPort("receiver.test", strconv.Itoa(int(b.port))); body != want {
		t.Errorf("server saw Host %q, want %q", body, want)
	}
	want := []string{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.port).String()}
	if got := dials.list(); !slices.Equal(got, want) {
		t.Errorf("dialed %v, want %v", got, want)
	}
	if n := resolves.Load(); n != 1 {
		t.Errorf("Resolve called %d times, want 1", n)
	}
	if n := b.hits.Load(); n != 1 {
		t.Errorf("server received %d requests, want 1", n)
	}
}

// TestGuardChecksAtDialTime lets Check see an allowed address and the dial a
// forbidden one (DNS rebinding): the send is refused.
func TestGuardChecksAtDialTime(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	var resolves atomic.Int64
	g := b.guard(func(context.Context, string) ([]netip.Addr, error) {
		if resolves.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
	})
	g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	target := b.url("rebind.test", "/")
	u, _ := url.Parse(target)
	if err := g.check(t.Context(), u); err != nil {
		t.Fatalf("Check (first answer 127.0.0.1, allowed): %v", err)
	}
	client, dials := newGuardClient(t, g)
	_, _, err := guardGet(t, client, target)
	assertGuardForbidden(t, err)
	if got := dials.list(); len(got) != 0 {
		t.Errorf("dialed %v, want no dial", got)
	}
	if n := b.hits.Load(); n != 0 {
		t.Errorf("server received %d requests, want 0", n)
	}
}

// TestGuardTriesEachAddress falls back to the next checked address when a
// connection fails.
func TestGuardTriesEachAddress(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	var resolves atomic.Int64
	g := b.guard(guardResolver(&resolves, "127.0.0.2", "127.0.0.1"))
	g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	gt := g.Transport().(*guardTransport)
	var tried []string
	connect := gt.dialer.connect
	gt.dialer.connect = func(ctx context.Context, network, address string) (net.Conn, error) {
		tried = append(tried, address) // dials of one connection are sequential
		if len(tried) == 1 {
			return nil, errors.New("connection refused")
		}
		return connect(ctx, network, address)
	}
	client := &http.Client{Transport: gt, CheckRedirect: checkRedirect}
	t.Cleanup(client.CloseIdleConnections)
	resp, _, err := guardGet(t, client, b.url("receiver.test", "/"))
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	port := strconv.Itoa(int(b.port))
	want := []string{"127.0.0.2:" + port, "127.0.0.1:" + port}
	if !slices.Equal(tried, want) {
		t.Errorf("dialed %v, want %v", tried, want)
	}
}

// TestGuardRacesAddressFamilies: a host with an IPv6 and an IPv4 address
// whose IPv6 route drops packets. Dialed one after the other, the first
// dial held the request until its dial timeout (10s, most of an attempt);
// the families race as net.Dialer races them, so the IPv4 connection wins
// after the fallback delay and the IPv6 dial is abandoned. A first family
// that fails at once hands over at once, whatever the delay; when both
// fail, the error is the first family's.
func TestGuardRacesAddressFamilies(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	errRefused := errors.New("connection refused")
	for _, tc := range []struct {
		name  string
		delay time.Duration
		v6    func(ctx context.Context) error // the IPv6 dial's fate
		v4ok  bool
		want  error
	}{
		{"the first family drops packets", 20 * time.Millisecond,
			func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true, nil},
		{"the first family refuses", time.Hour,
			func(context.Context) error { return errRefused }, true, nil},
		{"both refuse", time.Millisecond,
			func(context.Context) error { return errRefused }, false, errRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var resolves atomic.Int64
			g := b.guard(guardResolver(&resolves, "::1", "127.0.0.1"))
			g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
			gt := g.Transport().(*guardTransport)
			gt.dialer.fallbackDelay = tc.delay
			abandoned := make(chan error, 1)
			connect := gt.dialer.connect
			gt.dialer.connect = func(ctx context.Context, network, address string) (net.Conn, error) {
				if strings.HasPrefix(address, "[::1]") {
					err := tc.v6(ctx)
					abandoned <- err
					return nil, err
				}
				if !tc.v4ok {
					return nil, errors.New("network unreachable")
				}
				return connect(ctx, network, address)
			}
			client := &http.Client{Transport: gt, CheckRedirect: checkRedirect}
			t.Cleanup(client.CloseIdleConnections)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // half the dial timeout
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url("receiver.test", "/"), nil)
			resp, err := client.Do(req)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("get: %v, want the first family's %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			if err := <-abandoned; err == nil {
				t.Fatal("the IPv6 dial succeeded")
			}
		})
	}
}

// TestGuardRedirect answers 302 to the metadata endpoint: the client returns
// the 302 unfollowed, the Location is refused, and nothing but the server is
// dialed.
func TestGuardRedirect(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	var resolves atomic.Int64
	g := b.guard(guardResolver(&resolves, "169.254.169.254"))
	g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	client, dials := newGuardClient(t, g)

	resp, _, err := guardGet(t, client, b.url("127.0.0.1", "/redirect"))
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status = %d, want 302", resp.StatusCode)
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("Location: %v", err)
	}
	if loc.String() != guardMetadataURL {
		t.Fatalf("Location = %q, want %q", loc, guardMetadataURL)
	}
	assertGuardForbidden(t, g.check(t.Context(), loc))
	// Refused for its address too, not only for its port.
	g.AllowPorts = append(g.AllowPorts, 80)
	assertGuardForbidden(t, g.check(t.Context(), loc))

	want := []string{netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), b.port).String()}
	if got := dials.list(); !slices.Equal(got, want) {
		t.Errorf("dialed %v, want only %v", got, want)
	}
	if n := b.hits.Load(); n != 1 {
		t.Errorf("server received %d requests, want 1", n)
	}
	if n := resolves.Load(); n != 0 {
		t.Errorf("Resolve called %d times, want 0", n)
	}
}

func TestGuardCheckRedirect(t *testing.T) {
	t.Parallel()
	if err := checkRedirect(nil, nil); !errors.Is(err, http.ErrUseLastResponse) {
		t.Fatalf("CheckRedirect = %v, want http.ErrUseLastResponse", err)
	}
}

func TestGuardCheckURL(t *testing.T) {
	t.Parallel()
	httpGuard := Guard{AllowHTTP: true, AllowPorts: []uint16{8080}}
	tests := []struct {
		name  string
		guard Guard
		url   string
		ok    bool
	}{
		{"https 443 public", Guard{}, "https://8.8.8.8/", true},
		{"https explicit 443", Guard{}, "https://8.8.8.8:443/path?q=1", true},
		{"https public IPv6", Guard{}, "https://[2606:4700::1111]/", true},
		{"https name", Guard{}, "https://receiver.example/hook", true},
		{"http refused", Guard{}, "http://8.8.8.8/", false},
		{"http refused on 443", Guard{}, "http://8.8.8.8:443/", false},
		{"https 8443 refused", Guard{}, "https://8.8.8.8:8443/", false},
		{"https 8443 allowed", Guard{AllowPorts: []uint16{8443}}, "https://8.8.8.8:8443/", true},
		{"other scheme", Guard{AllowHTTP: true}, "ftp://8.8.8.8/", false},
		{"websocket scheme", Guard{AllowHTTP: true}, "wss://8.8.8.8/", false},
		{"no host", Guard{}, "https:///path", false},
		{"opaque", Guard{}, "https:8.8.8.8", false},
		{"port out of range", Guard{}, "https://8.8.8.8:70000/", false},
		{"http default port 80 needs AllowPorts", Guard{AllowHTTP: true}, "http://8.8.8.8/", false},
		{"http 80 allowed", Guard{AllowHTTP: true, AllowPorts: []uint16{80}}, "http://8.8.8.8/", true},
		{"allowed port", httpGuard, "http://8.8.8.8:8080/", true},
		{"neighbour port", httpGuard, "http://8.8.8.8:8081/", false},
		{"loopback literal", Guard{}, "https://127.0.0.1/", false},
		{"mapped loopback literal", Guard{}, "https://[::ffff:127.0.0.1]/", false},
		{"zone-scoped literal", Guard{}, "https://[fe80::1%25eth0]/", false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.url, err)
		}
		err = tt.guard.checkURL(u)
		if tt.ok && err != nil {
			t.Errorf("%s: CheckURL(%s) = %v, want nil", tt.name, tt.url, err)
		}
		if !tt.ok && !errors.Is(err, courier.CodeDestinationForbidden) {
			t.Errorf("%s: CheckURL(%s) = %v, want destination_forbidden", tt.name, tt.url, err)
		}
	}
	if err := (Guard{}).checkURL(nil); !errors.Is(err, courier.CodeDestinationForbidden) {
		t.Errorf("CheckURL(nil) = %v, want destination_forbidden", err)
	}
}

// TestGuardRefusesScheme sends plain http without AllowHTTP: refused before
// any dial.
func TestGuardRefusesScheme(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	g := Guard{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		AllowPorts:    []uint16{b.port},
	}
	client, dials := newGuardClient(t, g)
	body := &guardBodyRecorder{Reader: strings.NewReader("{}")}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.server.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Do(req)
	assertGuardForbidden(t, err)
	if !body.closed.Load() {
		t.Errorf("request body not closed on refusal")
	}
	if got := dials.list(); len(got) != 0 {
		t.Errorf("dialed %v, want no dial", got)
	}
	if n := b.hits.Load(); n != 0 {
		t.Errorf("server received %d requests, want 0", n)
	}
}

type guardBodyRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *guardBodyRecorder) Close() error {
	c.closed.Store(true)
	return nil
}

// TestGuardErrorIsContentFree refuses a URL with credentials and a query:
// the error names none of them, nor the host.
func TestGuardErrorIsContentFree(t *testing.T) {
	t.Parallel()
	var resolves atomic.Int64
	g := Guard{AllowHTTP: true, AllowPorts: []uint16{8080}, Resolve: guardResolver(&resolves, "10.1.2.3")}
	for _, target := range []string{
		"https://alice:s3cret@127.0.0.1/hook?token=t0ken",
		"http://alice:s3cret@internal.example:8080/hook?token=t0ken",
		"http://alice:s3cret@internal.example:9999/hook?token=t0ken",
		"gopher://alice:s3cret@internal.example/hook?token=t0ken",
	} {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		err = g.check(t.Context(), u)
		assertGuardForbidden(t, err)
		for _, secret := range []string{"alice", "s3cret", "token", "t0ken", "hook", "127.0.0.1", "internal", "10.1.2.3"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q contains %q", err, secret)
			}
		}
	}
}

// TestGuardAllowListIsExact opens exactly what the allow-list names.
func TestGuardAllowListIsExact(t *testing.T) {
	t.Parallel()
	g := Guard{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	for addr, want := range map[string]bool{
		"127.0.0.1":        true,
		"::ffff:127.0.0.1": true, // the same socket address
		"127.0.0.2":        false,
		"127.0.0.0":        false,
		"::1":              false,
		"64:ff9b::7f00:1":  false, // a NAT64 gateway's loopback, not ours
		"2002:7f00:1::1":   false,
		"10.0.0.1":         false,
		"8.8.8.8":          true,
	} {
		if got := g.allowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Allowed(%s) with 127.0.0.1/32 = %v, want %v", addr, got, want)
		}
	}

	ports := Guard{AllowPorts: []uint16{8080}}
	for target, want := range map[string]bool{
		"https://8.8.8.8:8080/": true,
		"https://8.8.8.8:8081/": false,
		"https://8.8.8.8:8079/": false,
		"https://8.8.8.8/":      true,
		"https://8.8.8.8:0/":    false,
	} {
		u, _ := url.Parse(target)
		if err := ports.checkURL(u); (err == nil) != want {
			t.Errorf("CheckURL(%s) with port 8080 = %v, want allowed %v", target, err, want)
		}
	}
}

// TestGuardControl checks the Control hook on its own.
func TestGuardControl(t *testing.T) {
	t.Parallel()
	g := Guard{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	if err := g.control("tcp4", "127.0.0.1:443", nil); err != nil {
		t.Errorf("control(127.0.0.1:443) = %v, want nil", err)
	}
	if err := g.control("tcp4", "8.8.8.8:443", nil); err != nil {
		t.Errorf("control(8.8.8.8:443) = %v, want nil", err)
	}
	assertGuardForbidden(t, g.control("tcp4", "127.0.0.1:8443", nil))
	assertGuardForbidden(t, g.control("tcp4", "127.0.0.2:443", nil))
	assertGuardForbidden(t, g.control("tcp6", "[::1]:443", nil))
	assertGuardForbidden(t, g.control("tcp6", "[fe80::1%eth0]:443", nil))
	assertGuardForbidden(t, g.control("tcp", "not an address", nil))
}

// TestGuardDefaultResolver refuses localhost through the system resolver.
func TestGuardDefaultResolver(t *testing.T) {
	t.Parallel()
	if _, err := net.DefaultResolver.LookupNetIP(t.Context(), "ip", "localhost"); err != nil {
		t.Skipf("localhost does not resolve here: %v", err)
	}
	b := setupGuard(t)
	g := b.guard(nil)
	client, dials := newGuardClient(t, g)
	_, _, err := guardGet(t, client, b.url("localhost", "/"))
	assertGuardForbidden(t, err)
	if got := dials.list(); len(got) != 0 {
		t.Errorf("dialed %v, want no dial", got)
	}
	if n := b.hits.Load(); n != 0 {
		t.Errorf("server received %d requests, want 0", n)
	}
}

// TestGuardTransportSettings checks the transport's fixed settings and that
// it keeps its own copy of the policy.
func TestGuardTransportSettings(t *testing.T) {
	t.Parallel()
	prefixes := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	g := Guard{AllowPrefixes: prefixes}
	gt := g.Transport().(*guardTransport)
	prefixes[0] = netip.MustParsePrefix("10.0.0.0/8")
	if !gt.guard.allowed(netip.MustParseAddr("127.0.0.1")) || gt.guard.allowed(netip.MustParseAddr("10.0.0.1")) {
		t.Errorf("changing the caller's AllowPrefixes changed the transport's policy")
	}

	base := gt.base
	if base.Proxy != nil {
		t.Errorf("Proxy is set, want nil")
	}
	if !base.ForceAttemptHTTP2 {
		t.Errorf("ForceAttemptHTTP2 = false, want true")
	}
	if base.TLSClientConfig == nil || base.TLSClientConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("TLS MinVersion is not TLS 1.2")
	}
	if base.MaxIdleConnsPerHost != 64 {
		t.Errorf("MaxIdleConnsPerHost = %d, want 64", base.MaxIdleConnsPerHost)
	}
	if base.DialContext == nil || base.DialTLSContext != nil || base.TLSHandshakeTimeout == 0 {
		t.Errorf("transport lacks its guarded dialer or timeouts")
	}
	if base.ResponseHeaderTimeout != 0 {
		t.Errorf("ResponseHeaderTimeout = %v: it would cut short a Worker's longer Config.Timeout", base.ResponseHeaderTimeout)
	}
}

// TestGuardDialEndsWithinTheDialTimeout: the transport dials on a context
// that the request's end does not cancel (the connection could serve a
// later request), so a dial the receiver's DNS holds up outlives its
// attempt unless the dial bounds itself. A name server that never answers
// (a resolver that waits as long as its context lets it), or a name that
// resolves to a hundred addresses that drop packets (each connect held for
// the dial timeout, as net.Dialer holds one), must not keep a dial, its
// goroutine and its socket, for longer than the dial timeout after the
// attempt has ended: every attempt to such an endpoint would leave one
// behind.
func TestGuardDialEndsWithinTheDialTimeout(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	many := make([]netip.Addr, 100)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{127, 0, 1, byte(i + 1)})
	}
	for _, tc := range []struct {
		name    string
		resolve func(ctx context.Context, host string) ([]netip.Addr, error)
		connect func(ctx context.Context) error
	}{
		{"the name server never answers", func(ctx context.Context, _ string) ([]netip.Addr, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, nil},
		{"every address drops packets", func(context.Context, string) ([]netip.Addr, error) {
			return slices.Clone(many), nil
		}, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, guardDialTimeout)
			defer cancel()
			<-ctx.Done()
			return ctx.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := b.guard(tc.resolve)
			g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.1.0/24")}
			gt := g.Transport().(*guardTransport)
			dialed := make(chan struct{})
			dial := gt.dialer.dialContext
			gt.base.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
				defer close(dialed)
				return dial(ctx, network, address)
			}
			if tc.connect != nil {
				gt.dialer.connect = func(ctx context.Context, network, address string) (net.Conn, error) {
					return nil, tc.connect(ctx)
				}
			}
			client := &http.Client{Transport: gt, CheckRedirect: checkRedirect}
			t.Cleanup(client.CloseIdleConnections)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond) // the attempt's Timeout
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url("hostile.test", "/"), nil)
			began := time.Now()
			if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("get: %v, want the attempt's deadline", err)
			}
			limit := guardDialTimeout + 5*time.Second
			select {
			case <-dialed:
			case <-time.After(limit - time.Since(began)):
				t.Fatalf("the dial is still running %v after it began, past the dial timeout (%v); its attempt ended long ago", limit, guardDialTimeout)
			}
		})
	}
}

// TestGuardDialSharesItsTimeout: a name whose first address drops packets
// and whose second answers. The dial timeout bounds the whole dial, but,
// shared among the addresses as net.Dialer shares it, the first address
// does not spend it: the second is dialed in time for a request that waits
// less than the dial timeout.
func TestGuardDialSharesItsTimeout(t *testing.T) {
	t.Parallel()
	b := setupGuard(t)
	var resolves atomic.Int64
	g := b.guard(guardResolver(&resolves, "127.0.0.2", "127.0.0.1"))
	g.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	gt := g.Transport().(*guardTransport)
	connect := gt.dialer.connect
	gt.dialer.connect = func(ctx context.Context, network, address string) (net.Conn, error) {
		if strings.HasPrefix(address, "127.0.0.2:") {
			<-ctx.Done() // drops packets
			return nil, ctx.Err()
		}
		return connect(ctx, network, address)
	}
	client := &http.Client{Transport: gt, CheckRedirect: checkRedirect}
	t.Cleanup(client.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(t.Context(), guardDialTimeout-time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url("receiver.test", "/"), nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("get: %v; the first address spent the dial", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
}

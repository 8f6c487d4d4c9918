package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/coded"
)

// Guard is the destination policy of the worker's HTTP transport. The zero
// value is the safe default: https only, port 443 only, every resolved
// address must be public.
//
// An address is public unless it lies in a special-purpose range: unspecified,
// this-network (0/8), loopback, private (RFC 1918), shared (CGNAT 100.64/10),
// link-local (including 169.254.169.254), multicast, broadcast, reserved
// (240/4), IETF protocol assignments (192.0.0/24), benchmarking,
// documentation, IPv6 unique-local (fc00::/7), site-local (fec0::/10) or
// discard-only (100::/64). An IPv6 address that carries an IPv4 address
// (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo) is
// forbidden when any IPv4 address it carries is forbidden. Zone-scoped
// addresses (fe80::1%eth0) are always forbidden.
//
// Every refusal is an error that matches [courier.CodeDestinationForbidden]
// with code [courier.CodeDestinationForbidden]. Its message names the reason
// class only, never the URL, its userinfo or its query.
type Guard struct {
	// AllowPrefixes opens address ranges the policy otherwise forbids (for
	// tests and private deployments), e.g.
	// netip.MustParsePrefix("127.0.0.1/32"). A prefix opens exactly the
	// addresses it contains: 127.0.0.1/32 opens neither ::1 nor the NAT64 form
	// 64:ff9b::7f00:1. IPv4-mapped addresses (::ffff:127.0.0.1) are matched
	// as the IPv4 address they are, so give IPv4 ranges in IPv4 form.
	// Defaults to none.
	AllowPrefixes []netip.Prefix

	// AllowPorts are ports allowed besides 443. The port rule applies to
	// every scheme, so plain http on its default port needs 80 here.
	// Defaults to none.
	AllowPorts []uint16

	// AllowHTTP permits plain http URLs. Defaults to false.
	AllowHTTP bool

	// Resolve looks up a host's addresses. It is not called for IP literals.
	// Its ctx ends at the latest with the dial's timeout (see Transport),
	// even after the request that began the dial has ended: a Resolve
	// should return once ctx has ended, or it holds the dial on. Defaults
	// to net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)

	// TLSClientConfig is the TLS of https requests, for receivers the
	// system's certificate authorities do not vouch for, as on private
	// networks: RootCAs trusts a private CA, Certificates (or
	// GetClientCertificate) answers a receiver that asks for a client
	// certificate (mutual TLS). A certificate in Certificates goes to every
	// receiver that asks for one, public ones too (its private key never
	// leaves): GetClientCertificate, or a worker of its own for the private
	// receivers, narrows that. It changes nothing the guard checks: the
	// scheme, the port and every address are checked as without it. It is
	// cloned when the transport is built, and held to TLS 1.2 or later
	// whatever its MinVersion. Defaults to the system's certificate
	// authorities and no client certificate.
	TLSClientConfig *tls.Config
}

// Settings of the transport built by [Guard.Transport].
const (
	guardDialTimeout           = 10 * time.Second
	guardFallbackDelay         = 300 * time.Millisecond // as net.Dialer's
	guardMinAddressDial        = 2 * time.Second        // as net.Dialer's
	guardKeepAlive             = 30 * time.Second
	guardTLSHandshakeTimeout   = 10 * time.Second
	guardExpectContinueTimeout = 1 * time.Second
	guardIdleConnTimeout       = 90 * time.Second
	guardMaxIdleConns          = 256
	guardMaxIdleConnsPerHost   = 64
	guardMaxResponseHeaderSize = 64 << 10
	// An HTTP/2 connection that has read nothing for guardHTTP2PingIdle
	// is pinged, and closed unless the ping is answered within
	// guardHTTP2PingTimeout.
	guardHTTP2PingIdle    = 10 * time.Second
	guardHTTP2PingTimeout = 5 * time.Second
)

// destinationForbidden returns the refusal error. msg is one of this file's
// constant reason phrases, so it never carries request content.
func destinationForbidden(msg string) error {
	return &coded.Error{Code: courier.CodeDestinationForbidden, Msg: msg}
}

// checkURL checks scheme and port of u without any network I/O. When u's
// host is an IP literal it also checks that address; a host name is checked
// by [Guard.check] or, when sending, at dial time.
func (g Guard) checkURL(u *url.URL) error {
	if u == nil {
		return destinationForbidden("URL missing")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !g.AllowHTTP {
			return destinationForbidden("scheme not allowed")
		}
	default:
		return destinationForbidden("scheme not allowed")
	}
	host := u.Hostname()
	if host == "" {
		return destinationForbidden("host missing")
	}
	port, err := urlPort(u)
	if err != nil || !g.portAllowed(port) {
		return destinationForbidden("port not allowed")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return g.checkAddr(a)
	}
	return nil
}

// check resolves u's host and checks scheme, port and every address, without
// connecting. A host that cannot be resolved is an error that is not a
// refusal. check is advisory: the address a request finally uses is checked
// again when it is dialed, so a name that resolves differently later (DNS
// rebinding) is still refused.
func (g Guard) check(ctx context.Context, u *url.URL) error {
	if err := g.checkURL(u); err != nil {
		return err
	}
	addrs, err := g.lookup(ctx, u.Hostname())
	if err != nil {
		return err
	}
	return g.checkAddrs(addrs)
}

// allowed reports whether one address is allowed by the policy (public, or
// inside AllowPrefixes).
func (g Guard) allowed(a netip.Addr) bool { return g.checkAddr(a) == nil }

// Transport returns an [http.RoundTripper] that enforces the guard. It wraps
// an [*http.Transport] because the scheme is known only to the round trip,
// not to the dialer:
//
//   - RoundTrip checks every request's URL before anything is dialed: its
//     scheme (https, or http with AllowHTTP), that it has a host, its port
//     (443 or one of AllowPorts) and, when the host is an IP literal, that
//     address. It closes the request body when it refuses.
//   - DialContext resolves the host once with Resolve, refuses if any
//     resolved address is forbidden (so a name with one public and one
//     private address is refused), then dials the checked IP literals in
//     resolver order, never re-resolving, so DNS rebinding cannot pass.
//     A host with addresses of both families is dialed as [net.Dialer]
//     dials one: the first address's family first, the other racing it
//     300ms later or as soon as the first fails, and the first connection
//     made wins (Happy Eyeballs), so an address family that drops packets
//     does not spend the attempt.
//   - A [net.Dialer] Control hook re-checks the address and port of every
//     socket just before it connects.
//
// No proxy is used, whatever HTTPS_PROXY, HTTP_PROXY or NO_PROXY say: the
// addresses checked are the ones connected to, and through a proxy those
// would be the proxy's alone, the receiver's resolved and reached by the
// proxy unchecked; a Worker on this transport warns once (Config.Logger)
// when the environment sets one. Redirects are the http.Client's business
// (the Worker's client follows none: a 3xx fails the attempt with
// redirect_refused). The transport allows HTTP/2 over https, requires TLS
// 1.2 or later (see TLSClientConfig for the rest of its TLS), bounds
// dialing, the TLS handshake and the size of response headers, and keeps up
// to 64 idle connections per host and 256 in all, each for up to 90s. Over
// HTTP/2 (one connection per host) the bound in all holds too, give or take
// the requests in flight: a request that needs a new connection while the
// connections open outnumber the requests in flight by more than 256 has the
// idle ones closed first, to be dialed again when next needed, so a worker
// sending to thousands of hosts does not hold a connection to each of them
// for 90s. (Requests to one host share its connection, so up to as many more
// connections as there are such requests in flight may stay idle. A request
// counts as in flight until its answer's body is closed: answers left open
// keep this from closing idle connections, as they keep their own from being
// reused.)
// An HTTP/2
// connection that has read nothing for 10s is pinged, and closed if the
// ping is not answered within 5s: over HTTP/2 every request to a host
// shares one connection, and a request cut short by its timeout resets
// its stream, not the connection, so a receiver gone silent on it (a hung
// process whose kernel still acknowledges, or the one backend of many a
// load balancer pinned it to) would otherwise take every later attempt to
// that host, where a new connection would be answered. A dial, lookup
// included, ends within its own timeout (10s), shared among a family's
// addresses as net.Dialer shares its Timeout, even when the request that
// began it has ended (the transport dials on, for a later request). The
// wait for the answer is the request context's to bound (the Worker
// bounds each attempt by Config.Timeout, however long).
// The guard is copied when the transport is built, so later changes to g's
// slices, or to its TLSClientConfig, do not change the policy. The returned
// RoundTripper also has CloseIdleConnections, so
// [http.Client.CloseIdleConnections] works.
func (g Guard) Transport() http.RoundTripper {
	g.AllowPrefixes = slices.Clone(g.AllowPrefixes)
	g.AllowPorts = slices.Clone(g.AllowPorts)
	tc := &tls.Config{}
	if g.TLSClientConfig != nil {
		tc = g.TLSClientConfig.Clone()
	}
	tc.MinVersion = max(tc.MinVersion, tls.VersionTLS12)
	g.TLSClientConfig = tc // the copy's, not the caller's
	nd := &net.Dialer{
		Timeout:   guardDialTimeout,
		KeepAlive: guardKeepAlive,
		Control:   g.control,
	}
	d := &guardDialer{guard: g, connect: nd.DialContext}
	t := &guardTransport{
		guard:  g,
		dialer: d,
		base: &http.Transport{
			Proxy:                  nil,
			ForceAttemptHTTP2:      true,
			TLSClientConfig:        tc,
			TLSHandshakeTimeout:    guardTLSHandshakeTimeout,
			ExpectContinueTimeout:  guardExpectContinueTimeout,
			IdleConnTimeout:        guardIdleConnTimeout,
			MaxIdleConns:           guardMaxIdleConns,
			MaxIdleConnsPerHost:    guardMaxIdleConnsPerHost,
			MaxResponseHeaderBytes: guardMaxResponseHeaderSize,
			HTTP2:                  &http.HTTP2Config{SendPingTimeout: guardHTTP2PingIdle, PingTimeout: guardHTTP2PingTimeout},
		},
	}
	t.base.DialContext = t.dial
	return t
}

// checkRedirect is an [http.Client] checkRedirect that never follows
// redirects: it returns [http.ErrUseLastResponse], so a 3xx reaches the
// caller as a response (which the worker treats as a permanent failure).
func checkRedirect(req *http.Request, via []*http.Request) error {
	return http.ErrUseLastResponse
}

// guardTransport checks each request's URL before handing it to base, whose
// dialer checks every address.
//
// It also bounds the connections base holds idle across hosts, HTTP/2's
// too. base's MaxIdleConns bounds only its HTTP/1 connections: an HTTP/2
// connection is held by its host's pool until it has been idle for
// IdleConnTimeout, so a worker sending to many hosts (a connection each)
// would hold as many connections as hosts it sent to in that time. So it
// counts the connections open (conns) and the requests in flight
// (inflight, until the answer's body is closed, a protocol switch's
// too): each connection in use serves at least one request in flight, so
// when the connections open exceed the requests in flight by more than
// MaxIdleConns, more than that many are idle, and a new connection first
// has base close the idle ones. The converse does not hold: over HTTP/2 several requests in
// flight may share one connection, and as many more connections as they
// share may be idle unnoticed. Those closed are dialed again when next
// needed; over HTTP/1 base keeps no more than MaxIdleConns idle anyway,
// and this comes to pass only for a connection dialed for a request that
// another served meanwhile.
type guardTransport struct {
	guard    Guard
	dialer   *guardDialer
	base     *http.Transport
	conns    atomic.Int64 // connections open, dialed by dial
	inflight atomic.Int64 // requests in RoundTrip or whose answer's body is open
}

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.guard.checkURL(req.URL); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	t.inflight.Add(1)
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		t.inflight.Add(-1) // no answer
		return resp, err
	}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// The body of a protocol switch is the connection, in use until
		// it is closed, and must stay writable.
		resp.Body = countedSwitch{&countedBody{ReadCloser: rwc, count: counted{n: &t.inflight}}, rwc}
		return resp, nil
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, count: counted{n: &t.inflight}}
	return resp, nil
}

// dial is base's DialContext: the guard's dial, counted in conns, after
// base has closed its idle connections if more than guardMaxIdleConns of
// them may be HTTP/2's (see guardTransport).
func (t *guardTransport) dial(ctx context.Context, network, address string) (net.Conn, error) {
	conn, err := t.dialer.dialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	if t.conns.Add(1)-t.inflight.Load() > guardMaxIdleConns {
		t.base.CloseIdleConnections()
	}
	return &countedConn{Conn: conn, count: counted{n: &t.conns}}, nil
}

// countedConn is a connection counted in a guardTransport's conns until
// it is closed.
type countedConn struct {
	net.Conn
	count counted
}

func (c *countedConn) Close() error {
	c.count.done()
	return c.Conn.Close()
}

// countedBody is an answer's body, its request counted in a
// guardTransport's inflight until it is closed.
type countedBody struct {
	io.ReadCloser
	count counted
}

func (b *countedBody) Close() error {
	b.count.done()
	return b.ReadCloser.Close()
}

// countedSwitch is the body of a protocol switch (101), the connection
// itself: a countedBody that can be written to.
type countedSwitch struct {
	*countedBody
	io.Writer
}

// counted is one of the things n counts, taken off it once, however
// many times done is called.
type counted struct {
	n    *atomic.Int64
	gone atomic.Bool
}

func (c *counted) done() {
	if c.gone.CompareAndSwap(false, true) {
		c.n.Add(-1)
	}
}

// CloseIdleConnections closes the idle connections of the wrapped transport.
func (t *guardTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

// guardDialer dials only addresses its guard allows.
type guardDialer struct {
	guard Guard
	// connect dials one IP literal address; it is a [net.Dialer]'s
	// DialContext, whose Control hook re-checks the address.
	connect func(ctx context.Context, network, address string) (net.Conn, error)
	// fallbackDelay is how long the first address family is dialed alone
	// before the other joins the race (dialParallel); 0 is
	// guardFallbackDelay.
	fallbackDelay time.Duration
}

func (d *guardDialer) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	// The transport dials on a context that the request's end does not
	// cancel (the connection may serve a later request), so the dial
	// bounds itself, lookup included, as a net.Dialer's Timeout bounds
	// its own: a name server that never answers, or a name with many
	// addresses that drop packets, holds a dial no longer than this.
	ctx, cancel := context.WithTimeout(ctx, guardDialTimeout)
	defer cancel()
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, destinationForbidden("address malformed")
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || !d.guard.portAllowed(uint16(port)) {
		return nil, destinationForbidden("port not allowed")
	}
	addrs, err := d.guard.lookup(ctx, host)
	if err != nil {
		return nil, err
	}
	if err := d.guard.checkAddrs(addrs); err != nil {
		return nil, err
	}
	primaries, fallbacks := byFamily(addrs)
	if len(fallbacks) == 0 {
		return d.dialSerial(ctx, network, primaries, uint16(port))
	}
	return d.dialParallel(ctx, network, primaries, fallbacks, uint16(port))
}

// byFamily splits addrs, in resolver order, into those of the first
// address's family and those of the other.
func byFamily(addrs []netip.Addr) (primaries, fallbacks []netip.Addr) {
	v4 := addrs[0].Unmap().Is4()
	for _, a := range addrs {
		if a.Unmap().Is4() == v4 {
			primaries = append(primaries, a)
		} else {
			fallbacks = append(fallbacks, a)
		}
	}
	return primaries, fallbacks
}

// dialSerial dials addrs one after the other, returning the first
// connection made, or the first error. As net.Dialer does, it shares
// what is left of ctx's time (dialContext gives it a deadline) among the
// addresses left, giving each at
// least guardMinAddressDial (or all that is left), so that one address
// that drops packets does not spend the whole dial.
func (d *guardDialer) dialSerial(ctx context.Context, network string, addrs []netip.Addr, port uint16) (net.Conn, error) {
	var first error
	deadline, _ := ctx.Deadline() // dialContext bounds every dial
	for i, a := range addrs {
		left := time.Until(deadline)
		actx, cancel := context.WithTimeout(ctx, min(left, max(left/time.Duration(len(addrs)-i), guardMinAddressDial)))
		conn, err := d.connect(actx, network, netip.AddrPortFrom(a.Unmap(), port).String())
		cancel()
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// dialParallel races the two address families, as net.Dialer does for a
// dual-stack host (Happy Eyeballs): the primaries (the first address's
// family) are dialed at once, the fallbacks after fallbackDelay or as soon
// as the primaries fail, whichever comes first. The first connection made
// wins and the other race is cancelled (a connection it makes late is
// closed), so an address family that drops packets (an unrouted IPv6
// address) costs an attempt fallbackDelay, not its dial timeout.
func (d *guardDialer) dialParallel(ctx context.Context, network string, primaries, fallbacks []netip.Addr, port uint16) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		conn    net.Conn
		err     error
		primary bool
	}
	results, returned := make(chan result), make(chan struct{})
	defer close(returned)
	race := func(addrs []netip.Addr, primary bool) {
		go func() {
			conn, err := d.dialSerial(ctx, network, addrs, port)
			select {
			case results <- result{conn, err, primary}:
			case <-returned:
				if conn != nil {
					conn.Close()
				}
			}
		}()
	}
	race(primaries, true)
	delay := d.fallbackDelay
	if delay == 0 {
		delay = guardFallbackDelay
	}
	fallback := time.NewTimer(delay)
	defer fallback.Stop()
	var primaryErr error
	fallbackStarted, pending := false, 1
	for {
		select {
		case <-fallback.C:
			if !fallbackStarted {
				race(fallbacks, false)
				fallbackStarted, pending = true, pending+1
			}
		case r := <-results:
			if r.err == nil {
				return r.conn, nil
			}
			pending--
			if r.primary {
				primaryErr = r.err
				if !fallbackStarted {
					race(fallbacks, false)
					fallbackStarted, pending = true, pending+1
				}
			} else if primaryErr == nil {
				primaryErr = r.err // until the primaries report their own
			}
			if pending == 0 {
				return nil, primaryErr
			}
		}
	}
}

// control is the [net.Dialer] Control hook: the last check of the remote
// address, just before the socket connects.
func (g Guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return destinationForbidden("address malformed")
	}
	if !g.portAllowed(ap.Port()) {
		return destinationForbidden("port not allowed")
	}
	return g.checkAddr(ap.Addr())
}

// lookup returns host's addresses: the address itself for an IP literal,
// otherwise what Resolve answers.
func (g Guard) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	resolve := g.Resolve
	if resolve == nil {
		resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("client: resolve destination: %w", err)
	}
	return addrs, nil
}

// errNoAddresses reports a name that resolved to nothing.
var errNoAddresses = errors.New("client: destination resolved to no addresses")

// checkAddrs refuses unless every address is allowed.
func (g Guard) checkAddrs(addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return errNoAddresses
	}
	for _, a := range addrs {
		if err := g.checkAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// checkAddr returns the refusal for a, or nil if the policy allows it.
func (g Guard) checkAddr(a netip.Addr) error {
	if !a.IsValid() {
		return destinationForbidden("address invalid")
	}
	if a.Zone() != "" {
		return destinationForbidden("address is zone-scoped")
	}
	// An IPv4-mapped address is the IPv4 address as far as a socket is
	// concerned, so it is matched, and dialed, as one.
	a = a.Unmap()
	for _, p := range g.AllowPrefixes {
		if p.Contains(a) {
			return nil
		}
	}
	if reason := specialPurpose(a); reason != "" {
		return destinationForbidden("address is " + reason)
	}
	if !a.Is6() {
		return nil
	}
	for _, form := range ipv4Embeddings {
		if !form.prefix.Contains(a) {
			continue
		}
		for _, v4 := range form.ipv4(a.As16()) {
			if reason := specialPurpose(v4); reason != "" {
				return destinationForbidden("address is " + form.name + " with embedded " + reason + " IPv4")
			}
		}
	}
	return nil
}

// portAllowed reports whether the policy allows port.
func (g Guard) portAllowed(port uint16) bool {
	return port == 443 || (port != 0 && slices.Contains(g.AllowPorts, port))
}

// urlPort returns u's port, or its scheme's default.
func urlPort(u *url.URL) (uint16, error) {
	p := u.Port()
	if p == "" {
		if u.Scheme == "http" {
			return 80, nil
		}
		return 443, nil
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return uint16(n), err
}

// specialPurpose returns the reason class of the forbidden range a lies in,
// or "" if a is public.
func specialPurpose(a netip.Addr) string {
	for _, r := range specialPurposeRanges {
		if r.prefix.Contains(a) {
			return r.reason
		}
	}
	return ""
}

// specialPurposeRanges are the forbidden ranges, after the IANA IPv4 and IPv6
// Special-Purpose Address Registries. The first match names the reason, so
// narrower ranges come before the ranges containing them.
var specialPurposeRanges = []struct {
	prefix netip.Prefix
	reason string
}{
	// IPv4.
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified"},
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},

	// IPv6.
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// ipv4Embeddings are the IPv6 ranges whose addresses carry IPv4 addresses.
// An address in one is forbidden when any IPv4 address it carries is.
// (IPv4-mapped ::ffff:0:0/96 needs no row: it is unmapped before checking.)
var ipv4Embeddings = []struct {
	prefix netip.Prefix
	name   string
	ipv4   func(b [16]byte) []netip.Addr
}{
	{netip.MustParsePrefix("::/96"), "IPv4-compatible", func(b [16]byte) []netip.Addr {
		return []netip.Addr{nat64IPv4(b, 96)}
	}},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated", func(b [16]byte) []netip.Addr {
		return []netip.Addr{nat64IPv4(b, 96)}
	}},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64", func(b [16]byte) []netip.Addr {
		return []netip.Addr{nat64IPv4(b, 96)}
	}},
	// The local-use NAT64 prefix (RFC 8215) is shared out in prefixes of any
	// RFC 6052 length, and the IPv4 address sits elsewhere for each length;
	// every layout must decode to an allowed address.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64", func(b [16]byte) []netip.Addr {
		return []netip.Addr{nat64IPv4(b, 48), nat64IPv4(b, 56), nat64IPv4(b, 64), nat64IPv4(b, 96)}
	}},
	// 6to4 (RFC 3056): the IPv4 address is bits 16–47.
	{netip.MustParsePrefix("2002::/16"), "6to4", func(b [16]byte) []netip.Addr {
		return []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	}},
	// Teredo (RFC 4380): the server's IPv4 address is bits 32–63 and the
	// client's is bits 96–127, inverted.
	{netip.MustParsePrefix("2001::/32"), "Teredo", func(b [16]byte) []netip.Addr {
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{netip.AddrFrom4([4]byte(b[4:8])), netip.AddrFrom4(client)}
	}},
}

// nat64IPv4 returns the IPv4 address embedded in b after a NAT64 prefix of
// prefixLen bits (32, 40, 48, 56, 64 or 96), per RFC 6052 section 2.2: the
// four octets follow the prefix, skipping octet 8 (bits 64–71), which is
// reserved.
func nat64IPv4(b [16]byte, prefixLen int) netip.Addr {
	var v4 [4]byte
	for i, n := prefixLen/8, 0; n < len(v4); i++ {
		if i == 8 {
			continue
		}
		v4[n] = b[i]
		n++
	}
	return netip.AddrFrom4(v4)
}

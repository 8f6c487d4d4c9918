package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/courier-go/courier"
)

// TestGuardTLSClientConfigReachesPrivateReceivers: receivers on private
// networks, the very deployments AllowPrefixes opens, are as often as not
// served with a certificate a private CA signed, and may ask the sender for a
// client certificate (mutual TLS). Guard.TLSClientConfig is how the worker
// trusts that CA and presents its certificate without giving up the guard:
// the addresses, ports and schemes it checks stay checked, the caller's
// tls.Config is copied, not altered, and TLS older than 1.2 stays refused.
func TestGuardTLSClientConfigReachesPrivateReceivers(t *testing.T) {
	t.Parallel()
	serverCert, serverLeaf := selfSigned(t, "receiver.internal")
	clientCert, clientLeaf := selfSigned(t, "sender.internal")
	roots := x509.NewCertPool() // the private CA: the receiver's own certificate
	roots.AddCert(serverLeaf)
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(clientLeaf)

	start := func(mutual bool) uint16 {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Proto", r.Proto)
			w.WriteHeader(http.StatusNoContent)
		}))
		srv.EnableHTTP2 = true
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}}
		if mutual {
			srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
			srv.TLS.ClientCAs = clientCAs
		}
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes refused below
		srv.StartTLS()
		t.Cleanup(srv.Close)
		ap, err := netip.ParseAddrPort(srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return ap.Port()
	}
	private, mutual := start(false), start(true)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	resolve := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}

	for _, tc := range []struct {
		name      string
		port      uint16
		prefixes  []netip.Prefix
		tls       *tls.Config
		wantProto string // "" for a request that must get no answer
		forbidden bool   // refused by the guard, before any handshake
	}{
		{"a private CA not trusted", private, loopback, nil, "", false},
		{"a private CA trusted", private, loopback, &tls.Config{RootCAs: roots}, "HTTP/2.0", false},
		{"mutual TLS without a client certificate", mutual, loopback, &tls.Config{RootCAs: roots}, "", false},
		{"mutual TLS with a client certificate", mutual, loopback, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}, "HTTP/2.0", false},
		{"mutual TLS to an address not opened", mutual, nil, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := Guard{AllowPrefixes: tc.prefixes, AllowPorts: []uint16{tc.port}, Resolve: resolve, TLSClientConfig: tc.tls}
			c := &http.Client{Transport: g.Transport(), CheckRedirect: checkRedirect}
			defer c.CloseIdleConnections()
			resp, err := c.Get("https://" + net.JoinHostPort("receiver.internal", strconv.Itoa(int(tc.port))) + "/hooks")
			if err == nil {
				resp.Body.Close()
			}
			switch {
			case tc.wantProto != "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantProto != "" && resp.Header.Get("X-Proto") != tc.wantProto:
				t.Fatalf("answered over %q, want %q", resp.Header.Get("X-Proto"), tc.wantProto)
			case tc.wantProto == "" && err == nil:
				t.Fatalf("answered %d, want no answer", resp.StatusCode)
			case tc.wantProto == "" && errors.Is(err, courier.CodeDestinationForbidden) != tc.forbidden:
				t.Fatalf("error %v: destination_forbidden is %v, want %v", err, !tc.forbidden, tc.forbidden)
			}
		})
	}

	t.Run("the caller's config is copied and held to TLS 1.2", func(t *testing.T) {
		t.Parallel()
		mine := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10}
		gt := Guard{TLSClientConfig: mine}.Transport().(*guardTransport)
		mine.RootCAs = nil
		got := gt.base.TLSClientConfig
		if got == mine || got.RootCAs != roots {
			t.Errorf("the transport shares the caller's tls.Config: changing it changed the transport's")
		}
		if got.MinVersion != tls.VersionTLS12 || mine.MinVersion != tls.VersionTLS10 {
			t.Errorf("MinVersion %x (caller's now %x), want TLS 1.2 in the transport and the caller's left as it was", got.MinVersion, mine.MinVersion)
		}
	})
}

// selfSigned returns a self-signed certificate for the DNS name, and its
// leaf, which trusts it as a CA would.
func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}

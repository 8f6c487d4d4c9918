package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// A receiver on a private network whose certificate a private CA signed:
// the Guard opens its address and port and trusts the CA, and checks
// everything else as ever (a redirect, another address, plain http are
// refused). Here the network is loopback and the CA is the test server's
// own certificate; a client certificate for mutual TLS goes in
// TLSClientConfig.Certificates.
func ExampleGuard_privateNetwork() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	outbox, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer outbox.Close()

	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent) // a plain webhook receiver: the none profile takes any 2xx
	}))
	defer receiver.Close()
	endpoint := receiver.URL + "/hooks"
	if _, err := outbox.Outbox.Enqueue(ctx, outbox.DB(), store.EnqueueParams{
		NotificationID: "n-1", Endpoint: endpoint, Payload: []byte(`{"id":"n-1"}`), Profile: ack.ProfileNone,
	}); err != nil {
		panic(err)
	}

	u, err := url.Parse(receiver.URL)
	if err != nil {
		panic(err)
	}
	at := netip.MustParseAddrPort(u.Host)
	roots := x509.NewCertPool()
	roots.AddCert(receiver.Certificate()) // the private CA's certificate, in production read from a PEM file
	private := client.Guard{
		AllowPrefixes:   []netip.Prefix{netip.PrefixFrom(at.Addr(), at.Addr().BitLen())},
		AllowPorts:      []uint16{at.Port()},
		TLSClientConfig: &tls.Config{RootCAs: roots},
	}
	w, err := client.NewWorker(client.Config{
		Store: outbox, Signer: couriertest.StandardWebhooksKeys("shop").Signer, Transport: private.Transport(),
	})
	if err != nil {
		panic(err)
	}
	n, err := w.Work(ctx)
	d, lerr := outbox.Outbox.Lookup(ctx, "n-1", endpoint)
	if lerr != nil {
		panic(lerr)
	}
	fmt.Println("claimed:", n, err, "status:", d.Status)
	// Output:
	// claimed: 1 <nil> status: succeeded
}

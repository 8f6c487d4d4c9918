package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// paid is the receiver's notification type in the Guard's example.
type paid struct {
	NotificationID string `json:"notification_id" validate:"required"`
	OrderID        string `json:"order_id" validate:"required"`
}

func (p paid) DedupeKey() string { return p.NotificationID }

// In development the receiver runs on this machine over plain http, which
// the zero Guard, the worker's default, refuses: the delivery fails for
// good with destination_forbidden. Open exactly the receiver's address and
// port, and redrive it.
func ExampleGuard() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	orders, err := sqlite.Open(ctx, filepath.Join(dir, "orders.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer orders.Close()
	shipping, err := sqlite.Open(ctx, filepath.Join(dir, "shipping.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer shipping.Close()

	key, err := signature.ParseStandardWebhooksKey("k1", signature.NewStandardWebhooksSecret()) // both ends' secret
	if err != nil {
		panic(err)
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "orders", Keys: []signature.StandardWebhooksKey{key},
	})
	if err != nil {
		panic(err)
	}
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: shipping, Verifier: verifier},
		func(ctx context.Context, tx *sqlx.Tx, p paid) error {
			fmt.Println("shipping order", p.OrderID)
			return nil
		})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(rcv) // http://127.0.0.1:<port>
	defer srv.Close()
	endpoint := srv.URL + "/hooks/orders"
	if _, err := orders.Outbox.Enqueue(ctx, orders.DB(), store.EnqueueParams{
		NotificationID: "order-1-paid", Endpoint: endpoint,
		Payload: []byte(`{"notification_id":"order-1-paid","order_id":"1"}`),
	}); err != nil {
		panic(err)
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		panic(err)
	}
	deliver := func(transport http.RoundTripper) {
		w, err := client.NewWorker(client.Config{Store: orders, Signer: signer, Transport: transport,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			panic(err)
		}
		if _, err := w.Work(ctx); err != nil {
			panic(err)
		}
		d, err := orders.Outbox.Lookup(ctx, "order-1-paid", endpoint)
		if err != nil {
			panic(err)
		}
		if d.LastErrorCode != "" {
			fmt.Println(d.Status, d.LastErrorCode)
			return
		}
		fmt.Println(d.Status)
	}

	deliver(nil) // the zero Guard's transport
	port := netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()
	dev := client.Guard{ // in development only
		AllowHTTP:     true,
		AllowPorts:    []uint16{port},
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}
	if _, err := orders.Outbox.Redrive(ctx, store.RedriveParams{Endpoint: endpoint}); err != nil {
		panic(err)
	}
	deliver(dev.Transport())
	// Output:
	// failed destination_forbidden
	// shipping order 1
	// succeeded
}

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

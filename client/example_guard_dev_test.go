package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier/client"
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

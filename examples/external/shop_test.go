package shop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"

	"example.com/shop/orders"
	"example.com/shop/shipping"
)

func TestMain(m *testing.M) { couriertest.Main(m) }

// engines open a sender's and a receiver's store on one engine.
var engines = map[string]func(t *testing.T) (sender, receiver *store.Store){
	"sqlite": func(t *testing.T) (*store.Store, *store.Store) {
		open := func(name string) *store.Store {
			s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), name), store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open("orders.db"), open("shipping.db")
	},
	"postgres": func(t *testing.T) (*store.Store, *store.Store) {
		return couriertest.PostgresStore(t, store.Config{}), couriertest.PostgresStore(t, store.Config{})
	},
}

// TestPaidOrdersShipOnce: every paid order ships exactly once through a
// shipping service that fails first attempts and drops answers after it
// committed; an order whose payment rolled back never ships.
func TestPaidOrdersShipOnce(t *testing.T) {
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sender, receiver := open(t)
			for s, schema := range map[*store.Store]string{sender: orders.Schema, receiver: shipping.Schema} {
				if _, err := s.DB().ExecContext(ctx, schema); err != nil {
					t.Fatal(err)
				}
			}
			keys := couriertest.StandardWebhooksKeys("orders")
			h, err := shipping.Handler(receiver, keys.Verifier, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			srv := couriertest.NewServer(h, couriertest.Sequence(
				couriertest.Fault{Status: 503, RetryAfter: "1"},
				couriertest.Fault{DropAfterCommit: true},
			))
			defer srv.Close()

			svc := &orders.Service{Store: sender, Shipping: srv.URL + "/notifications"}
			for i, id := range []string{"o-1", "o-2", "o-3"} {
				if err := svc.Pay(ctx, id, 100*(i+1)); err != nil {
					t.Fatal(err)
				}
			}
			if err := svc.Pay(ctx, "o-1", 999); err == nil { // the order exists: the whole payment rolls back
				t.Fatal("paying o-1 twice succeeded")
			}

			w, err := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Transport: srv.Guard().Transport(),
				Backoff: func(int, time.Duration) time.Duration { return 0 }})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := couriertest.Drain(ctx, w); err != nil {
				t.Fatal(err)
			}
			shipped := shipments(ctx, t, receiver)
			want := map[string]int{"o-1": 100, "o-2": 200, "o-3": 300}
			if len(shipped) != len(want) {
				t.Fatalf("shipped %v, want %v", shipped, want)
			}
			for id, total := range want {
				if shipped[id] != total {
					t.Fatalf("shipped %v, want %v", shipped, want)
				}
			}
			if st := srv.Stats(); st.Dropped != 3 || st.Faulted != 3 {
				t.Fatalf("the faults did not all happen: %+v", st)
			}
		})
	}
}

// shipments returns the shipping service's table: order id -> total.
func shipments(ctx context.Context, t *testing.T, s *store.Store) map[string]int {
	t.Helper()
	var rows []struct {
		OrderID string `db:"order_id"`
		Total   int    `db:"total"`
	}
	if err := s.DB().SelectContext(ctx, &rows, "SELECT order_id, total FROM shipments"); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int)
	for _, r := range rows {
		out[r.OrderID] = r.Total
	}
	return out
}

// TestPayOverHTTP: the orders API takes the total in a JSON body (its
// documentation said a query parameter, which it answers 400), and pays
// an order once. A second payment for an order was answered 500, as a
// failure of the service, and the body was read without a bound: every
// refusal is now a problem+json with a stable code, a second payment 409
// order_already_paid, a body over 4 KiB 413 body_too_large.
func TestPayOverHTTP(t *testing.T) {
	for name, open := range engines {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sender, _ := open(t)
			if _, err := sender.DB().ExecContext(t.Context(), orders.Schema); err != nil {
				t.Fatal(err)
			}
			const shipping = "https://shipping.example/notifications"
			mux := http.NewServeMux()
			mux.Handle("POST /orders/{id}/pay", &orders.Service{Store: sender, Shipping: shipping})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			for _, tc := range []struct {
				path, body string
				want       int
				code       string
			}{
				{"/orders/o-1/pay?total=250", "", http.StatusBadRequest, "malformed_json"},
				{"/orders/o-1/pay", `{"total":0}`, http.StatusBadRequest, "validation_failed"},
				{"/orders/o-1/pay", `[250]`, http.StatusBadRequest, "malformed_json"}, // not an object
				{"/orders/o-1/pay", `{"total":"250"}`, http.StatusBadRequest, "validation_failed"},
				{"/orders/o-1/pay", `{"total":250}`, http.StatusAccepted, ""},
				{"/orders/o-1/pay", `{"total":250}`, http.StatusConflict, "order_already_paid"}, // nothing more is enqueued
				{"/orders/o-1/pay", `{"total":300}`, http.StatusConflict, "order_already_paid"},
				{"/orders/o-2/pay", `{"total":250,"note":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge, "body_too_large"},
				{"/orders/o%202/pay", `{"total":250}`, http.StatusBadRequest, "validation_failed"}, // not an id shipping accepts
			} {
				resp, err := srv.Client().Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				var p struct {
					Status int    `json:"status"`
					Code   string `json:"code"`
				}
				ct := resp.Header.Get("Content-Type")
				if tc.code != "" && ct == "application/problem+json" {
					err = json.NewDecoder(resp.Body).Decode(&p)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want || p.Code != tc.code || (tc.code != "" && (ct != "application/problem+json" || err != nil || p.Status != tc.want)) {
					t.Errorf("POST %s: %d %s code %q (%v), want %d code %q", tc.path, resp.StatusCode, ct, p.Code, err, tc.want, tc.code)
				}
			}
			d, err := sender.Outbox.Lookup(t.Context(), "order-o-1-paid", shipping)
			if err != nil {
				t.Fatal(err)
			}
			if d.Attempts != 0 || string(d.Payload) != `{"notification_id":"order-o-1-paid","order_id":"o-1","total":250}` {
				t.Fatalf("o-1's notification: %+v", d)
			}
			page, err := sender.Outbox.List(t.Context(), store.ListParams{})
			if err != nil || len(page.Deliveries) != 1 {
				t.Fatalf("%d deliveries enqueued (%v), want o-1's alone", len(page.Deliveries), err)
			}
		})
	}
}

// TestShippingLogsFailures: the shipping receiver had no Logger, and
// courier's receivers are quiet without one: a shipment that could not be
// written was answered 500 handler_failed (the sender retries) with
// nothing logged. Its failures are logged at Error now.
func TestShippingLogsFailures(t *testing.T) {
	t.Parallel()
	_, receiver := engines["sqlite"](t) // without shipping's table: every shipment fails
	keys := couriertest.StandardWebhooksKeys("orders")
	var logs bytes.Buffer
	h, err := shipping.Handler(receiver, keys.Verifier, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, couriertest.NewRequest("https://shipping.example/notifications", "order-o-1-paid",
		[]byte(`{"notification_id":"order-o-1-paid","order_id":"o-1","total":100}`), keys.Signer))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("a shipment that could not be written answered %d %s, want 500", rec.Code, rec.Body)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "code=handler_failed") {
		t.Fatalf("a 500 logged %q, want an Error with its code", logs.String())
	}
}

// TestPayLogsFailures: a payment that failed was answered 500 "could not
// pay" with nothing logged. It is answered 500 internal_error as
// problem+json now, and logged at Error with its code.
func TestPayLogsFailures(t *testing.T) {
	t.Parallel()
	sender, _ := engines["sqlite"](t)
	if _, err := sender.DB().ExecContext(t.Context(), orders.Schema); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", &orders.Service{Store: sender, Shipping: "ftp://shipping.example/notifications", // Enqueue refuses it
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/orders/o-1/pay", "application/json", strings.NewReader(`{"total":250}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a failed payment answered %d %s, want 500 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "code=invalid_argument") {
		t.Fatalf("a failed payment logged %q, want an Error with its code", logs.String())
	}
}

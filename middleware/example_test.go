package middleware_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// A receiver verifies every delivery's Standard Webhooks signature before
// its handler sees the body; the handler gets the same bytes and learns who
// sent them.
func ExampleVerify() {
	key, err := signature.ParseStandardWebhooksKey("2026-04", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	sent := time.Unix(1614265330, 0)
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "billing",
		Keys:   []signature.StandardWebhooksKey{key},
		Now:    func() time.Time { return sent }, // a test clock; leave nil in production
	})
	if err != nil {
		panic(err)
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := middleware.PrincipalFromContext(r.Context())
		if !ok {
			http.Error(w, "not verified", http.StatusInternalServerError) // Verify is not in front of this handler
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%s sent %s", p.Sender, body)
	})
	srv := httptest.NewServer(middleware.Verify(verifier, middleware.BodyLimits{MaxBytes: 1 << 20})(app))
	defer srv.Close()

	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		panic(err)
	}
	deliver := func(signed, body string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		if err := signer.Sign(req, signature.Message{ID: "n-1", Body: []byte(signed), Time: sent}); err != nil {
			panic(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil {
			panic(err)
		}
		if resp.StatusCode == http.StatusOK {
			fmt.Printf("%d %s\n", resp.StatusCode, got)
		} else {
			fmt.Printf("%d %s\n", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	deliver(`{"amount":42}`, `{"amount":42}`)
	deliver(`{"amount":42}`, `{"amount":4200}`) // tampered on the way
	// Output:
	// 200 billing sent {"amount":42}
	// 401 Signature error="signature_mismatch"
}

// A handler's writes commit only when it answers below 400, and the client
// gets the answer only once they have committed.
func ExampleTransaction() {
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	db := st.DB()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)`); err != nil {
		panic(err)
	}

	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := middleware.TxFromContext(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError) // Transaction is not in front of this handler
			return
		}
		item := r.URL.Query().Get("item")
		if _, err := tx.ExecContext(r.Context(), `INSERT INTO orders (item) VALUES (?)`, item); err != nil {
			http.Error(w, "insert failed", http.StatusInternalServerError)
			return
		}
		if item == "" {
			http.Error(w, "item is required", http.StatusUnprocessableEntity) // the insert is rolled back
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	h := middleware.Transaction(st.Begin)(app)

	for _, target := range []string{"/orders?item=book", "/orders"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, target, nil))
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM orders`); err != nil {
			panic(err)
		}
		fmt.Printf("%s: %d, %d order(s) stored\n", target, rec.Code, n)
	}
	// Output:
	// /orders?item=book: 201, 1 order(s) stored
	// /orders: 422, 1 order(s) stored
}

// Two handlers share one Budget of bytes in flight. While it is spent, both
// answer 503 server_busy at once, with Retry-After; a sender comes back
// later instead of queueing.
func ExampleNewBudget() {
	budget := middleware.NewBudget(1 << 20) // for both handlers together
	limits := middleware.BodyLimits{MaxBytes: 64 << 10, Budget: budget}
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if body, ok := middleware.ReadBody(w, r, limits); ok {
			fmt.Fprintf(w, "read %d bytes", len(body))
		}
	})
	orders := httptest.NewServer(read)
	defer orders.Close()
	refunds := httptest.NewServer(read)
	defer refunds.Close()

	post := func(name, url string) {
		resp, err := orders.Client().Post(url, "application/json", strings.NewReader(`{"amount":42}`))
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			panic(err)
		}
		if resp.StatusCode != http.StatusOK {
			var p struct{ Code string }
			if err := json.Unmarshal(body, &p); err != nil {
				panic(err)
			}
			body = fmt.Appendf(nil, "%s, Retry-After %s", p.Code, resp.Header.Get("Retry-After"))
		}
		fmt.Printf("%s: %d %s\n", name, resp.StatusCode, body)
	}
	post("orders", orders.URL)
	budget.Reserve(budget.Size()) // as if a megabyte of slow bodies were in flight
	post("orders", orders.URL)
	post("refunds", refunds.URL)
	budget.Release(budget.Size())
	post("refunds", refunds.URL)
	// Output:
	// orders: 200 read 13 bytes
	// orders: 503 server_busy, Retry-After 1
	// refunds: 503 server_busy, Retry-After 1
	// refunds: 200 read 13 bytes
}

// A receiver of your own takes, as courier's do, a POST of JSON sent as it
// is (PostJSON, in front of Verify), and answers its own refusals as
// courier's are answered (Refuse): a problem+json body with a stable code.
func ExamplePostJSON() {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// In a real receiver: Verify(…)(Transaction(…)(app)), and the
		// body it verified in r.Body.
		var event struct {
			Type string `json:"type"`
		}
		if err := json.NewDecoder(r.Body).Decode(&event); err != nil || event.Type != "order.paid" {
			middleware.Refuse(w, http.StatusUnprocessableEntity, courier.CodeRejected, "only order.paid is taken here")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h := middleware.PostJSON(app)

	for _, tc := range []struct{ method, contentType, coding, body string }{
		{http.MethodGet, "", "", ""},
		{http.MethodPost, "application/x-www-form-urlencoded", "", "type=order.paid"},
		{http.MethodPost, "application/json", "gzip", `{"type":"order.paid"}`},
		{http.MethodPost, "Application/JSON; charset=utf-8", "", `{"type":"order.refunded"}`},
		{http.MethodPost, "application/json", "", `{"type":"order.paid"}`},
	} {
		req := httptest.NewRequest(tc.method, "/hooks", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", tc.contentType)
		req.Header.Set("Content-Encoding", tc.coding)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var p struct {
			Code string `json:"code"`
		}
		if rec.Code >= 400 {
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				panic(err)
			}
		}
		fmt.Println(tc.method, tc.contentType, tc.coding, "->", rec.Code, rec.Header().Get("Content-Type"), p.Code)
	}
	// Output:
	// GET   -> 405 application/problem+json method_not_allowed
	// POST application/x-www-form-urlencoded  -> 415 application/problem+json unsupported_media_type
	// POST application/json gzip -> 415 application/problem+json unsupported_media_type
	// POST Application/JSON; charset=utf-8  -> 422 application/problem+json rejected
	// POST application/json  -> 204
}

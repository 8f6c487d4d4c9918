package readme_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/admin"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/middleware"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/postgres"
	"github.com/courier-go/courier/store/sqlite"
)

// The samples below are the README's. Each region runs from a
// "readme:name" comment to "readme:end"; the README shows its text
// unindented.

func sendingSample(ctx context.Context, id string, total int, payload []byte) error {
	// readme:sending
	s, err := sqlite.Open(ctx, "orders.db", store.Config{}) // creates the file, migrates courier's tables
	if err != nil {
		return err
	}
	defer s.Close()

	// In your own transaction, beside your business rows:
	tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", id, total); err != nil {
		return err
	}
	if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: "order-" + id + "-paid", // the receiver's dedupe key
		Endpoint:       "https://shipping.example/hooks/orders",
		Payload:        payload, // sent byte for byte on every attempt
	}); err != nil {
		return err
	}
	return tx.Commit() // the notification exists exactly when the order does
	// readme:end
}

func workerSample(ctx context.Context, s *store.Store) error {
	// readme:worker
	key, err := signature.ParseStandardWebhooksKey("k1", os.Getenv("COURIER_SECRET")) // whsec_…
	if err != nil {
		return err
	}
	signer, err := signature.NewStandardWebhooksSigner(key)
	if err != nil {
		return err
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: signer, Logger: slog.Default()}) // without one, its Warn and Error lines alone
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done() // SIGTERM: claim nothing more, let attempts in flight finish
		stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		w.Stop(stop) // what is still running after 10 s is cut short and due again at once
	}()
	return w.Run(context.WithoutCancel(ctx)) // nil once stopped
	// readme:end
}

// readme:payload
type OrderPaid struct {
	NotificationID string `json:"notification_id" validate:"required"`
	OrderID        string `json:"order_id" validate:"required"`
	Total          int    `json:"total" validate:"gt=0"`
}

// DedupeKey is the notification's identity: a redelivery with the same key
// gets the stored answer and never runs the function again.
func (o OrderPaid) DedupeKey() string { return o.NotificationID }

// readme:end

func reportingSample(ctx context.Context, s *store.Store, tx *sqlx.Tx, mediaBuy string, result json.RawMessage) error {
	// readme:reporting
	report := ack.Reporting{
		IdempotencyKey: ack.NewIdempotencyKey(), // the buyer's dedupe key: fresh per report, the same on its retries
		OperationID:    "op-" + mediaBuy,
		TaskID:         "task-" + mediaBuy,
		TaskType:       "media_buy_delivery",
		Status:         "working",
		Timestamp:      time.Now().UTC().Format(time.RFC3339),
		Result:         result, // the delivery report: its members are listed under ack.Reporting's Result
	}
	if err := ack.Validate(report); err != nil { // the outbox does not check an envelope; the buyer does
		return err
	}
	payload, err := json.Marshal(report)
	if err != nil {
		return err
	}
	_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: report.IdempotencyKey,
		Endpoint:       "https://buyer.example/webhooks/adcp",
		Payload:        payload,
		Profile:        ack.ProfileReporting, // any 2xx; AdCP receivers answer no Ack
	})
	return err
	// readme:end
}

func reportingPublishSample(ctx context.Context, s *store.Store, endpoint, mediaBuy string, seq int, generated string, result json.RawMessage) error {
	// readme:reporting-publish
	// Once per buyer endpoint: AdCP receivers answer no Ack, which the
	// default profile (courier) would fail as ack_invalid.
	if _, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{
		Tenant:     "acme",
		Endpoint:   endpoint, // the buyer's push_notification_config URL
		EventTypes: []string{"media_buy.delivery"},
		KeyID:      "k1",
		Profile:    ack.ProfileReporting,
	}); err != nil {
		return err
	}

	// In your transaction: each subscription's envelope under its own key.
	tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Publish(ctx, tx, store.PublishParams{
		Tenant:    "acme",
		EventType: "media_buy.delivery",
		EventID:   fmt.Sprintf("report-%s-%d", mediaBuy, seq),
		Build: func(_ store.Subscription, idempotencyKey string) ([]byte, error) {
			report := ack.Reporting{
				IdempotencyKey: idempotencyKey, // the delivery's own, the same on every publish of the event
				OperationID:    "op-" + mediaBuy,
				TaskID:         "task-" + mediaBuy,
				TaskType:       "media_buy_delivery",
				Status:         "working",
				Timestamp:      generated, // the report's, not time.Now(): a publish again builds the same bytes
				Result:         result,
			}
			if err := ack.Validate(report); err != nil {
				return nil, err
			}
			return json.Marshal(report)
		},
	}); err != nil {
		return err
	}
	return tx.Commit()
	// readme:end
}

func proxySample(s *store.Store, apply handler.Func[ack.Reporting]) (http.Handler, error) {
	// readme:proxy
	// The sender's published JWK Set, fetched at the first request and
	// again when it is 10 minutes old (sooner if its Cache-Control says so)
	// or a request names a key it lacks.
	keys, err := signature.NewJWKSet(signature.JWKSetConfig{URL: "https://seller.example/.well-known/jwks.json"})
	if err != nil {
		return nil, err
	}
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender:    "seller.example",
		LookupKey: keys.LookupKey,
		Replay:    s.Replay, // one replay cache for every process behind the balancer
		// What senders sign for: the proxy's public origin, not this process's
		// address. X-Forwarded-Host, -Proto and Forwarded are never read.
		Origin: "https://buyer.example.com",
	})
	if err != nil {
		return nil, err
	}
	reports, err := handler.NewReporting(handler.ReportingConfig{Store: s, Verifier: verifier}, apply)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks/adcp", reports) // the path the sender signs, as the proxy forwards it
	return mux, nil
	// readme:end
}

func receivingSample(ctx context.Context) error {
	// readme:receiving
	s, err := sqlite.Open(ctx, "shipping.db", store.Config{})
	if err != nil {
		return err
	}
	defer s.Close()
	key, err := signature.ParseStandardWebhooksKey("k1", os.Getenv("COURIER_SECRET"))
	if err != nil {
		return err
	}
	verifier, err := signature.NewStandardWebhooksVerifier(signature.StandardWebhooksVerifierConfig{
		Sender: "orders", // the dedupe namespace: who this key proves the request came from
		Keys:   []signature.StandardWebhooksKey{key},
	})
	if err != nil {
		return err
	}
	paid, err := handler.NewReceiver(handler.ReceiverConfig{Store: s, Verifier: verifier, Logger: slog.Default()},
		func(ctx context.Context, tx *sqlx.Tx, o OrderPaid) error {
			// Runs once per notification, in the transaction that records it: write through tx
			// (tx.Tx is its *sql.Tx, for code of yours that takes one).
			_, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id) VALUES (?)", o.OrderID)
			return err // an error answers 500 and the sender retries; handler.Reject refuses for good
		})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/orders", paid) // every method: the receiver answers 405 itself
	srv := &http.Server{
		Addr:              ":8080",
		Handler:           middleware.Recover(slog.Default())(mux), // a panic answers 500, not a dropped connection
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	return srv.ListenAndServe()
	// readme:end
}

func guardSample(s *store.Store, signer signature.Signer) (*client.Worker, error) {
	// readme:guard
	dev := client.Guard{ // a receiver on http://127.0.0.1:8080, in development only
		AllowHTTP:     true,
		AllowPorts:    []uint16{8080},
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}
	return client.NewWorker(client.Config{Store: s, Signer: signer, Transport: dev.Transport()})
	// readme:end
}

func privateSample(s *store.Store, signer signature.Signer, caPEM []byte) (*client.Worker, error) {
	// readme:private
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) { // the private CA that signed the receivers' certificates
		return nil, errors.New("no CA certificate in caPEM")
	}
	cert, err := tls.LoadX509KeyPair("sender.crt", "sender.key") // for receivers that ask for one (mutual TLS)
	if err != nil {
		return nil, err
	}
	internal := client.Guard{ // https on 443 to 10.20.0.0/16, and to public addresses, as ever
		AllowPrefixes:   []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")},
		TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},
	}
	return client.NewWorker(client.Config{Store: s, Signer: signer, Transport: internal.Transport()})
	// readme:end
}

func postgresSample(ctx context.Context) (*store.Store, error) {
	// readme:postgres
	db, err := sqlx.Open(postgres.DriverName, os.Getenv("DATABASE_URL")) // postgres://…
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(32) // at least the worker's Concurrency + 2, +1 per Run, as many idle
	db.SetMaxIdleConns(32)
	if err := store.Migrate(ctx, db); err != nil { // or your own tool: see Migrations below
		return nil, err
	}
	return store.Open(ctx, db, store.Config{}) // checks the schema; never migrates
	// readme:end
}

func placeholdersSample(ctx context.Context, tx *sqlx.Tx, id string, total int) error {
	// readme:placeholders
	_, err := tx.ExecContext(ctx, tx.Rebind("INSERT INTO orders (id, total) VALUES (?, ?)"), id, total)
	// readme:end
	return err
}

func adminSample(s *store.Store, mux *http.ServeMux, requireLogin func(http.Handler) http.Handler) error {
	// readme:admin
	ops, err := admin.NewHandler(admin.Config{
		Store: s,
		Authorize: func(r *http.Request) error { // who may redrive, cancel, enable, pin
			if r.Header.Get("X-Role") != "operator" {
				return courier.CodeForbidden // 403 forbidden; any other error, 403 unauthorized
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	mux.Handle("/ops/courier/", requireLogin(http.StripPrefix("/ops/courier", ops)))
	// readme:end
	return nil
}

func serviceSample(s *store.Store, w *client.Worker, mux *http.ServeMux) error {
	// readme:service
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(context.WithoutCancel(ctx)) }() // stopped by Stop below, not by the signal
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		if err := s.DB().PingContext(r.Context()); err != nil { // not Health: see below
			http.Error(rw, "database unavailable", http.StatusServiceUnavailable)
			return
		}
		rw.WriteHeader(http.StatusNoContent)
	})
	srv := &http.Server{Addr: ":8080", Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.ListenAndServe()

	select {
	case <-ctx.Done(): // SIGTERM
	case err := <-ran: // Run returns on its own only on a closed Store or a bad Config
		return err
	}
	// Inside the orchestrator's grace period (Kubernetes gives 30 s):
	drain, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv.Shutdown(drain) // receivers answer the requests they are serving
	w.Stop(drain)       // no more claims; attempts in flight finish, or are cut short when drain ends
	return <-ran        // every attempt settled, nothing left leased: now close the Store
	// readme:end
}

func retentionSample(ctx context.Context, s *store.Store) error {
	// readme:retention
	p := store.PruneParams{OlderThan: 7 * 24 * time.Hour} // past the senders' 72 h of retries
	_, errOutbox := s.Outbox.Prune(ctx, p)                // finished deliveries, dead endpoints' records
	_, errAttempts := s.Outbox.PruneAttempts(ctx, p)      // the attempts log
	_, errInbox := s.Inbox.Prune(ctx, p)                  // every receiver's records in this database
	_, errReplay := s.Replay.Prune(ctx, p)                // RFC 9421 nonces past their expiry
	return errors.Join(errOutbox, errAttempts, errInbox, errReplay)
	// readme:end
}

// TestRetentionSampleDeletesWhatAgedPastItsWindow: the README's pass
// deletes a finished delivery eight days old and keeps one a day old.
func TestRetentionSampleDeletesWhatAgedPastItsWindow(t *testing.T) {
	now := time.Now()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "app.db"), store.Config{
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	finished := func(id string) int64 { // a delivery suppressed now
		tx, err := s.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		e, err := s.Outbox.Enqueue(t.Context(), tx, store.EnqueueParams{NotificationID: id, Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := s.Outbox.Cancel(t.Context(), e.ID); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	old := finished("old")
	now = now.Add(7 * 24 * time.Hour)
	recent := finished("recent")
	now = now.Add(24 * time.Hour)
	if err := retentionSample(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Outbox.Get(t.Context(), old); !errors.Is(err, courier.CodeNotFound) {
		t.Errorf("the delivery 8 days old: Get = %v, want not_found: the pass deletes it", err)
	}
	if _, err := s.Outbox.Get(t.Context(), recent); err != nil {
		t.Errorf("the delivery a day old: Get = %v, want it kept", err)
	}
}

func pgxSample(ctx context.Context, pool *pgxpool.Pool, s *store.Store, id string, payload []byte) error {
	// readme:pgx
	tx, err := pool.Begin(ctx) // your pgxpool; s is a Store opened on the same database
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // after Commit, a no-op
	if _, err := tx.Exec(ctx, "UPDATE orders SET status = 'paid' WHERE id = $1", id); err != nil {
		return err
	}
	if _, err := postgres.Enqueue(ctx, s, tx, store.EnqueueParams{ // also EnqueueMany, Publish
		NotificationID: "order-" + id + "-paid",
		Endpoint:       "https://shipping.example/hooks/orders",
		Payload:        payload,
	}); err != nil {
		return err
	}
	return tx.Commit(ctx) // listening workers are woken now
	// readme:end
}

func controlSample(ctx context.Context, s *store.Store, tx *sqlx.Tx, id string, payload []byte) error {
	// readme:control
	// Every worker of every process together: at most 5 requests in flight
	// to this endpoint, and 50 per second.
	if err := s.Endpoints.SetLimits(ctx, "https://shipping.example/hooks/orders",
		store.Limits{MaxInFlight: 5, Rate: 50, Burst: 50}); err != nil {
		return err
	}
	// The deliveries of one order reach the endpoint one at a time, in
	// enqueue order; a retry holds this order's key, not the endpoint.
	_, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: "order-" + id + "-shipped",
		Endpoint:       "https://shipping.example/hooks/orders",
		Payload:        payload,
		OrderingKey:    "order-" + id,
	})
	return err
	// readme:end
}

func publishSample(ctx context.Context, s *store.Store, endpoint, id string, total int) error {
	// readme:publish
	// Once, when a tenant subscribes: which events it receives, and where.
	if _, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{
		Tenant:     "acme",
		Endpoint:   endpoint, // the subscriber's URL
		EventTypes: []string{"order.paid"},
		KeyID:      "k1", // required: the name SignerFor signs under, for life (rotate the key behind it); a worker's one Signer signs whatever it is
	}); err != nil {
		return err
	}

	// In your transaction: one delivery per matching subscription.
	tx, err := s.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := s.Outbox.Publish(ctx, tx, store.PublishParams{
		Tenant:    "acme",
		EventType: "order.paid",
		EventID:   "order-" + id + "-paid",
		// Each delivery's notification id is EventID:subscription id, and a
		// receiver refuses a payload that names another: OrderPaid names its
		// own, so each subscription gets its own bytes.
		Build: func(sub store.Subscription, _ string) ([]byte, error) {
			return json.Marshal(OrderPaid{
				NotificationID: fmt.Sprintf("order-%s-paid:%d", id, sub.ID),
				OrderID:        id,
				Total:          total,
			})
		},
	}); err != nil {
		return err
	}
	return tx.Commit()
	// readme:end
}

// TestPublishSampleReachesTheReceiver: the README's publish, to a receiver
// of the README's OrderPaid, is processed once under the notification id
// Publish gave it.
func TestPublishSampleReachesTheReceiver(t *testing.T) {
	ctx := t.Context()
	orders, shipping, effects := senderAndReceiver(t)
	keys := couriertest.StandardWebhooksKeys("orders")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: shipping, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o OrderPaid) error {
			return effects.Record(ctx, tx, o.NotificationID)
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()

	if err := publishSample(ctx, orders, srv.URL+"/hooks/orders", "1", 4200); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: orders, Signer: keys.Signer, Transport: srv.Guard().Transport()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	got, err := effects.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["order-1-paid:1"] != 1 {
		t.Fatalf("the receiver applied %v, want order-1-paid:1 once", got)
	}
}

// enqueueTerminal enqueues a terminal notification of plan's publication
// in tx, for endpoint.
func enqueueTerminal(ctx context.Context, s *store.Store, tx *sqlx.Tx, endpoint, plan string, seq int64) error {
	// readme:terminal
	lifecycle := ack.Digest([]byte(plan + "/lifecycle"))
	n, err := ack.NewTerminal(ack.Terminal{ // fills in schema and notification_id, then validates
		EventID: plan + "-" + strconv.FormatInt(seq, 10), SiteID: "site-1", PlanID: plan, WebsiteVersion: "v1",
		SourceSequence: json.Number(strconv.FormatInt(seq, 10)), JobCount: "1",
		ChangeSHA256: ack.Digest([]byte(plan)), LifecycleBindingSHA256: ack.Digest([]byte("binding")),
		TerminalStatus: "published", LifecycleSHA256: &lifecycle,
	})
	if err != nil {
		return err
	}
	payload, err := n.Payload() // its canonical JSON
	if err != nil {
		return err
	}
	_, err = s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: n.NotificationID, // its own: derived from its content
		Endpoint:       endpoint,
		Payload:        payload,
		Profile:        ack.ProfileTerminal, // the receiver answers a terminal Ack, not courier's
	})
	return err
	// readme:end
}

// testStore opens a SQLite store named name for t, closed when t ends.
func testStore(t *testing.T, name string) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), name), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestTerminalSampleIsAcknowledged: a terminal notification enqueued as
// the README's sample does is applied once by a receiver of ack.Terminal
// and succeeds; the same enqueued under the default profile is applied
// too, but its Ack is the terminal one, and the delivery fails
// ack_invalid, as the README warns.
func TestTerminalSampleIsAcknowledged(t *testing.T) {
	ctx := t.Context()
	sender := testStore(t, "cms.db")
	host := testStore(t, "host.db")
	effects, err := couriertest.NewEffects(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	keys := couriertest.StandardWebhooksKeys("cms")
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: host, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Terminal) error {
			return effects.Record(ctx, tx, n.EventID)
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, couriertest.Sequence()) // no faults
	defer srv.Close()

	tx, err := sender.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := enqueueTerminal(ctx, sender, tx, srv.URL+"/hooks/terminal", "plan-1", 1); err != nil {
		t.Fatal(err)
	}
	// The same kind of notification under the default profile: the mistake the README warns of.
	n, err := ack.NewTerminal(ack.Terminal{EventID: "plan-2-1", SiteID: "site-1", PlanID: "plan-2", WebsiteVersion: "v1",
		SourceSequence: "1", JobCount: "1", ChangeSHA256: ack.Digest([]byte("plan-2")), LifecycleBindingSHA256: ack.Digest([]byte("binding")),
		TerminalStatus: "cancelled"})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := n.Payload()
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := sender.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: n.NotificationID, Endpoint: srv.URL + "/hooks/terminal", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWorker(client.Config{Store: sender, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	for _, event := range []string{"plan-1-1", "plan-2-1"} {
		if got, err := effects.Count(ctx, event); err != nil || got != 1 {
			t.Fatalf("%s applied %d times (%v), want once", event, got, err)
		}
	}
	page, err := sender.Outbox.List(ctx, store.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range page.Deliveries {
		want, code := courier.StatusSucceeded, courier.Code("")
		if d.ID == wrong.ID {
			want, code = courier.StatusFailed, courier.CodeAckInvalid
		}
		if d.Status != want || d.LastErrorCode != code {
			t.Errorf("delivery %s is %s (%s), want %s (%s)", d.NotificationID, d.Status, d.LastErrorCode, want, code)
		}
	}
	if len(page.Deliveries) != 2 {
		t.Fatalf("%d deliveries listed, want 2", len(page.Deliveries))
	}
}

// readme:test
func TestOrderReachesShipping(t *testing.T) {
	ctx := t.Context()
	orders, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "orders.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer orders.Close()
	shipping, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "shipping.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer shipping.Close()
	effects, err := couriertest.NewEffects(ctx, shipping) // what the receiver did, in its own database
	if err != nil {
		t.Fatal(err)
	}

	keys := couriertest.StandardWebhooksKeys("orders") // a matched signer and verifier
	rcv, err := handler.NewReceiver(handler.ReceiverConfig{Store: shipping, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, o OrderPaid) error {
			return effects.Record(ctx, tx, o.NotificationID)
		})
	if err != nil {
		t.Fatal(err)
	}
	// The first attempt of every notification gets a 503, the second reaches the receiver.
	srv := couriertest.NewServer(rcv, couriertest.Sequence(couriertest.Fault{Status: http.StatusServiceUnavailable}))
	defer srv.Close()

	tx, err := orders.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := orders.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
		NotificationID: "order-1-paid", Endpoint: srv.URL + "/hooks/orders",
		Payload: []byte(`{"notification_id":"order-1-paid","order_id":"1","total":4200}`),
	}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	w, err := client.NewWorker(client.Config{
		Store: orders, Signer: keys.Signer,
		Transport: srv.Guard().Transport(),                             // opens this test server's address to the worker
		Backoff:   func(int, time.Duration) time.Duration { return 0 }, // retry at once
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil { // until nothing is due
		t.Fatal(err)
	}
	if n, err := effects.Count(ctx, "order-1-paid"); err != nil || n != 1 {
		t.Fatalf("order-1-paid applied %d times (%v), want once", n, err)
	}
}

// readme:end

// The samples are compiled, not called (but for the test above).
var _ = []any{sendingSample, workerSample, receivingSample, proxySample, guardSample, privateSample, postgresSample, placeholdersSample, adminSample, serviceSample, pgxSample, controlSample, publishSample}

// TestReportingSampleRefusesAnInvalidReport: the reporting sample enqueues
// a valid delivery report and refuses, before the outbox, one its buyer
// would refuse at every attempt.
func TestReportingSampleRefusesAnInvalidReport(t *testing.T) {
	ctx := t.Context()
	s := testStore(t, "seller.db")
	const valid = `{"notification_type":"scheduled","sequence_number":1,"currency":"USD",` +
		`"reporting_period":{"start":"2026-01-02T14:00:00Z","end":"2026-01-02T15:00:00Z"},` +
		`"media_buy_deliveries":[{"media_buy_id":"mb-1","status":"active","totals":{"spend":1,"impressions":10},"by_package":[{"package_id":"p1","spend":1}]}]}`
	for _, tc := range []struct {
		name, result string
		enqueued     int
	}{
		{"valid", valid, 1},
		{"without by_package", strings.Replace(valid, `,"by_package":[{"package_id":"p1","spend":1}]`, "", 1), 0},
	} {
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = reportingSample(ctx, s, tx, "mb-1", json.RawMessage(tc.result))
		if (err == nil) != (tc.enqueued == 1) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Outbox.List(ctx, store.ListParams{})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("%d deliveries (%v), want the valid report's alone", len(page.Deliveries), err)
	}
}

// TestReportingPublishSampleGivesEachSubscriptionItsReport: the README's
// fan-out of a delivery report, to two endpoints of one buyer (one Inbox,
// one verified sender), runs the buyer's function once per subscription:
// each envelope carries its delivery's own idempotency_key. The second
// call, for the second endpoint, publishes the same event again: the
// first subscription's delivery is found, not sent twice. One Payload for
// both is sent each under its delivery's own key too, so the buyer runs
// its function for each.
func TestReportingPublishSampleGivesEachSubscriptionItsReport(t *testing.T) {
	ctx := t.Context()
	seller, buyer, effects := senderAndReceiver(t)
	keys := couriertest.StandardWebhooksKeys("seller")
	rcv, err := handler.NewReporting(handler.ReportingConfig{Store: buyer, Verifier: keys.Verifier},
		func(ctx context.Context, tx *sqlx.Tx, r ack.Reporting) error {
			return effects.Record(ctx, tx, r.IdempotencyKey)
		})
	if err != nil {
		t.Fatal(err)
	}
	srv := couriertest.NewServer(rcv, nil)
	defer srv.Close()

	const result = `{"notification_type":"scheduled","sequence_number":1,"currency":"USD",` +
		`"reporting_period":{"start":"2026-01-02T14:00:00Z","end":"2026-01-02T15:00:00Z"},` +
		`"media_buy_deliveries":[{"media_buy_id":"mb-1","status":"active","totals":{"spend":1},"by_package":[{"package_id":"p1","spend":1}]}]}`
	for _, path := range []string{"/adcp/reports", "/adcp/finance"} {
		if err := reportingPublishSample(ctx, seller, srv.URL+path, "mb-1", 1, "2026-01-02T15:05:00Z", json.RawMessage(result)); err != nil {
			t.Fatal(err)
		}
	}
	// Retried at once, so that Drain's one pass sees every delivery end:
	// were two to share a key, as one Payload's did before each got its
	// own, the second would be answered 503 in_progress while the first
	// ran.
	w, err := client.NewWorker(client.Config{Store: seller, Signer: keys.Signer, Transport: srv.Guard().Transport(),
		Backoff: func(int, time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	page, err := seller.Outbox.List(ctx, store.ListParams{Status: courier.StatusSucceeded})
	if err != nil || len(page.Deliveries) != 2 {
		t.Fatalf("%d deliveries succeeded (%v), want the two subscriptions'", len(page.Deliveries), err)
	}
	got, err := effects.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("the buyer applied %v, want two reports, one per subscription", got)
	}
	for key, n := range got {
		if n != 1 {
			t.Errorf("report %s applied %d times, want once", key, n)
		}
	}

	// One Payload, with a key of its own: the publish sets each
	// subscription's, and the buyer runs its function for both.
	report, err := json.Marshal(ack.Reporting{IdempotencyKey: ack.NewIdempotencyKey(), OperationID: "op-mb-1", TaskID: "task-mb-1",
		TaskType: "media_buy_delivery", Status: "working", Timestamp: "2026-01-02T16:05:00Z", Result: json.RawMessage(result)})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := seller.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := seller.Outbox.Publish(ctx, tx, store.PublishParams{Tenant: "acme", EventType: "media_buy.delivery", EventID: "report-mb-1-2", Payload: report}); err != nil || len(ps) != 2 {
		t.Fatalf("Publish = %d deliveries, %v; want 2", len(ps), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := couriertest.Drain(ctx, w); err != nil {
		t.Fatal(err)
	}
	if page, err := seller.Outbox.List(ctx, store.ListParams{Status: courier.StatusSucceeded}); err != nil || len(page.Deliveries) != 4 {
		t.Fatalf("%d deliveries succeeded (%v), want 4", len(page.Deliveries), err)
	}
	got, err = effects.Counts(ctx)
	if err != nil || len(got) != 4 {
		t.Fatalf("the buyer applied %v (%v), want the one Payload's report once per subscription beside the two built ones", got, err)
	}
	for key, n := range got {
		if n != 1 {
			t.Errorf("report %s applied %d times, want once", key, n)
		}
	}
}

// senderAndReceiver opens a sender's and a receiver's SQLite stores, and
// the Effects of the receiver's function in its own database, closed as t
// ends.
func senderAndReceiver(t *testing.T) (sender, receiver *store.Store, effects *couriertest.Effects) {
	t.Helper()
	var err error
	for _, s := range []struct {
		name string
		to   **store.Store
	}{{"sender.db", &sender}, {"receiver.db", &receiver}} {
		if *s.to, err = sqlite.Open(t.Context(), filepath.Join(t.TempDir(), s.name), store.Config{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*s.to).Close() })
	}
	if effects, err = couriertest.NewEffects(t.Context(), receiver); err != nil {
		t.Fatal(err)
	}
	return sender, receiver, effects
}

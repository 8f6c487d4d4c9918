package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/internal/canonical"
	"github.com/courier-go/courier/signature"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// TestReportingEndToEnd: courier's sender fans reporting events out to
// AdCP subscriptions, signs each attempt with RFC 9421, and delivers them
// to courier's reporting receiver through faults (every first attempt 503,
// every second attempt's connection dropped after the receiver
// committed). Every event is processed exactly once per subscription.
func TestReportingEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	sender, err := sqlite.Open(ctx, filepath.Join(dir, "sender.db"), store.Config{
		Breaker: store.BreakerConfig{Threshold: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sender.Close() })
	receiver, err := sqlite.Open(ctx, filepath.Join(dir, "receiver.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { receiver.Close() })
	if _, err := receiver.DB().Exec("CREATE TABLE effects (idempotency_key TEXT NOT NULL)"); err != nil {
		t.Fatal(err)
	}

	key, err := signature.GenerateJWK("agent-key-1", signature.AlgEd25519)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := signature.NewRFC9421Signer(signature.RFC9421SignerConfig{Key: key})
	// The receiver's server, started once its handler is built: the
	// verifier needs its origin first.
	var rcv http.Handler
	var mu sync.Mutex
	attempts := map[string]int{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var env struct {
			Key string `json:"idempotency_key"`
		}
		json.Unmarshal(body, &env)
		mu.Lock()
		attempts[env.Key]++
		n := attempts[env.Key]
		mu.Unlock()
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2: // the receiver commits, the answer is lost
			rec := httptest.NewRecorder()
			rcv.ServeHTTP(rec, r)
			dropHandler(w, r)
		default:
			rcv.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	verifier, err := signature.NewRFC9421Verifier(signature.RFC9421VerifierConfig{
		Sender: "sales-agent", Keys: []signature.JWK{key.Public()}, Replay: receiver.Replay,
		Origin: "http://" + srv.Listener.Addr().String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rcv, err = handler.NewReporting(handler.ReportingConfig{Store: receiver, Verifier: verifier},
		func(ctx context.Context, tx *sqlx.Tx, n ack.Reporting) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO effects (idempotency_key) VALUES (?)", n.IdempotencyKey)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()

	for i := range 2 {
		if _, err := sender.Subscriptions.Create(ctx, sender.DB(), store.SubscriptionParams{
			Tenant: "buyer-1", Endpoint: fmt.Sprintf("%s/adcp/%d", srv.URL, i), EventTypes: []string{"delivery_report"},
			KeyID: key.KeyID(), Profile: ack.ProfileReporting,
		}); err != nil {
			t.Fatal(err)
		}
	}
	const events = 25
	tx, _ := sender.DB().BeginTxx(ctx, nil)
	for i := range events {
		if _, err := sender.Outbox.Publish(ctx, tx, store.PublishParams{
			Tenant: "buyer-1", EventType: "delivery_report", EventID: fmt.Sprintf("report-%d", i),
			Build: func(s store.Subscription, idempotencyKey string) ([]byte, error) {
				return canonical.Marshal(map[string]any{
					"idempotency_key": idempotencyKey, "operation_id": fmt.Sprintf("op-%d", i), "task_id": fmt.Sprintf("task-%d", i),
					"task_type": "media_buy_delivery", "status": "completed", "timestamp": "2026-12-02T10:00:00Z",
					"result": map[string]any{"notification_type": "scheduled", "sequence_number": i + 1,
						"reporting_period": map[string]any{"start": "2026-12-01T00:00:00Z", "end": "2026-12-01T23:59:59Z"},
						"currency":         "EUR", "media_buy_deliveries": []any{}},
				})
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	g := loopbackGuard(t, srv.URL)
	w, err := client.NewWorker(client.Config{Store: sender, Transport: g.Transport(), Concurrency: 8, BatchSize: 16,
		Backoff: client.ExponentialBackoff(time.Millisecond, time.Millisecond, 0),
		SignerFor: func(_ context.Context, keyID string) (signature.Signer, error) {
			if keyID != key.KeyID() {
				return nil, fmt.Errorf("unknown key")
			}
			return signer, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; ; round++ {
		h, _ := sender.Outbox.Health(ctx)
		if h.Counts[courier.StatusSucceeded] == 2*events {
			break
		}
		if round > 50 || h.Counts[courier.StatusFailed] > 0 {
			t.Fatalf("deliveries stuck: %+v", h.Counts)
		}
		if _, err := w.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var effects []struct {
		Key string `db:"idempotency_key"`
		N   int    `db:"n"`
	}
	if err := receiver.DB().Select(&effects, "SELECT idempotency_key, COUNT(*) AS n FROM effects GROUP BY idempotency_key"); err != nil {
		t.Fatal(err)
	}
	if len(effects) != 2*events {
		t.Fatalf("%d deliveries processed, want %d", len(effects), 2*events)
	}
	for _, e := range effects {
		if e.N != 1 {
			t.Fatalf("%s processed %d times", e.Key, e.N)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range attempts {
		if n < 3 {
			t.Fatalf("%s reached the receiver %d times: the faults were not all exercised", k, n)
		}
	}
}

package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/handler"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// paid is the notification of TestSeededFaultsEverySchemeOnce.
type paid struct {
	ID string `json:"notification_id" validate:"required"`
}

func (p paid) DedupeKey() string { return p.ID }

// TestSeededFaultsEverySchemeOnce: on both engines and under every
// signature scheme, a receiver behind seeded faults (first attempts 503,
// 429s, connections dropped after commit, answers held past the sender's
// timeout) applies each notification exactly once, and Drain returns with
// every delivery succeeded and none due.
func TestSeededFaultsEverySchemeOnce(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		for scheme, keysFor := range map[string]func(origin string) couriertest.Keys{
			"standard webhooks": func(string) couriertest.Keys { return couriertest.StandardWebhooksKeys("orders") },
			"rfc 9421":          func(origin string) couriertest.Keys { return couriertest.RFC9421Keys("orders", origin) },
			"adcp hmac":         func(string) couriertest.Keys { return couriertest.AdCPHMACKeys("orders") },
			"bearer":            func(string) couriertest.Keys { return couriertest.BearerKeys("orders") },
		} {
			t.Run(engine+"/"+scheme, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				// The faults open no breaker (a failing first attempt for every
				// notification), and end no delivery that a slow machine made
				// retry more often than a fast one.
				cfg := store.Config{Breaker: store.BreakerConfig{Threshold: 1000}, MaxAttempts: 25}
				var outbox, inbox *store.Store
				if engine == "postgres" {
					outbox, inbox = couriertest.PostgresStore(t, cfg), couriertest.PostgresStore(t, cfg)
				} else {
					outbox, inbox = openSQLite(t, "orders.db", cfg), openSQLite(t, "shipping.db", cfg)
				}
				effects, err := couriertest.NewEffects(ctx, inbox)
				if err != nil {
					t.Fatal(err)
				}
				// RFC 9421's verifier names the receiver's origin: the
				// listener's address is known before the server starts.
				var rcv http.Handler
				srv := couriertest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rcv.ServeHTTP(w, r) }),
					couriertest.SeededScript(3, couriertest.ScriptSpec{FirstAttempt503: true, RateLimited: 0.2, DropAfterCommit: 0.2, Delay: 0.2, DelayBy: time.Minute}))
				keys := keysFor("http://" + srv.Listener.Addr().String())
				if rcv, err = handler.NewReceiver(handler.ReceiverConfig{Store: inbox, Verifier: keys.Verifier},
					func(ctx context.Context, tx *sqlx.Tx, p paid) error { return effects.Record(ctx, tx, p.ID) }); err != nil {
					t.Fatal(err)
				}
				srv.Start()
				defer srv.Close()

				const n = 30
				tx, err := outbox.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					id := fmt.Sprintf("n-%d", i)
					if _, err := outbox.Outbox.Enqueue(ctx, tx, store.EnqueueParams{NotificationID: id, Endpoint: srv.URL + "/hooks",
						Payload: fmt.Appendf(nil, `{"notification_id":%q}`, id)}); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				// The delayed answers come a minute late: a Timeout well below
				// that cuts them short, and one of seconds leaves a loaded
				// machine's receiver time for the answers that are not delayed.
				w, err := client.NewWorker(client.Config{Store: outbox, Signer: keys.Signer, Transport: srv.Guard().Transport(),
					Timeout: 2 * time.Second, Backoff: func(int, time.Duration) time.Duration { return 0 }})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := couriertest.Drain(ctx, w); err != nil {
					t.Fatal(err)
				}

				h, err := outbox.Outbox.Health(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if h.Counts[courier.StatusSucceeded] != n || h.Due != 0 {
					t.Fatalf("after Drain: %v, %d due; want all %d succeeded%s", h.Counts, h.Due, n, failures(t, outbox))
				}
				counts, err := effects.Counts(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if id := fmt.Sprintf("n-%d", i); counts[id] != 1 {
						t.Errorf("%s applied %d times, want once", id, counts[id])
					}
				}
				if st := srv.Stats(); st.Faulted < n || st.Dropped == 0 || st.Delayed == 0 {
					t.Fatalf("the faults did not all happen: %+v", st)
				}
			})
		}
	}
}

// failures says how each failed delivery ended: its attempts and codes.
func failures(t *testing.T, s *store.Store) string {
	t.Helper()
	page, err := s.Outbox.List(t.Context(), store.ListParams{Status: courier.StatusFailed})
	if err != nil {
		return fmt.Sprintf(" (the failed deliveries could not be listed: %v)", err)
	}
	var b strings.Builder
	for _, d := range page.Deliveries {
		fmt.Fprintf(&b, "\n\t%s: %d attempts, %s (remote %q, HTTP %d)", d.NotificationID, d.Attempts, d.LastErrorCode, d.LastRemoteCode, d.LastHTTPStatus)
	}
	return b.String()
}

// openSQLite opens a store on a new SQLite file, closed when t ends.
func openSQLite(t *testing.T, name string, cfg store.Config) *store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), name), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

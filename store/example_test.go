package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/ack"
	"github.com/courier-go/courier/client"
	"github.com/courier-go/courier/couriertest"
	"github.com/courier-go/courier/store"
	"github.com/courier-go/courier/store/sqlite"
)

// The notification exists exactly when the business row does: enqueue it
// in the transaction that writes the row. Store.Begin gives a *sqlx.Tx on
// the connection courier writes through (on SQLite, so the application's
// writes queue with the worker's instead of contending for the lock).
func ExampleOutbox_Enqueue() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
		panic(err)
	}

	for _, commit := range []bool{true, false} {
		tx, err := s.Begin(ctx)
		if err != nil {
			panic(err)
		}
		id := fmt.Sprint("order-", commit)
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?)", id, 1250); err != nil {
			panic(err)
		}
		if _, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: id + "-paid",
			Endpoint:       "https://receiver.example/hooks",
			Payload:        []byte(`{"order":"` + id + `","event":"paid"}`),
		}); err != nil {
			panic(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback() // the order and its notification go together
		}
		if err != nil {
			panic(err)
		}
	}
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("deliveries pending:", h.Counts[courier.StatusPending])
	// Output: deliveries pending: 1
}

// Enqueue takes any transaction with database/sql's methods: the *sql.Tx
// of an application's own *sql.DB writes the order and its notification
// together as well as a *sqlx.Tx from Store.Begin does. On SQLite, open that
// *sql.DB on the Store's file with DriverName and DSN, so that its
// transactions queue for the write lock behind a running worker's instead
// of failing "database is locked". A transaction run again (its commit's
// answer lost, say) enqueues nothing more: the delivery Existed.
func ExampleOutbox_Enqueue_sqlTx() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "app.db")
	s, err := sqlite.Open(ctx, path, store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	db, err := sql.Open(sqlite.DriverName, sqlite.DSN(path, store.DurabilityFull)) // the application's own *sql.DB
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`); err != nil {
		panic(err)
	}

	for range 2 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", "order-1", 1250); err != nil {
			panic(err)
		}
		e, err := s.Outbox.Enqueue(ctx, tx, store.EnqueueParams{
			NotificationID: "order-1-paid",
			Endpoint:       "https://receiver.example/hooks",
			Payload:        []byte(`{"order":"order-1","event":"paid"}`),
		})
		if err != nil {
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
		fmt.Println("existed:", e.Existed)
	}
	// Output:
	// existed: false
	// existed: true
}

// Fan-out: one event, one delivery per matching subscription not paused,
// written in the caller's transaction.
func ExampleOutbox_Publish() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	for _, sub := range []store.SubscriptionParams{
		{Tenant: "acme", Endpoint: "https://a.example/hooks", EventTypes: []string{"order.paid"}, KeyID: "k1"},
		{Tenant: "acme", Endpoint: "https://b.example/hooks", EventTypes: []string{"*"}, KeyID: "k1"},
		{Tenant: "acme", Endpoint: "https://c.example/hooks", EventTypes: []string{"order.refunded"}, KeyID: "k1"},
		{Tenant: "acme", Endpoint: "https://d.example/hooks", EventTypes: []string{"*"}, KeyID: "k1", Paused: true},
	} {
		if _, err := s.Subscriptions.Create(ctx, s.DB(), sub); err != nil {
			panic(err)
		}
	}
	tx, err := s.Begin(ctx)
	if err != nil {
		panic(err)
	}
	published, err := s.Outbox.Publish(ctx, tx, store.PublishParams{
		Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":"order-1"}`),
	})
	if err != nil {
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	for _, p := range published {
		fmt.Println(p.NotificationID)
	}
	// Output:
	// evt-1:1
	// evt-1:2
}

// An endpoint's limits hold for every worker of every process sharing the
// database; the endpoint's health then shows them beside its load. A Rate
// without a Burst gets one second's worth.
func ExampleEndpoints_SetLimits() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	const endpoint = "https://shipping.example/hooks/orders"
	if err := s.Endpoints.SetLimits(ctx, endpoint, store.Limits{MaxInFlight: 5, Rate: 50}); err != nil {
		panic(err)
	}
	h, err := s.Endpoints.Get(ctx, endpoint)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v in flight %d\n", h.Limits, h.InFlight)
	blocked, err := s.Endpoints.BlockedKeys(ctx, endpoint, 10) // ordering keys a failed delivery holds
	if err != nil {
		panic(err)
	}
	fmt.Println("blocked keys:", len(blocked))
	// Output:
	// {MaxInFlight:5 Rate:50 Burst:50} in flight 0
	// blocked keys: 0
}

// A pin made in error, of a URL with a typo in it, is removed by Unpin:
// the endpoint is unpinned again, and the next command enqueued for it
// pins its own digest. A pin that holds deliveries back stays
// (contract_changed) until they are resolved.
func ExampleContracts_Unpin() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	const typo = "https://cms.example/hooks/comands"
	if err := s.Contracts.Pin(ctx, typo, strings.Repeat("a", 64)); err != nil {
		panic(err)
	}
	if err := s.Contracts.Unpin(ctx, typo); err != nil {
		panic(err)
	}
	_, err = s.Contracts.Get(ctx, typo)
	fmt.Println(courier.CodeOf(err))
	// Output:
	// not_found
}

// Deliveries that share an ordering key go one at a time, in enqueue
// order: the head is sent, the rest wait (Held is HeldByKey) until it
// succeeds, is cancelled or, under OrderingSkipFailed, fails for good. A head that
// fails for good under the default OrderingHoldKey holds its key until an
// operator redrives or cancels it (Endpoints.BlockedKeys lists such keys).
func ExampleEnqueueParams_orderingKey() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	var ps []store.EnqueueParams
	for _, event := range []string{"created", "paid"} {
		ps = append(ps, store.EnqueueParams{
			NotificationID: "order-7-" + event,
			Endpoint:       "https://receiver.example/hooks",
			Payload:        []byte(`{"order":"order-7","event":"` + event + `"}`),
			OrderingKey:    "order-7", // this order's events, in order
		})
	}
	es, err := s.Outbox.EnqueueMany(ctx, s.DB(), ps)
	if err != nil {
		panic(err)
	}
	show := func() {
		var line []string
		for _, e := range es {
			d, err := s.Outbox.Get(ctx, e.ID)
			if err != nil {
				panic(err)
			}
			line = append(line, fmt.Sprintf("%s %s held=%q", d.NotificationID, d.Status, d.Held))
		}
		fmt.Println(strings.Join(line, ", "))
	}
	show()
	if err := s.Outbox.Cancel(ctx, es[0].ID); err != nil { // the head withdrawn: the next one goes
		panic(err)
	}
	show()
	// Output:
	// order-7-created pending held="", order-7-paid pending held="key"
	// order-7-created suppressed held="", order-7-paid pending held=""
}

// Check is the deep health check for a cron or an operator: the engine's
// integrity check, the schema, and up to maxRows stored deliveries (0: a
// thousand) against their invariants and digests; each call goes on where
// the last stopped.
func ExampleOutbox_Check() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
		NotificationID: "order-8-paid", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{"order":"order-8"}`),
	}); err != nil {
		panic(err)
	}
	h, err := s.Outbox.Check(ctx, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Status, h.Checked, len(h.Invalid))
	// Output: ok 1 0
}

// An operator sends again what failed, once the cause is fixed (here: a
// receiver that refused the notification with a 400). Redrive takes failed
// deliveries, and those quarantined because their payload key was missing
// or wrong (payload_unreadable); Delivery.Redrivable says whether Redrive
// would take one, as the ops page and the CLI ask before they offer it.
func ExampleOutbox_Redrive() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not yet", http.StatusBadRequest)
	}))
	defer refusing.Close()
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
		NotificationID: "order-9-paid", Endpoint: refusing.URL + "/hooks", Payload: []byte(`{"order":"order-9"}`),
	}); err != nil {
		panic(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("shop").Signer, Transport: couriertest.Guard(refusing.URL).Transport()})
	if err != nil {
		panic(err)
	}
	if _, err := w.Work(ctx); err != nil { // the 400 fails the delivery for good
		panic(err)
	}

	failed, err := s.Outbox.List(ctx, store.ListParams{Status: courier.StatusFailed})
	if err != nil {
		panic(err)
	}
	for _, d := range failed.Deliveries {
		fmt.Println(d.NotificationID, d.Status, d.LastErrorCode, d.Redrivable())
		n, err := s.Outbox.Redrive(ctx, store.RedriveParams{ID: d.ID})
		if err != nil {
			panic(err)
		}
		d, err = s.Outbox.Get(ctx, d.ID)
		if err != nil {
			panic(err)
		}
		fmt.Println(n, d.Status, d.Redrivable())
	}
	// Output:
	// order-9-paid failed receiver_rejected true
	// 1 pending false
}

// A command is enqueued like a notification, in the caller's transaction,
// under its identity (operation ":" request_id): the same command again is
// a no-op. The first command for an endpoint pins the capabilities digest
// it was built for; a new command built for another contract is refused
// with contract_changed until an operator moves the pin (see Contracts).
func ExampleOutbox_EnqueueCommand() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	v1, v2 := ack.Digest([]byte("contract v1")), ack.Digest([]byte("contract v2"))
	for _, c := range []ack.Command{
		{Operation: ack.OperationChange, RequestID: "req-1", SourceMaxAttempts: 5, CapabilitiesSHA256: v1, Body: json.RawMessage(`{"title":"Spring sale"}`)},
		{Operation: ack.OperationChange, RequestID: "req-1", SourceMaxAttempts: 5, CapabilitiesSHA256: v1, Body: json.RawMessage(`{"title":"Spring sale"}`)},
		{Operation: ack.OperationTombstone, RequestID: "req-2", SourceMaxAttempts: 5, CapabilitiesSHA256: v2, Body: json.RawMessage(`null`)},
	} {
		cmd, err := ack.NewCommand(c)
		if err != nil {
			panic(err)
		}
		payload, err := cmd.Payload()
		if err != nil {
			panic(err)
		}
		tx, err := s.Begin(ctx)
		if err != nil {
			panic(err)
		}
		e, err := s.Outbox.EnqueueCommand(ctx, tx, store.CommandParams{Endpoint: "https://source.example/commands", Payload: payload})
		if err != nil {
			if err := tx.Rollback(); err != nil {
				panic(err)
			}
			fmt.Println(cmd.DedupeKey(), "refused:", courier.CodeOf(err))
			continue
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
		fmt.Println(cmd.DedupeKey(), "existed:", e.Existed)
	}
	// Output:
	// change:req-1 existed: false
	// change:req-1 existed: true
	// tombstone:req-2 refused: contract_changed
}

// A key rotation: k2 seals new rows, k1 still opens the rows it sealed.
// KeysInUse says when k1 may leave Keys: once it counts no row (Prune
// deletes the finished ones in time).
func ExampleStore_KeysInUse() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	k1, err := store.NewPayloadKey("k1", bytes.Repeat([]byte{1}, 32))
	if err != nil {
		panic(err)
	}
	k2, err := store.NewPayloadKey("k2", bytes.Repeat([]byte{2}, 32))
	if err != nil {
		panic(err)
	}

	var s *store.Store
	for i, enc := range []*store.Encryption{
		{Current: "k1", Keys: []store.PayloadKey{k1}},
		{Current: "k2", Keys: []store.PayloadKey{k1, k2}}, // every process holds k2 before any seals with it
	} {
		if s != nil {
			if err := s.Close(); err != nil {
				panic(err)
			}
		}
		if s, err = sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{Encryption: enc}); err != nil {
			panic(err)
		}
		if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
			NotificationID: fmt.Sprint("order-", i, "-paid"), Endpoint: "https://receiver.example/hooks", Payload: []byte(`{}`),
		}); err != nil {
			panic(err)
		}
	}
	defer s.Close()
	inUse, err := s.KeysInUse(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("k1:", inUse["k1"], "k2:", inUse["k2"])
	// Output: k1: 1 k2: 1
}

// A profile of one's own says which answer proves that a receiver got a
// delivery. It is registered in one place, Config.Profiles, wrapping
// ack.Builtin: Enqueue refuses a profile name it does not know, where the
// mistake is written, and the Store's workers judge every 2xx answer with
// the profile's Verify (an error fails the delivery with ack_invalid).
func ExampleConfig_profiles() {
	// This receiver answers {"received":"<notification id>"}.
	echo := ack.Profile{Name: "echo", Verify: func(sent ack.Sent, answer []byte) error {
		var a struct{ Received string }
		if err := json.Unmarshal(answer, &a); err != nil || a.Received != sent.ID {
			return fmt.Errorf("echo: the answer does not name the notification")
		}
		return nil
	}}
	profiles := func(name string) (ack.Profile, bool) {
		if name == echo.Name {
			return echo, true
		}
		return ack.Builtin(name)
	}

	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{Profiles: profiles})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	for _, profile := range []string{"echo", "ecoh"} {
		_, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
			NotificationID: "order-1-paid-" + profile,
			Endpoint:       "https://shipping.example/hooks/orders",
			Payload:        []byte(`{"order":"1"}`),
			Profile:        profile,
		})
		if err != nil {
			fmt.Printf("%s: refused, %s\n", profile, courier.CodeOf(err))
			continue
		}
		fmt.Printf("%s: enqueued\n", profile)
	}
	sent := ack.Sent{ID: "order-1-paid-echo", Payload: []byte(`{"order":"1"}`), Attempt: 1}
	fmt.Println(echo.Verify(sent, []byte(`{"received":"order-1-paid-echo"}`)) == nil)
	// Output:
	// echo: enqueued
	// ecoh: refused, invalid_argument
	// true
}

// An operator's view of one delivery reads it without its payload, which
// may be megabytes (sealed, it would be opened too): a page of List for
// its ID. Get reads the payload as well, for a tool that shows it.
func ExampleListParams_id() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	e, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
		NotificationID: "order-1-paid", Endpoint: "https://shipping.example/hooks", Payload: []byte(`{"order":"order-1"}`),
	})
	if err != nil {
		panic(err)
	}

	page, err := s.Outbox.List(ctx, store.ListParams{ID: e.ID, Limit: 1})
	if err != nil {
		panic(err)
	}
	d := page.Deliveries[0]
	fmt.Println(d.NotificationID, d.Status, len(d.Payload), d.PayloadSHA256 != "")
	// Output:
	// order-1-paid pending 0 true
}

// A retention pass, for a periodic job (every hour or so): four calls keep
// every table courier grows bounded, each deleting in short batches what
// aged past its window (see Retention in the package documentation; the
// courier prune command makes the same pass). Here a cancelled delivery
// and a replay cache nonce are eight days old when the pass runs.
func ExampleOutbox_Prune() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	now := time.Now()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{
		Now: func() time.Time { return now }, // the example's clock, to age the rows
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	e, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
		NotificationID: "order-10-paid", Endpoint: "https://receiver.example/hooks", Payload: []byte(`{"order":"order-10"}`),
	})
	if err != nil {
		panic(err)
	}
	if err := s.Outbox.Cancel(ctx, e.ID); err != nil { // finished: suppressed
		panic(err)
	}
	if _, err := s.Replay.Remember(ctx, "key-1", "nonce-1", now.Add(5*time.Minute)); err != nil {
		panic(err)
	}
	now = now.Add(8 * 24 * time.Hour)

	// The pass. Seven days outlasts a sender's 72-hour retry horizon, so a
	// redelivery still finds its inbox record.
	p := store.PruneParams{OlderThan: 7 * 24 * time.Hour}
	deliveries, err := s.Outbox.Prune(ctx, p) // succeeded and suppressed deliveries, dead endpoints' records
	if err != nil {
		panic(err)
	}
	attempts, err := s.Outbox.PruneAttempts(ctx, p)
	if err != nil {
		panic(err)
	}
	records, err := s.Inbox.Prune(ctx, p) // every receiver's records in this database
	if err != nil {
		panic(err)
	}
	nonces, err := s.Replay.Prune(ctx, p) // expired pairs and their counts
	if err != nil {
		panic(err)
	}
	fmt.Println(deliveries, attempts, records, nonces)
	// Output: 1 0 0 2
}

// An alert for a receiver that is down: an endpoint's breaker opened, its
// deliveries wait parked, and Health stays ok, as nothing needs an
// operator yet. The worker's log says so at Warn, in its own words; the
// Store's Hook hears every move of a breaker, once it is committed, for
// an alert of one's own. Here a receiver answers 503 and the breaker,
// with a threshold of one, opens at the first.
func ExampleConfig_hook() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { // no time, for the example's output
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{
		Breaker: store.BreakerConfig{Threshold: 1},
		Hook: func(e store.Event) { // quick, and never waits on the database
			if e.Kind == store.EventEndpoint && e.To != store.EndpointClosed {
				logger.Warn("endpoint breaker", "from", e.From, "to", e.To, "code", e.Code) // and e.EndpointRef: which one
			}
		},
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	if _, err := s.Outbox.Enqueue(ctx, s.DB(), store.EnqueueParams{
		NotificationID: "order-11-paid", Endpoint: down.URL + "/hooks", Payload: []byte(`{"order":"order-11"}`),
	}); err != nil {
		panic(err)
	}
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("shop").Signer, Transport: couriertest.Guard(down.URL).Transport()})
	if err != nil {
		panic(err)
	}
	if _, err := w.Work(ctx); err != nil {
		panic(err)
	}
	h, err := s.Outbox.Health(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Status, h.Counts[courier.StatusRetryWait])
	// Output:
	// level=WARN msg="endpoint breaker" from=closed to=open code=receiver_unavailable
	// ok 1
}

// Update replaces every setting of a subscription: read it, change what
// changes, and write its SubscriptionParams back. Paused, it is skipped by
// Publish, and a delivery already enqueued for it is suppressed
// (subscription_changed) when a worker claims it, not sent; EventTypes
// that drop a type do the same to that type's deliveries. Publishing an
// event again once the subscription is resumed sends it.
func ExampleSubscriptions_Update() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("shop").Signer, Transport: couriertest.Guard(receiver.URL).Transport()})
	if err != nil {
		panic(err)
	}
	publish := func(eventType, eventID string) []store.Published {
		published, err := s.Outbox.Publish(ctx, s.DB(), store.PublishParams{
			Tenant: "acme", EventType: eventType, EventID: eventID, Payload: []byte(`{"order":"order-1"}`),
		})
		if err != nil {
			panic(err)
		}
		return published
	}
	// deliver has the worker claim what is due, then says how p ended.
	deliver := func(p store.Published) {
		if _, err := w.Work(ctx); err != nil {
			panic(err)
		}
		d, err := s.Outbox.Get(ctx, p.ID)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.NotificationID, d.Status, d.LastErrorCode)
	}

	sub, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{
		Tenant: "acme", Endpoint: receiver.URL + "/hooks", EventTypes: []string{"order.paid", "order.refunded"},
		KeyID: "k1", Profile: ack.ProfileNone,
	})
	if err != nil {
		panic(err)
	}
	paid := publish("order.paid", "evt-1")

	// The receiver's team asks for a pause before evt-1 is sent.
	sub.Paused = true
	if _, err := s.Subscriptions.Update(ctx, nil, sub.ID, sub.SubscriptionParams); err != nil {
		panic(err)
	}
	deliver(paid[0])
	fmt.Println("published while paused:", len(publish("order.paid", "evt-2")))

	// Later: resumed, without refunds from now on.
	if sub, err = s.Subscriptions.Get(ctx, nil, sub.ID); err != nil {
		panic(err)
	}
	sub.Paused = false
	sub.EventTypes = []string{"order.paid"}
	if _, err := s.Subscriptions.Update(ctx, nil, sub.ID, sub.SubscriptionParams); err != nil {
		panic(err)
	}
	fmt.Println("refunds published:", len(publish("order.refunded", "evt-3")))
	deliver(publish("order.paid", "evt-1")[0]) // evt-1 again: sent this time
	// Output:
	// evt-1:1 suppressed subscription_changed
	// published while paused: 0
	// refunds published: 0
	// evt-1:1 succeeded
}

// A tenant leaves: Delete removes its subscription. An event published
// after it is not fanned out to it, and its delivery still unsent when it
// was deleted is suppressed when a worker claims it, rather than sent.
func ExampleSubscriptions_Delete() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "courier-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	w, err := client.NewWorker(client.Config{Store: s, Signer: couriertest.StandardWebhooksKeys("shop").Signer, Transport: couriertest.Guard(receiver.URL).Transport()})
	if err != nil {
		panic(err)
	}

	sub, err := s.Subscriptions.Create(ctx, nil, store.SubscriptionParams{
		Tenant: "acme", Endpoint: receiver.URL + "/hooks", EventTypes: []string{"order.paid"}, KeyID: "k1", Profile: ack.ProfileNone,
	})
	if err != nil {
		panic(err)
	}
	published, err := s.Outbox.Publish(ctx, s.DB(), store.PublishParams{
		Tenant: "acme", EventType: "order.paid", EventID: "evt-1", Payload: []byte(`{"order":"order-1"}`),
	})
	if err != nil {
		panic(err)
	}

	if err := s.Subscriptions.Delete(ctx, nil, sub.ID, "acme"); err != nil {
		panic(err)
	}
	again, err := s.Outbox.Publish(ctx, s.DB(), store.PublishParams{
		Tenant: "acme", EventType: "order.paid", EventID: "evt-2", Payload: []byte(`{"order":"order-2"}`),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("published after the Delete:", len(again))

	if _, err := w.Work(ctx); err != nil {
		panic(err)
	}
	d, err := s.Outbox.Get(ctx, published[0].ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.NotificationID, d.Status, d.LastErrorCode)
	_, err = s.Subscriptions.Get(ctx, nil, sub.ID)
	fmt.Println("the subscription:", courier.CodeOf(err))
	// Output:
	// published after the Delete: 0
	// evt-1:1 suppressed subscription_changed
	// the subscription: not_found
}

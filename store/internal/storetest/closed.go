package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/courier-go/courier"
	"github.com/courier-go/courier/internal/endpoint"
	"github.com/courier-go/courier/internal/protocol"
	"github.com/courier-go/courier/store"
)

// testEveryCallOnAClosedStoreFails: after Close every call on the Store,
// of every method group (the outbox's writes and reads, its operations
// and prunes, the inbox and replay cache, subscriptions, endpoints,
// contracts, and the worker's and receivers' protocol) fails at once with
// code database_unavailable and the protocol's ErrClosed in its chain,
// and writes nothing: reopened, the database holds what it held before
// the Close. A Close called again returns nil.
func testEveryCallOnAClosedStoreFails(t *testing.T, open OpenFunc) {
	b := setup(t, open, store.Config{})
	const hooks = "https://receiver.example/hooks"
	held := b.enqueue(t, delivery("closed-held"))
	leased := b.claim(t, "w", 1, time.Minute)
	if len(leased) != 1 {
		t.Fatalf("claimed %d, want 1", len(leased))
	}
	b.enqueue(t, delivery("closed-pending"))
	sub, err := b.store.Subscriptions.Create(b.ctx, nil, store.SubscriptionParams{Tenant: "t", Endpoint: hooks, EventTypes: []string{"*"}, KeyID: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	inbox := protocol.InboxFor(b.store)
	key := protocol.InboxKey{Sender: "s", Key: "k", PayloadSHA256: "0000000000000000000000000000000000000000000000000000000000000000"}
	before := b.store.Outbox // the method groups stay reachable after Close

	if err := b.store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.store.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	prune := store.PruneParams{OlderThan: time.Hour}
	tx := b.begin(t) // the caller's own transaction, on the database it passed to Open
	defer tx.Rollback()
	calls := map[string]func() error{
		"Begin":          func() error { _, err := b.store.Begin(b.ctx); return err },
		"KeysInUse":      func() error { _, err := b.store.KeysInUse(b.ctx); return err },
		"Outbox.Enqueue": func() error { _, err := before.Enqueue(b.ctx, tx, delivery("closed-new")); return err },
		"Outbox.EnqueueMany": func() error {
			_, err := before.EnqueueMany(b.ctx, tx, []store.EnqueueParams{delivery("closed-new")})
			return err
		},
		"Outbox.EnqueueCommand": func() error {
			_, err := before.EnqueueCommand(b.ctx, tx, store.CommandParams{Endpoint: sourceEndpoint, Payload: command(t, "change", "closed-r1", digestA, 5, `{}`)})
			return err
		},
		"Outbox.Publish": func() error {
			_, err := before.Publish(b.ctx, tx, store.PublishParams{Tenant: "t", EventType: "e", EventID: "closed-event", Payload: []byte(`{}`)})
			return err
		},
		"Outbox.Get":           func() error { _, err := before.Get(b.ctx, held.ID); return err },
		"Outbox.Lookup":        func() error { _, err := before.Lookup(b.ctx, "closed-held", hooks); return err },
		"Outbox.List":          func() error { _, err := before.List(b.ctx, store.ListParams{}); return err },
		"Outbox.Cancel":        func() error { return before.Cancel(b.ctx, held.ID) },
		"Outbox.Redrive":       func() error { _, err := before.Redrive(b.ctx, store.RedriveParams{ID: held.ID}); return err },
		"Outbox.Attempts":      func() error { _, err := before.Attempts(b.ctx, held.ID); return err },
		"Outbox.Health":        func() error { _, err := before.Health(b.ctx); return err },
		"Outbox.Check":         func() error { _, err := before.Check(b.ctx, 100); return err },
		"Outbox.Prune":         func() error { _, err := before.Prune(b.ctx, prune); return err },
		"Outbox.PruneAttempts": func() error { _, err := before.PruneAttempts(b.ctx, prune); return err },
		"Inbox.Prune": func() error {
			_, err := b.store.Inbox.Prune(b.ctx, store.PruneParams{OlderThan: 48 * time.Hour})
			return err
		},
		"Replay.Remember": func() error {
			_, err := b.store.Replay.Remember(b.ctx, "key", "nonce", b.clock.Now().Add(time.Minute))
			return err
		},
		"Replay.Prune": func() error { _, err := b.store.Replay.Prune(b.ctx, prune); return err },
		"Subscriptions.Create": func() error {
			_, err := b.store.Subscriptions.Create(b.ctx, nil, store.SubscriptionParams{Tenant: "t", Endpoint: hooks, EventTypes: []string{"e"}, KeyID: "k1"})
			return err
		},
		"Subscriptions.Update": func() error {
			_, err := b.store.Subscriptions.Update(b.ctx, nil, sub.ID, store.SubscriptionParams{Tenant: "t", Endpoint: hooks, EventTypes: []string{"e"}, KeyID: "k1"})
			return err
		},
		"Subscriptions.Get":        func() error { _, err := b.store.Subscriptions.Get(b.ctx, nil, sub.ID); return err },
		"Subscriptions.List":       func() error { _, err := b.store.Subscriptions.List(b.ctx, "t"); return err },
		"Endpoints.Get":            func() error { _, err := b.store.Endpoints.Get(b.ctx, hooks); return err },
		"Endpoints.List":           func() error { _, err := b.store.Endpoints.List(b.ctx); return err },
		"Endpoints.Resolve":        func() error { _, err := b.store.Endpoints.Resolve(b.ctx, endpoint.Ref(hooks)); return err },
		"Endpoints.Enable":         func() error { return b.store.Endpoints.Enable(b.ctx, hooks) },
		"Endpoints.Disable":        func() error { return b.store.Endpoints.Disable(b.ctx, hooks) },
		"Endpoints.SetLimits":      func() error { return b.store.Endpoints.SetLimits(b.ctx, hooks, store.Limits{MaxInFlight: 1}) },
		"Endpoints.BlockedKeys":    func() error { _, err := b.store.Endpoints.BlockedKeys(b.ctx, hooks, 10); return err },
		"Contracts.Pin":            func() error { return b.store.Contracts.Pin(b.ctx, sourceEndpoint, key.PayloadSHA256) },
		"Contracts.Get":            func() error { _, err := b.store.Contracts.Get(b.ctx, sourceEndpoint); return err },
		"Contracts.List":           func() error { _, err := b.store.Contracts.List(b.ctx); return err },
		"Contracts.FailMismatched": func() error { _, err := b.store.Contracts.FailMismatched(b.ctx, sourceEndpoint); return err },
		"protocol.Claim": func() error {
			_, err := b.proto().Claim(b.ctx, protocol.ClaimParams{Owner: "w2", Limit: 10, Lease: time.Minute})
			return err
		},
		"protocol.Release":        func() error { _, err := b.proto().Release(b.ctx, leased[0].Lease); return err },
		"protocol.Listen":         func() error { _, _, err := b.proto().Listen(b.ctx); return err },
		"protocol.Inbox.Record":   func() error { _, err := inbox.Record(b.ctx, tx, key); return err },
		"protocol.Inbox.Complete": func() error { return inbox.Complete(b.ctx, tx, key, []byte(`{}`)) },
		"protocol.Inbox.Claim":    func() error { _, _, err := inbox.Claim(b.ctx, key, time.Minute); return err },
		"protocol.Inbox.ReleaseClaim": func() error {
			return inbox.ReleaseClaim(b.ctx, protocol.InboxClaim{Key: key, Token: 1})
		},
		"protocol.Inbox.CompleteClaim": func() error {
			return inbox.CompleteClaim(b.ctx, tx, protocol.InboxClaim{Key: key, Token: 1}, []byte(`{}`))
		},
		"protocol.Inbox.RecordCompleted": func() error {
			_, err := inbox.RecordCompleted(b.ctx, tx, key, []byte(`{}`))
			return err
		},
		"protocol.Settle": func() error {
			settled, err := b.proto().Settle(b.ctx, protocol.Outcome{Lease: leased[0].Lease, Result: protocol.Succeeded})
			if err == nil && len(settled) == 1 {
				err = settled[0].Err
			}
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, courier.CodeDatabaseUnavailable) || !errors.Is(err, protocol.ErrClosed) {
			t.Errorf("%s on a closed Store = %v, want database_unavailable with ErrClosed", name, err)
		}
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	// Nothing was written: the leased delivery is still leased, the
	// other still pending, and nothing else was enqueued.
	again, err := openStore(t, b.ctx, b.db, store.Config{Now: b.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	page, err := again.Outbox.List(b.ctx, store.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]courier.Status{}
	for _, d := range page.Deliveries {
		got[d.NotificationID] = d.Status
	}
	if len(got) != 2 || got["closed-held"] != courier.StatusLeased || got["closed-pending"] != courier.StatusPending {
		t.Errorf("after the calls on the closed Store the outbox holds %v, want closed-held leased and closed-pending pending", got)
	}
}
